// runtime/Timing.h — timing GPU work with CUDA events: what the autotuner and the benchmarks measure with.
#pragma once

#include "ir/Types.h"
#include "runtime/Driver.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <functional>
#include <vector>

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

// A device buffer of pseudo-random bf16 values, uniform in [-0.25, 0.25) (read as fp32 pairs, finite values of
// the same range), the inputs of what the benchmarks and the autotuner time. A K-long dot product of them has
// a standard deviation of about sqrt(K) / 48 (0.9 at K = 2048, 2.2 at 11008), as a model's normalised
// activations against its weights give, so an epilogue's activation takes the paths it takes on real data.
// Not a constant: a Hopper tensor core fed one repeated value draws less power, so near the power limit a
// constant-filled gemm runs faster than on real data (Llama-2-7B's 2048-row gate/up without epilogue: 427 µs
// on the byte 0x3C, 476 on these values, cuBLAS 468 on randn; bench/NOTES.md, session 34). Each call starts
// at another place in the sequence, so two buffers differ.
llvm::Expected<cuda::DeviceBuffer> filled(size_t bytes);

// The value to fill each of `parts` row-square partials with (EpiParams::row_sq) so that a folded norm over K
// columns of filled() data computes the 1 / rms those rows have (~6.9): K times filled()'s mean square over
// `parts`. Its products then stay the size a model's are, and its activation takes the paths real data takes.
float rowSquarePartial(int64_t k, int parts);

// A device buffer of `bytes` of fp32 row-square partials, each rowSquarePartial(k, parts).
llvm::Expected<cuda::DeviceBuffer> filledRowSquares(size_t bytes, int64_t k, int parts);

// `count` pseudo-random values uniform in [-halfRange, halfRange) (splitmix64 from `seed`, 24 random bits a
// value, rounded to `type` as io/Safetensors.h's floatToBf16 / floatToF16 round) as the bytes of bf16, f16 or f32
// elements: filled()'s data, and the engine's synthetic weights (Engine::fillSyntheticWeights). The same seed
// gives the same values. An I32 type is a programming error.
std::vector<uint8_t> randomElements(size_t count, ir::DType type, float halfRange, uint64_t seed);

} // namespace minfer::timing
