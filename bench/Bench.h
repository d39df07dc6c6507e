// bench/Bench.h — kernel benchmarks: time a launch with CUDA events (warm-up, median of many runs,
// inputs rotated across several copies so L2 does not flatter), and report what it moved and computed
// against the ceilings measured in the same run. Results are JSON lines on stdout.
#pragma once

#include "runtime/Driver.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <functional>
#include <string>
#include <vector>

namespace minfer::bench {

struct Ceilings {
  double copyGBps = 0; // device-to-device copy bandwidth (read + write bytes / time), measured here
};

struct Result {
  std::string kernel; // the spec's name()
  std::string shape;  // e.g. "M=1 N=5632 K=2048": space-separated NAME=INTEGER pairs (see below)
  double ms = 0;      // median
  double bytes = 0;   // bytes the kernel must move at least (weights + activations + KV)
  double flops = 0;   // useful floating-point operations
  // Which bench/torch_baseline.py measurement runs the same shape; empty means the suite's name. The
  // baseline reads its dimensions from `shape`, so use these names: "gemm" and "gemv" (y[M,N] = x[M,K] ·
  // W[N,K]ᵀ, gemv for M = 1..8): M, N, K; "attention_decode" (one query token per sequence against a bf16
  // KV cache): batch, heads, kv_heads, head_dim, context. Other kinds get no baseline. (`= {}` lets
  // five-field aggregate initialisers leave it out without -Wmissing-field-initializers.)
  std::string baseline = {};
};

// Median milliseconds of `launch(i)` over `iters` runs after `warmup` runs; `i` counts runs, so a caller
// can rotate through copies of its inputs. Each run is bracketed by CUDA events on the default stream and
// all runs are enqueued before the host waits; the GPU is kept busy while they are enqueued, so a kernel
// shorter than the host's launch overhead is timed without the gaps between launches.
llvm::Expected<double> timeMedian(const std::function<llvm::Error(int)> &launch, int warmup = 10, int iters = 50);

// Device-to-device copy of a 1 GiB buffer: the bandwidth ceiling.
llvm::Expected<Ceilings> measureCeilings();

// One JSON object: the result, its GB/s and TFLOP/s, and the GB/s as a fraction of copy bandwidth.
llvm::json::Object toJSON(const Result &r, const Ceilings &c);

// How many copies of a kernel's inputs to rotate through so one run's data is not still in L2 from the
// last: enough to cover 3x the 50 MB L2 of an H100/H200, at most 16 (bench/torch_baseline.py does the same).
int copiesFor(double bytes);

// A device buffer filled with the byte 0x3C: as bf16 0x3C3C is ~0.0115, finite, so accumulators stay finite
// and the math costs what real data would.
llvm::Expected<cuda::DeviceBuffer> filled(size_t bytes);

// A family of benchmarks (gemm, gemv, attention, ...): runs its shapes and returns the results.
struct Suite {
  std::string name;
  std::function<llvm::Expected<std::vector<Result>>(const Ceilings &)> run;
};
// Each bench/<family>Bench.cpp registers its suite with a static Registration object.
std::vector<Suite> &suites();
struct Registration {
  Registration(std::string name, std::function<llvm::Expected<std::vector<Result>>(const Ceilings &)> run) {
    suites().push_back({std::move(name), std::move(run)});
  }
};

} // namespace minfer::bench
