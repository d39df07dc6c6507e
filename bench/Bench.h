// bench/Bench.h — kernel benchmarks: time a launch with CUDA events (warm-up, median of many runs,
// inputs rotated across several copies so L2 does not flatter), and report what it moved and computed
// against the ceilings measured in the same run. Results are JSON lines on stdout.
#pragma once

#include "runtime/Driver.h"
#include "runtime/Timing.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <functional>
#include <string>
#include <vector>

namespace minfer::bench {

struct Ceilings {
  double copyGBps = 0; // device-to-device copy bandwidth (read + write bytes / time), measured here
  double hostToDeviceGBps = 0; // a plain copy from page-locked host memory to the device, measured here
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

// The timing loop and its helpers (runtime/Timing.h), shared with the autotuner.
using timing::copiesFor;
using timing::filled;
using timing::filledRowSquares;
using timing::timeMedian;

// Device-to-device copy of a 1 GiB buffer: the bandwidth ceiling.
llvm::Expected<Ceilings> measureCeilings();

// One JSON object: the result, its GB/s and TFLOP/s, and the GB/s as a fraction of copy bandwidth.
llvm::json::Object toJSON(const Result &r, const Ceilings &c);

// Whether minfer_kernel_bench's --filter (a regular expression, empty: everything) matches `what`: a kernel's
// name and shape, "gemm_bf16_n2560_k2048_wgmma_m128n128_s7_pp_epi_none M=2048 N=2560 K=2048". The matmul
// suites (gemm, gemm_fused, gemv, gemv_fused) and the attention suite ("attention_prefill_bf16_h32_kv4_d64_
// wgmma_m128n128_s2 batch=1 heads=32 kv_heads=4 head_dim=64 tokens=2048 context=2048") skip the kernels it
// does not match, e.g. to profile one under ncu.
bool selected(const std::string &what);
void setFilter(const std::string &regex);

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
