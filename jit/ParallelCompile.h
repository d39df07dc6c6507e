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

#include <functional>
#include <string>
#include <vector>

namespace minfer {

// One kernel compiled now, and how long it took in the process that compiled it (NVRTC and the cache store).
struct KernelCompileTime {
  std::string name;
  double ms = 0;
};

struct CompileStats {
  unsigned kernels = 0;  // distinct kernels (by name)
  unsigned hits = 0;     // found in the cache before any compile
  unsigned misses = 0;   // compiled now (by a worker or in-process)
  unsigned workers = 0;  // processes forked (0: compiled in-process)
  double seconds = 0;    // wall time of the whole call
  double lookupSeconds = 0; // computing the keys and reading the hits from the cache (part of `seconds`)
  std::vector<KernelCompileTime> compiled; // each kernel compiled now, in the order they finished
};

// A kernel just finished, for a progress display: `done` of `total` kernels to compile so far (in-process
// compiles that find the kernel in the cache after all report `hit`).
struct CompileProgress {
  std::string name;
  size_t done = 0, total = 0;
  double ms = 0;
  bool hit = false;
};
using CompileProgressFn = std::function<void(const CompileProgress &)>;

// The compiled kernels, in input order; sources with the same name are compiled once (two sources with one
// name but different text are an error). A compile error names its kernel and carries NVRTC's log; a worker
// that crashes is an error naming the kernels it had. Other threads may keep calling compileKernel meanwhile:
// the workers are forked only between their NVRTC calls (forkOutsideNvrtc). `progress`, when given, is
// called in this process as each kernel to compile finishes (workers report on their pipes as they go).
llvm::Expected<std::vector<CompiledKernel>> compileAll(llvm::ArrayRef<KernelSource> sources, const Target &target,
                                                       const CompileOptions &opts, KernelCache &cache,
                                                       unsigned jobs, CompileStats *stats = nullptr,
                                                       const CompileProgressFn &progress = nullptr);

// The worker count when the user names none: one per hardware thread this process may run on.
unsigned defaultJobs();

} // namespace minfer
