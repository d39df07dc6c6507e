// runtime/Timing.h — timing GPU work with CUDA events: what the autotuner and the benchmarks measure with.
#pragma once

#include "runtime/Driver.h"

#include "llvm/Support/Error.h"

#include <functional>

namespace minfer::timing {

// Median milliseconds of `launch(i)` over `iters` runs after `warmup` runs; `i` counts runs, so a caller
// can rotate through copies of its inputs. Each run is bracketed by CUDA events on the default stream and
// all runs are enqueued before the host waits; the GPU is kept busy while they are enqueued, so a kernel
// shorter than the host's launch overhead is timed without the gaps between launches.
llvm::Expected<double> timeMedian(const std::function<llvm::Error(int)> &launch, int warmup = 10, int iters = 50);

// Median milliseconds of one launch in a chain: each timed run is `chain` launches back to back, all but the
// first programmatic dependent launches (`launch(i, dependent)`, `i` counting launches), as the decode step
// runs its kernels. A kernel that loads its weights before it waits for the one before it (the gemvs) is
// then timed with that load under the previous launch's drain, as in the step.
llvm::Expected<double> timeMedianChained(const std::function<llvm::Error(int, bool)> &launch, int chain,
                                         int warmup = 10, int iters = 50);

// How many copies of a kernel's inputs to rotate through so one run's data is not still in L2 from the
// last: enough to cover 3x the 50 MB L2 of an H100/H200, at most 16 (bench/torch_baseline.py does the same).
int copiesFor(double bytes);

// A device buffer filled with the byte 0x3C: as bf16 0x3C3C is ~0.0115, finite, so accumulators stay finite
// and the math costs what real data would.
llvm::Expected<cuda::DeviceBuffer> filled(size_t bytes);

} // namespace minfer::timing
