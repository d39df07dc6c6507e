// jit/ParallelCompile.h — compiles a model's kernels in parallel worker processes.
//
// NVRTC serialises heavily inside one process (8 threads measured ≈ 1.4× one thread), so parallelism comes
// from processes: compileAll forks `jobs` children, each compiles its share through the disk cache, and the
// cache is the channel back — the parent reads every entry from it once the children exit. Without a usable
// cache, or with jobs <= 1, everything is compiled serially in this process.
#pragma once

#include "jit/KernelCache.h"
#include "jit/Nvrtc.h"
#include "jit/Target.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <vector>

namespace minfer {

struct CompileStats {
  unsigned kernels = 0;  // distinct kernels (by name)
  unsigned hits = 0;     // found in the cache before any compile
  unsigned misses = 0;   // compiled now (by a worker or in-process)
  unsigned workers = 0;  // processes forked (0: compiled in-process)
  double seconds = 0;    // wall time of the whole call
};

// The compiled kernels, in input order; sources with the same name are compiled once (two sources with one
// name but different text are an error). A compile error names its kernel and carries NVRTC's log; a worker
// that crashes is an error naming the kernels it had. Other threads may keep calling compileKernel meanwhile:
// the workers are forked only between their NVRTC calls (forkOutsideNvrtc).
llvm::Expected<std::vector<CompiledKernel>> compileAll(llvm::ArrayRef<KernelSource> sources, const Target &target,
                                                       const CompileOptions &opts, KernelCache &cache,
                                                       unsigned jobs, CompileStats *stats = nullptr);

// The worker count when the user names none: one per hardware thread this process may run on.
unsigned defaultJobs();

} // namespace minfer
