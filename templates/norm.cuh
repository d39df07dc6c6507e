// templates/norm.cuh — RMSNorm and LayerNorm over the last dim of bf16 activations [rows, D], and their
// fusions with the residual add before them.
//
//   rms_norm<D, THREADS, WeightT>  (x, gamma, y, rows, eps)         y = x / sqrt(mean(x²) + eps) * gamma
//   layer_norm<D, THREADS, WeightT>(x, gamma, beta, y, rows, eps)   y = (x - mean) / sqrt(var + eps) * gamma + beta
//   rms_norm_residual / layer_norm_residual: the same of s = a + b, also writing s (the new residual stream)
//
// One block of THREADS threads per row. Each thread loads its 16-byte vectors of the row once into
// registers (PER of them, VEC bf16 each, coalesced: vector i of the row goes to thread i % THREADS), the
// block reduces in fp32 (common.cuh blockSum), and the output is computed from the registers: x is read
// once. LayerNorm is two-pass over the registers (mean, then the biased variance of x - mean) like the
// interpreter, so a large mean does not cancel the variance. Weights (gamma, beta) are bf16, f16 or f32
// (WeightT), read through toFloat; math is fp32 (rsqrtf: ≤ 2 ulp).
//
// The fused residual variants round s = a + b to bf16 before normalising it, exactly what the unfused
// `add` then `norm` do (and what HF does in bf16), so fusing changes no bit; s may alias a or b (each
// element is read and then written by the same thread).
//
// Pointers must be 16-byte aligned; D's divisibility picks the access width (vecWidth): 8 bf16 when D is
// a multiple of 8, narrower otherwise.
#pragma once

#include "common.cuh"
#include "pointwise.cuh"
#include "ptx.cuh"

namespace minfer {

// The kernels' one argument; its host mirror (same field names and offsets, checked in every generated
// source) is in compiler/kernels/RowOps.h.
struct NormParams {
  const bf16 *a;     // [rows, D]: x, or the first addend of the residual forms
  const bf16 *b;     // [rows, D]: the second addend (residual forms)
  const void *gamma; // [D] of WeightT
  const void *beta;  // [D] of WeightT (layer norms)
  bf16 *sum;         // [rows, D]: a + b (residual forms), may alias a or b
  bf16 *y;           // [rows, D]
  int rows;
  float eps;
};

namespace norm_detail {

// The registers of one row are PER × VEC floats; 16 vectors of 8 is 128 floats per thread, past which
// the row should get more threads rather than spill.
inline constexpr int kMaxVectorsPerThread = 16;

template <int D, int THREADS, typename WeightT, bool LAYER, bool RESIDUAL>
__device__ __forceinline__ void normRow(const bf16 *a, const bf16 *b, const WeightT *gamma, const WeightT *beta,
                                        bf16 *sum, bf16 *y, float eps) {
  static_assert(D > 0, "norm: D must be positive");
  static_assert(THREADS % kWarpSize == 0 && THREADS >= kWarpSize && THREADS <= 1024,
                "norm: THREADS must be whole warps, at most 1024");
  constexpr int VEC = vecWidth<bf16, D>(); // bf16 per access
  constexpr int NV = D / VEC;              // vectors per row
  constexpr int PER = (NV + THREADS - 1) / THREADS;
  static_assert(PER <= kMaxVectorsPerThread, "norm: row too long for THREADS threads; raise THREADS");
  __shared__ float scratch[THREADS / kWarpSize];

  float v[PER][VEC];
  float acc = 0.f;
#pragma unroll
  for (int p = 0; p < PER; ++p) {
    const int i = p * THREADS + threadIdx.x;
    if (i < NV) {
      loadFloats<VEC>(a + i * VEC, v[p]);
      if constexpr (RESIDUAL) {
        float r[VEC];
        loadFloats<VEC>(b + i * VEC, r);
#pragma unroll
        for (int e = 0; e < VEC; ++e) v[p][e] = toFloat(toBf16(v[p][e] + r[e])); // the stored residual
        storeBf16<VEC>(sum + i * VEC, v[p]);
      }
#pragma unroll
      for (int e = 0; e < VEC; ++e) acc += LAYER ? v[p][e] : v[p][e] * v[p][e];
    }
  }

  float mean = 0.f, inv;
  if constexpr (LAYER) {
    mean = blockSum<THREADS>(acc, scratch) * (1.f / D);
    float sq = 0.f;
#pragma unroll
    for (int p = 0; p < PER; ++p)
      if (p * THREADS + static_cast<int>(threadIdx.x) < NV) {
#pragma unroll
        for (int e = 0; e < VEC; ++e) sq += (v[p][e] - mean) * (v[p][e] - mean);
      }
    inv = rsqrtf(blockSum<THREADS>(sq, scratch) * (1.f / D) + eps);
  } else {
    inv = rsqrtf(blockSum<THREADS>(acc, scratch) * (1.f / D) + eps);
  }

#pragma unroll
  for (int p = 0; p < PER; ++p) {
    const int i = p * THREADS + threadIdx.x;
    if (i < NV) {
      float g[VEC], out[VEC];
      loadFloats<VEC>(gamma + i * VEC, g);
#pragma unroll
      for (int e = 0; e < VEC; ++e) out[e] = (v[p][e] - mean) * inv * g[e];
      if constexpr (LAYER) {
        float bt[VEC];
        loadFloats<VEC>(beta + i * VEC, bt);
#pragma unroll
        for (int e = 0; e < VEC; ++e) out[e] += bt[e];
      }
      storeBf16<VEC>(y + i * VEC, out);
    }
  }
}

// A norm kernel's block: row tile.x, its pointers taken from the Params.
template <int D, int THREADS, typename WeightT, bool LAYER, bool RESIDUAL, class Wait>
__device__ __forceinline__ void normTile(const NormParams &p, const Tile &tile, const Wait &wait) {
  // gamma and beta are weights: asked into L2 before the wait, each line once over the grid (in practice by
  // the first row's block), so that the loads after the statistics do not go to DRAM (the layers' matmul
  // weights stream through L2 between two decode steps).
  const int index = tile.x * bodyThreads() + static_cast<int>(threadIdx.x), count = tile.nx * bodyThreads();
  prefetchLinesL2(p.gamma, D * static_cast<long long>(sizeof(WeightT)), index, count);
  if (LAYER) prefetchLinesL2(p.beta, D * static_cast<long long>(sizeof(WeightT)), index, count);
  wait();
  const long long r = tile.x;
  if (r >= p.rows) return;
  normRow<D, THREADS, WeightT, LAYER, RESIDUAL>(p.a + r * D, RESIDUAL ? p.b + r * D : nullptr,
                                                static_cast<const WeightT *>(p.gamma),
                                                LAYER ? static_cast<const WeightT *>(p.beta) : nullptr,
                                                RESIDUAL ? p.sum + r * D : nullptr, p.y + r * D, p.eps);
}

} // namespace norm_detail

// y = rms_norm(a)
template <int D, int THREADS, typename WeightT>
__global__ void __launch_bounds__(THREADS) rms_norm(const NormParams p) {
  norm_detail::normTile<D, THREADS, WeightT, false, false>(p, launchTile(), GridWait{});
}

// y = layer_norm(a)
template <int D, int THREADS, typename WeightT>
__global__ void __launch_bounds__(THREADS) layer_norm(const NormParams p) {
  norm_detail::normTile<D, THREADS, WeightT, true, false>(p, launchTile(), GridWait{});
}

// sum = a + b (rounded to bf16), y = rms_norm(sum).
template <int D, int THREADS, typename WeightT>
__global__ void __launch_bounds__(THREADS) rms_norm_residual(const NormParams p) {
  norm_detail::normTile<D, THREADS, WeightT, false, true>(p, launchTile(), GridWait{});
}

// sum = a + b (rounded to bf16), y = layer_norm(sum).
template <int D, int THREADS, typename WeightT>
__global__ void __launch_bounds__(THREADS) layer_norm_residual(const NormParams p) {
  norm_detail::normTile<D, THREADS, WeightT, true, true>(p, launchTile(), GridWait{});
}

// Any of the four as a task of the persistent decode kernel (persistent.cuh).
template <int D, int THREADS, typename WeightT, bool LAYER, bool RESIDUAL> struct NormTask {
  using Params = NormParams;
  static constexpr int kThreads = THREADS;
  template <class Wait> __device__ __forceinline__ static void run(const Params &p, const Tile &t, const Wait &w) {
    norm_detail::normTile<D, THREADS, WeightT, LAYER, RESIDUAL>(p, t, w);
  }
  __device__ __forceinline__ static void prefetch(const Params &, const Tile &) {} // no weights to stream
};

} // namespace minfer
