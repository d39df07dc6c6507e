// runtime/KernelLoader.h — a KernelSpec compiled for the GPU at hand and loaded, ready to launch.
//
// The one path from a spec to a CUfunction outside a bundle: the device's target, the kernel through the
// disk cache (verified entries only), the module loaded, the function looked up by its lowered name.
// Kernel tests and benchmarks use it; the runtime's module registry will too.
#pragma once

#include "compiler/KernelCache.h"
#include "compiler/Target.h"
#include "compiler/kernels/KernelSpec.h"
#include "runtime/Driver.h"

#include "llvm/Support/Error.h"

namespace minfer {

struct LoadedKernel {
  cuda::Module module;
  cuda::Function fn;
};

// The target of device 0, e.g. sm_90 on an H100/H200.
llvm::Expected<Target> deviceTarget();

// Compiles `spec` for `target` through `cache` (nullptr: compile uncached) and loads it.
llvm::Expected<LoadedKernel> loadKernel(const KernelSpec &spec, const Target &target, KernelCache *cache);
// The same for the device's own target, through the default cache.
llvm::Expected<LoadedKernel> loadKernel(const KernelSpec &spec);

} // namespace minfer
