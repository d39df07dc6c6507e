// runtime/KernelLoader.h — a KernelSpec compiled for the GPU at hand and loaded, ready to launch.
//
// The one path from a spec to a CUfunction outside a bundle: the device's target, the kernel through the
// disk cache (verified entries only), the module loaded, the function looked up by its lowered name.
// Kernel tests and benchmarks use it; the runtime's module registry will too.
#pragma once

#include "jit/KernelCache.h"
#include "jit/Target.h"
#include "compiler/kernels/KernelSpec.h"
#include "runtime/Driver.h"

#include "llvm/Support/Error.h"

namespace minfer {

struct LoadedKernel {
  cuda::Module module;
  cuda::Function fn;
};

// The target of device 0, e.g. sm_90a on an H100/H200 (sm_90 code runs there too), sm_89 on an L4.
llvm::Expected<Target> deviceTarget();

// Compiles `src` for `target` through `cache` (nullptr: compile uncached) and loads it.
llvm::Expected<LoadedKernel> loadKernel(const KernelSource &src, const Target &target, KernelCache *cache);
// The same for a spec's source.
llvm::Expected<LoadedKernel> loadKernel(const KernelSpec &spec, const Target &target, KernelCache *cache);
// The same for the device's own target, through the default cache.
llvm::Expected<LoadedKernel> loadKernel(const KernelSpec &spec);

// Launches `fn`, compiled from `spec`, over `rows`: its Params struct (the bytes of spec.params(), at
// `params`) and after it the tensor maps the spec asks for (KernelSpec::tensorMaps), encoded from the
// pointers in those Params. The one launch path of the runtime, the tests, the benchmarks and the tuner.
llvm::Error launchSpec(const cuda::Function &fn, const KernelSpec &spec, int64_t rows, const void *params,
                       cuda::StreamHandle stream = nullptr, bool dependent = false);

// launchSpec with a typed Params struct: P must be the spec's Params type.
template <typename P>
llvm::Error launchKernel(const cuda::Function &fn, const KernelSpec &spec, int64_t rows, const P &params,
                         cuda::StreamHandle stream = nullptr, bool dependent = false) {
  if (&P::layout() != &spec.params())
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "launch of " + spec.name() + ": given " +
                                                                       P::layout().name + ", it takes " +
                                                                       spec.params().name);
  return launchSpec(fn, spec, rows, &params, stream, dependent);
}

} // namespace minfer
