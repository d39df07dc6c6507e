// templates/gemv.cuh — decode matmul for a handful of rows: C[M, N] = epi(A[M, K] · W[N, K]^T), M small.
//
// At decode, M (sequences in the batch) is 1..8 and the kernel is bound by reading W once: N * K * 2
// bytes against a few kilobytes of activations. Everything here serves streaming W at full bandwidth:
//   * a warp owns ROWS_PER_WARP rows of W and walks K with all 32 lanes, each lane loading 16 bytes
//     (8 bf16) per row per step, so one warp load is 512 contiguous bytes;
//   * each lane issues ROWS_PER_WARP * kUnroll (about 8) independent 16-byte W loads before it uses
//     any: with a few warps per SM resident that is 100+ KB in flight per SM, well past the ~25 KB per
//     SM that Little's law asks for at 4 TB/s and ~0.8 us of DRAM latency;
//   * W goes through the read-only path without allocating in L1 (it is read exactly once); A (a few
//     KB, read by every warp) stays in L1;
//   * fp32 accumulation, then one warp reduction per (row of A, row of W) and the epilogue policy;
//   * no shared memory and no block-level synchronisation: a warp is an independent unit of work, and a
//     block of WARPS warps only sets the launch granularity.
// Every activation row of A is multiplied with each W load while it is in registers, so W is read once
// for all MAX_M rows. M above MAX_M is still correct (the warp loops over groups of MAX_M rows, reading
// W again); the spec picks MAX_M >= M.
//
// Kernel arguments, in order (the same as gemm.cuh, so a matmul can use either):
//   bf16 *C            [M, N]   may alias epi.residual (in-place residual add), never A or W
//   const bf16 *A      [M, K]   16-byte aligned
//   const bf16 *W      [N, K]   16-byte aligned
//   int M              rows, >= 0
//   EpiParams epi      bias [N] and/or residual [M, N], as the policy needs
// Launch: grid ceil(N / (ROWS_PER_WARP * WARPS)), block 32 * WARPS, no shared memory.
#pragma once

#include "common.cuh"
#include "epilogue.cuh"

namespace minfer {

namespace gemv_detail {

template <int V> struct IntConstant {
  static constexpr int value = V;
};

// W: read once per step, so keep it out of L1 (no_allocate) and use the non-coherent path (W is
// constant for the kernel's lifetime). Not volatile: the compiler may schedule it like any load.
__device__ __forceinline__ uint4 loadStreaming(const bf16 *p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// A: small and read by every warp of the SM, so let it live in L1.
__device__ __forceinline__ uint4 loadCached(const bf16 *p) { return __ldg(reinterpret_cast<const uint4 *>(p)); }

__device__ __forceinline__ float2 unpack(unsigned bits) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&bits));
}

// acc += a · w over 8 bf16 pairs.
__device__ __forceinline__ float dot8(float acc, const float (&a)[8], const uint4 &w) {
  const float2 w0 = unpack(w.x), w1 = unpack(w.y), w2 = unpack(w.z), w3 = unpack(w.w);
  acc = fmaf(a[0], w0.x, acc);
  acc = fmaf(a[1], w0.y, acc);
  acc = fmaf(a[2], w1.x, acc);
  acc = fmaf(a[3], w1.y, acc);
  acc = fmaf(a[4], w2.x, acc);
  acc = fmaf(a[5], w2.y, acc);
  acc = fmaf(a[6], w3.x, acc);
  acc = fmaf(a[7], w3.y, acc);
  return acc;
}

__device__ __forceinline__ void unpack8(float (&out)[8], const uint4 &v) {
  const float2 p0 = unpack(v.x), p1 = unpack(v.y), p2 = unpack(v.z), p3 = unpack(v.w);
  out[0] = p0.x, out[1] = p0.y, out[2] = p1.x, out[3] = p1.y;
  out[4] = p2.x, out[5] = p2.y, out[6] = p3.x, out[7] = p3.y;
}

__host__ __device__ constexpr int cmin(int a, int b) { return a < b ? a : b; }
__host__ __device__ constexpr int cmax(int a, int b) { return a > b ? a : b; }

} // namespace gemv_detail

template <int N, int K, int MAX_M, int ROWS_PER_WARP, int WARPS, class Epi>
__global__ void __launch_bounds__(WARPS * 32)
    gemv(bf16 *C, const bf16 *__restrict__ A, const bf16 *__restrict__ W, int M, EpiParams epi) {
  using namespace gemv_detail;
  static_assert(N >= 1 && K >= 8, "gemv: N must be at least 1 and K at least 8");
  static_assert(K % 8 == 0, "gemv: K must be a multiple of 8 (rows are read 16 bytes = 8 bf16 at a time)");
  static_assert(MAX_M >= 1 && MAX_M <= 16, "gemv: MAX_M must be 1..16 (larger M belongs to gemm)");
  static_assert(ROWS_PER_WARP >= 1 && ROWS_PER_WARP <= 8, "gemv: ROWS_PER_WARP must be 1..8");
  static_assert(WARPS >= 1 && WARPS <= 32, "gemv: WARPS must be 1..32");

  constexpr int R = ROWS_PER_WARP;
  constexpr int kChunks = K / 8;                     // 16-byte chunks per row
  constexpr int kIters = (kChunks + 31) / 32;        // steps of 32 chunks (one per lane) along K
  // Steps unrolled together: about 8 independent W loads per lane in flight (R * kUnroll), while the
  // MAX_M * kUnroll activation vectors held alongside stay within ~64 registers.
  constexpr int kUnroll = cmax(1, cmin(kIters, cmin(cmax(1, 8 / R), cmax(1, 16 / MAX_M))));
  constexpr int kGroups = kIters / kUnroll, kRest = kIters % kUnroll;

  const int lane = threadIdx.x % 32;
  const int row0 = (blockIdx.x * WARPS + threadIdx.x / 32) * R;
  if (row0 >= N) return; // no block-level synchronisation below, so a spare warp can leave

  // Rows past N read row N - 1 (always valid) and are never stored.
  const bf16 *wRow[R];
#pragma unroll
  for (int r = 0; r < R; ++r) wRow[r] = W + static_cast<long long>(min(row0 + r, N - 1)) * K + lane * 8;

  for (int m0 = 0; m0 < M; m0 += MAX_M) {
    const int rows = min(M - m0, MAX_M);
    const bf16 *aRows = A + static_cast<long long>(m0) * K + lane * 8;
    float acc[MAX_M][R];
#pragma unroll
    for (int m = 0; m < MAX_M; ++m)
#pragma unroll
      for (int r = 0; r < R; ++r) acc[m][r] = 0.f;

    // U consecutive steps starting at `step0`: all W loads first, then activations, then the FMAs.
    auto steps = [&](int step0, auto unroll) {
      constexpr int U = decltype(unroll)::value;
      uint4 w[U][R];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int chunk = (step0 + u) * 32; // this lane's chunk is chunk + lane
        const bool ok = kChunks % 32 == 0 || chunk + lane < kChunks;
#pragma unroll
        for (int r = 0; r < R; ++r) w[u][r] = ok ? loadStreaming(wRow[r] + chunk * 8) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int m = 0; m < MAX_M; ++m) {
        if (m < rows) {
#pragma unroll
          for (int u = 0; u < U; ++u) {
            const int chunk = (step0 + u) * 32;
            const bool ok = kChunks % 32 == 0 || chunk + lane < kChunks;
            float a[8];
            unpack8(a, ok ? loadCached(aRows + static_cast<long long>(m) * K + chunk * 8) : make_uint4(0, 0, 0, 0));
#pragma unroll
            for (int r = 0; r < R; ++r) acc[m][r] = dot8(acc[m][r], a, w[u][r]);
          }
        }
      }
    };
    for (int g = 0; g < kGroups; ++g) steps(g * kUnroll, IntConstant<kUnroll>{});
    if constexpr (kRest > 0) steps(kGroups * kUnroll, IntConstant<kRest>{});

#pragma unroll
    for (int m = 0; m < MAX_M; ++m) {
      if (m < rows) {
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const float sum = warpSum(acc[m][r]);
          const int n = row0 + r, row = m0 + m;
          // Lanes take turns storing, so the R * MAX_M results leave from different lanes.
          if (lane == (m * R + r) % 32 && n < N)
            C[static_cast<long long>(row) * N + n] = toBf16(Epi::template apply<N>(sum, row, n, epi));
        }
      }
    }
  }
}

} // namespace minfer
