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
// gemvMma, the tensor-core variant for M of 3 to 8: with fp32 FMAs each W element costs M multiply-adds
// plus conversions, which at M = 4..8 makes the kernel issue-bound well below memory bandwidth (H200, M =
// 8: 0.6-1.8 TB/s). gemvMma computes C^T = W · A^T with mma.m16n8k16: 16 rows of W are the "A" operand,
// the (up to 8) rows of A the n8 "B" operand, so M = 8 costs what M = 1 does (H200, M = 4: 1.0-1.3x,
// M = 8: 1.2-2.5x the FMA kernel; at M = 1 the FMA kernel stays ahead). The reduction over K does not care
// in which order K is visited, as long as both operands agree: lane (g = lane / 4, t = lane % 4) loads 16
// bytes — k = 8t..8t+7 of a 32-wide K chunk — of W rows g and g + 8 and of activation row g, and feeds
// k 8t..8t+3 to one mma and 8t+4..8t+7 to the next, as the fragment positions (2t, 2t+1, 2t+8, 2t+9)
// of a k16 step. Fragments thus come straight from global memory, no shared memory or ldmatrix. A block
// of WARPS warps owns 16 rows of W and splits K between its warps (chunk c to warp c % WARPS); the
// partial sums meet in shared memory.
//
// Kernel arguments, in order (the same as gemm.cuh, so a matmul can use either):
//   bf16 *C            [M, N]   may alias epi.residual (in-place residual add), never A or W
//   const bf16 *A      [M, K]   16-byte aligned
//   const bf16 *W      [N, K]   16-byte aligned
//   int M              rows, >= 0
//   EpiParams epi      bias [N] and/or residual [M, N], as the policy needs
// Launch: gemv: grid ceil(N / (ROWS_PER_WARP * WARPS)), block 32 * WARPS, no dynamic shared memory;
// gemvMma: grid ceil(N / 16), block 32 * WARPS, no dynamic shared memory.
#pragma once

#include "common.cuh"
#include "epilogue.cuh"
#include "ptx.cuh"

namespace minfer {

namespace gemv_detail {

// W: read once per step, so keep it out of L1 (no_allocate) and use the non-coherent path (W is
// constant for the kernel's lifetime). Volatile: without it the compiler treats the asm as a pure
// function and may execute it where the source guards it (`ok ? loadStreaming(p) : 0` became an
// unconditional load plus a select), reading past the end of W; compute-sanitizer memcheck found that in
// gemvMma when K has fewer 32-wide chunks than the block has warps. The SASS is otherwise unchanged in
// instruction and load count.
__device__ __forceinline__ uint4 loadStreaming(const bf16 *p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// A: small and read by every warp of the SM, so let it live in L1 (the read-only path, but for the persistent
// kernel's tasks: common.cuh's loadProduced).
__device__ __forceinline__ uint4 loadCached(const bf16 *p) { return loadProduced(reinterpret_cast<const uint4 *>(p)); }

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

// Brings rows [first, first + rows) of W [N, K] (contiguous: W is row-major) into L2, one prefetch per
// 128-byte line spread over the block's THREADS threads; no registers held, nothing waited for. The
// persistent decode kernel calls it for the tile a block runs next, so its weights stream in while the
// current tile (or the task before) drains.
template <int N, int K, int THREADS> __device__ __forceinline__ void prefetchRowsL2(const bf16 *W, int first, int rows) {
  if (first >= N) return;
  rows = rows < N - first ? rows : N - first;
  const char *base = reinterpret_cast<const char *>(W + static_cast<long long>(first) * K);
  const long long bytes = static_cast<long long>(rows) * K * 2;
  prefetchLinesL2(base, bytes, threadIdx.x, THREADS);
  if (threadIdx.x == 0) prefetchL2(base + bytes - 1); // a last line the stride missed (rows need not start on one)
}

// The small arrays a gemv reads only after its wait, asked into L2 before it: the prologue's gains (and
// LayerNorm's beta), [K] each, and the epilogue's bias [N], each 128-byte line once over the `count` callers
// (the caller at `index` takes lines index, index + count, ...: in practice the first block asks for all);
// and the lm_head's argmax keys (not a weight, but as cold: the line the last step's advance zeroed, read and
// atomically maxed at the end), by caller 0. Every other layer's W streams through L2 between two steps, so
// without this they come from DRAM after the wait: a DRAM round trip on the chain after the statistics, and
// another before the stores. (Every block asking for every line — thousands of requests to a few dozen lines
// — made GPT-2's one-row step 10% slower.)
template <int N, int K, class Pro>
__device__ __forceinline__ void prefetchSmallWeightsL2(const EpiParams &epi, int index, int count) {
  if constexpr (Pro::kGammaBytes > 0) {
    prefetchLinesL2(epi.gamma, K * Pro::kGammaBytes, index, count);
    if constexpr (Pro::kLayer) prefetchLinesL2(epi.beta, K * Pro::kGammaBytes, index, count);
  }
  if (epi.bias) prefetchLinesL2(epi.bias, N * 2LL, index, count);
  if (epi.argmax && index == 0) prefetchL2(epi.argmax); // MAX_M <= 16 keys of 8 bytes: a line
}
// The same from every thread of a block of `threads` at `tile`. Warps past N may have left (gemv without a
// prologue): they are the last block's, and the lines (a few dozen, a few hundred for a 50k-row bias) fall
// to the first blocks' threads.
template <int N, int K, class Pro>
__device__ __forceinline__ void prefetchSmallWeightsL2(const EpiParams &epi, const Tile &tile, int threads) {
  prefetchSmallWeightsL2<N, K, Pro>(epi, tile.x * threads + static_cast<int>(threadIdx.x), tile.nx * threads);
}

__host__ __device__ constexpr int cmin(int a, int b) { return a < b ? a : b; }
__host__ __device__ constexpr int cmax(int a, int b) { return a > b ? a : b; }

// The shape rules of both kernels, gemv and gemvMma, checked where a kernel calls it (no code).
template <int N, int K> __device__ __forceinline__ void checkShape() {
  static_assert(N >= 1 && K >= 8, "gemv: N must be at least 1 and K at least 8");
  static_assert(K % 8 == 0, "gemv: K must be a multiple of 8 (rows are read 16 bytes = 8 bf16 at a time)");
}

// acc[m][r] += (row m of A, the lane's 8 columns of step u) . w[u][r] for every row m < rows of A, U steps
// of 32 lanes x 8 columns, step u's columns from col0 + 256 u (this lane's), through the prologue; a step
// not ok (past K) adds nothing. W is already in registers.
template <int K, int MAX_M, int R, int U, class Pro>
__device__ __forceinline__ void fmaSteps(float (&acc)[MAX_M][R], const uint4 (&w)[U][R], const bool (&ok)[U],
                                         const bf16 *A, int col0, int rows, const float2 *proStats, const EpiParams &epi) {
#pragma unroll
  for (int m = 0; m < MAX_M; ++m) {
    if (m < rows) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int col = col0 + u * 256;
        float a[8];
        unpack8(a, ok[u] ? loadCached(A + static_cast<long long>(m) * K + col) : make_uint4(0, 0, 0, 0));
        if (Pro::kActive && ok[u]) Pro::apply8(a, col, proStats[m], epi);
#pragma unroll
        for (int r = 0; r < R; ++r) acc[m][r] = dot8(acc[m][r], a, w[u][r]);
      }
    }
  }
}

// The end of a gemv tile: each warp's sums for its R rows of W (from row0) and `rows` rows of A (from m0)
// reduced across its lanes and stored through the epilogue; with the argmax epilogue, also the block's best
// key per row of A into epi.argmax. Every thread of the block calls it (the argmax's barriers).
template <int N, int MAX_M, int R, class Epi>
__device__ __forceinline__ void storeRows(bf16 *C, const float (&acc)[MAX_M][R], int row0, int m0, int rows,
                                          unsigned long long *blockBest, const EpiParams &epi) {
  const int lane = threadIdx.x % 32;
  if constexpr (Epi::kArgmax) {
    if (threadIdx.x < MAX_M) blockBest[threadIdx.x] = 0;
    blockSync();
  }
#pragma unroll
  for (int m = 0; m < MAX_M; ++m) {
    if (m < rows) {
      float sum[R];
#pragma unroll
      for (int r = 0; r < R; ++r) sum[r] = warpSum(acc[m][r]); // every lane gets the sums
      if constexpr (Epi::kArgmax) {
        // The warp's best of its rows of W (the value as stored, bf16), then the block's.
        unsigned long long best = 0;
#pragma unroll
        for (int r = 0; r < R; ++r)
          if (row0 + r < N) {
            const unsigned long long key = argmaxKey(toFloat(toBf16(sum[r])), row0 + r);
            best = key > best ? key : best;
          }
        if (lane == 0 && best) atomicMax(&blockBest[m], best);
      }
#pragma unroll
      for (int r = 0; r < R; r += Epi::kPairs ? 2 : 1) {
        const int n = row0 + r, row = m0 + m;
        // Lanes take turns storing, so the R * MAX_M results leave from different lanes.
        if (lane != (m * R + r) % 32 || n >= N) continue;
        if constexpr (Epi::kPairs) // n even (row0 and r are), so n + 1 < N too
          Epi::template store2<N>(C, make_float2(sum[r], sum[r + 1]), row, n, epi);
        else
          Epi::template store1<N>(C, sum[r], row, n, epi);
      }
    }
  }
  if constexpr (Epi::kArgmax) {
    blockSync(); // every warp's best is in
    // A null epi.argmax: the session samples this step and reads no key.
    if (epi.argmax && threadIdx.x < rows) atomicMax(&epi.argmax[m0 + threadIdx.x], blockBest[threadIdx.x]);
    blockSync(); // blockBest is reset for the next group of rows
  }
}

} // namespace gemv_detail

// The body of gemv: the block at `tile` of grid ceil(N / (ROWS_PER_WARP * WARPS)), waiting through `wait`,
// with about LOADS independent 16-byte W loads per lane in flight (8 as a kernel of its own; the persistent
// kernel's task form takes more, see GemvTask).
template <int N, int K, int MAX_M, int ROWS_PER_WARP, int WARPS, class Epi, class Pro, int LOADS, class Wait>
__device__ __forceinline__ void gemvTile(const MatmulParams &p, const Tile &tile, const Wait &wait) {
  const auto &[C, A, W, M, epi] = p; // C [M, N], A [M, K], W [N, K], M rows, the epilogue's arguments
  using namespace gemv_detail;
  checkShape<N, K>();
  static_assert(MAX_M >= 1 && MAX_M <= 16, "gemv: MAX_M must be 1..16 (larger M belongs to gemm)");
  static_assert(ROWS_PER_WARP >= 1 && ROWS_PER_WARP <= 8, "gemv: ROWS_PER_WARP must be 1..8");
  static_assert(WARPS >= 1 && WARPS <= 32, "gemv: WARPS must be 1..32");
  static_assert(!Epi::kPairs || ROWS_PER_WARP % 2 == 0,
                "gemv: this epilogue needs W rows in pairs, so ROWS_PER_WARP must be even");

  constexpr int R = ROWS_PER_WARP;
  constexpr int kChunks = K / 8;                     // 16-byte chunks per row
  constexpr int kIters = (kChunks + 31) / 32;        // steps of 32 chunks (one per lane) along K
  // Steps unrolled together: about LOADS independent W loads per lane in flight (R * kUnroll), while the
  // MAX_M * kUnroll activation vectors held alongside stay within ~64 registers.
  static_assert(LOADS >= 1 && LOADS <= 32, "gemv: LOADS must be 1..32");
  constexpr int kUnroll = cmax(1, cmin(kIters, cmin(cmax(1, LOADS / R), cmax(1, 16 / MAX_M))));
  constexpr int kGroups = kIters / kUnroll, kRest = kIters % kUnroll;

  const int lane = threadIdx.x % 32;
  const int row0 = (tile.x * WARPS + threadIdx.x / 32) * R;
  // Without a prologue there is no block-level synchronisation below, so a spare warp can leave; with one,
  // it stays for the statistics' barriers (its rows clamp to N - 1 and are never stored).
  if (!Pro::kActive && !Epi::kArgmax && row0 >= N) return;
  __shared__ float2 proStats[Pro::kActive ? MAX_M : 1];
  __shared__ float proScratch[Pro::kActive ? WARPS : 1][MAX_M];
  __shared__ unsigned long long blockBest[Epi::kArgmax ? MAX_M : 1]; // EpiArgmax: the block's best key per row

  // Rows past N read row N - 1 (always valid) and are never stored.
  const bf16 *wRow[R];
#pragma unroll
  for (int r = 0; r < R; ++r) wRow[r] = W + static_cast<long long>(min(row0 + r, N - 1)) * K + lane * 8;
  // W does not depend on the kernel before this one: load this warp's first group of steps of it into
  // registers, and start the next group towards L2, while that kernel (or task) drains, then wait for its
  // outputs. The first group's loads are then already under way when the activations arrive.
  auto loadW = [&](uint4(&w)[kUnroll][R], int step0, int steps) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int chunk = (step0 + u) * 32; // this lane's chunk is chunk + lane
      const bool ok = u < steps && (kChunks % 32 == 0 || chunk + lane < kChunks);
#pragma unroll
      for (int r = 0; r < R; ++r) w[u][r] = ok ? loadStreaming(wRow[r] + chunk * 8) : make_uint4(0, 0, 0, 0);
    }
  };
  uint4 first[kUnroll][R];
  loadW(first, 0, kUnroll);
#pragma unroll
  for (int u = kUnroll; u < 2 * kUnroll && u < kIters; ++u)
    if (kChunks % 32 == 0 || u * 32 + lane < kChunks)
#pragma unroll
      for (int r = 0; r < R; ++r) prefetchL2(wRow[r] + u * 256);
  prefetchSmallWeightsL2<N, K, Pro>(epi, tile, bodyThreads());
  wait();

  for (int m0 = 0; m0 < M; m0 += MAX_M) {
    const int rows = min(M - m0, MAX_M);
    float acc[MAX_M][R];
#pragma unroll
    for (int m = 0; m < MAX_M; ++m)
#pragma unroll
      for (int r = 0; r < R; ++r) acc[m][r] = 0.f;
    // The prologue's statistics of each activation row (the block computes them together).
    if constexpr (Pro::kActive)
      Pro::template blockStats<K, WARPS, MAX_M>(A + static_cast<long long>(m0) * K, rows, proStats, proScratch, epi);

    // U consecutive steps starting at `step0`: all W loads first (or the ones made before the wait), then
    // activations, then the FMAs.
    auto steps = [&](int step0, auto unroll, bool preloaded) {
      constexpr int U = decltype(unroll)::value;
      uint4 w[U][R];
      bool ok[U];
#pragma unroll
      for (int u = 0; u < U; ++u) ok[u] = kChunks % 32 == 0 || (step0 + u) * 32 + lane < kChunks; // lane's chunk
      if (preloaded) {
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
          for (int r = 0; r < R; ++r) w[u][r] = first[u][r];
      } else {
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
          for (int r = 0; r < R; ++r) w[u][r] = ok[u] ? loadStreaming(wRow[r] + (step0 + u) * 256) : make_uint4(0, 0, 0, 0);
      }
      fmaSteps<K, MAX_M, R, U, Pro>(acc, w, ok, A + static_cast<long long>(m0) * K, step0 * 256 + lane * 8, rows, proStats,
                                    epi);
    };
    // kGroups >= 1 (kUnroll <= kIters): the first group of the first rows of A uses the early loads.
    steps(0, IntConstant<kUnroll>{}, m0 == 0);
    for (int g = 1; g < kGroups; ++g) steps(g * kUnroll, IntConstant<kUnroll>{}, false);
    if constexpr (kRest > 0) steps(kGroups * kUnroll, IntConstant<kRest>{}, false);

    storeRows<N, MAX_M, R, Epi>(C, acc, row0, m0, rows, blockBest, epi);
  }
}

namespace gemv_detail {

// 8 bf16 of an activation row (elements k0..k0+7) through the prologue, repacked.
template <class Pro>
__device__ __forceinline__ uint4 normalise(const uint4 &raw, int k0, float2 st, const EpiParams &epi) {
  float a[8];
  unpack8(a, raw);
  Pro::apply8(a, k0, st, epi);
  uint4 out;
  unsigned *w = reinterpret_cast<unsigned *>(&out);
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    __nv_bfloat162 h = __floats2bfloat162_rn(a[2 * e], a[2 * e + 1]);
    w[e] = *reinterpret_cast<unsigned *>(&h);
  }
  return out;
}

// A qkv epilogue (epilogue.cuh EpiQkv): its pair stores read the row's position and cache sequence, the
// pair's rotation and its bias.
template <class Epi> concept RowLoadingEpilogue = requires { Epi::kRope; };

// What the stores of one m16n8 fragment of C^T (storeFragmentT's layout) read besides the accumulators:
// a residual epilogue's elements (0 where nothing is stored), a qkv epilogue's rows, rotations and biases.
template <class Epi> struct FragmentLoads {
  float res[4];
  typename Epi::Row row[4];
  float2 cs[4], bias[4];
};

// The loads of J fragments (fragment j at column j0 = 8 j of C^T), all before the kernel's first store: C
// may alias what they read (the residual), so a load after a store cannot be moved above it, and element by
// element each costs a round trip to L2. The wgmma gemv at 16 rows had 8 such trips in a row in its
// residual epilogue (H200 ncu: 1.8 us of its 10.3 against 8 rows' 4) and 8 x 2 in its qkv epilogue
// (position, then rotation: 14.0 us against 12.1 at 8 rows). Here the qkv rows of every element are
// loaded first, then every rotation: two trips. That bought less than the trips suggested (session 21:
// the qkv kernel level in the kernel bench, 16-row steps 0.003-0.006 ms faster; bench/NOTES.md).
// In two steps where the caller has work to put between them: loadFragmentRowsT (the residual, the qkv rows and
// biases), then loadFragmentRotationsT (the rotations of those rows: it waits for them).
template <int N, class Epi, int J>
__device__ __forceinline__ void loadFragmentRowsT(FragmentLoads<Epi> (&f)[J], int n0, int m0, int rows, const EpiParams &epi) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int j = 0; j < J; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int n = n0 + g + (e / 2) * 8, r = 8 * j + 2 * t + e % 2;
      f[j].res[e] = 0.f;
      if constexpr (Epi::kResidual && !Epi::kPairs)
        if (r < rows && n < N) f[j].res[e] = Epi::template residual1<N>(m0 + r, n, epi);
      if constexpr (RowLoadingEpilogue<Epi>)
        if (g % 2 == 0 && r < rows && n < N) {
          f[j].row[e] = Epi::rowOf(m0 + r, epi);
          f[j].bias[e] = Epi::bias2(n, epi);
        }
    }
}
template <int N, class Epi, int J>
__device__ __forceinline__ void loadFragmentRotationsT(FragmentLoads<Epi> (&f)[J], int n0, int rows, const EpiParams &epi) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  if constexpr (RowLoadingEpilogue<Epi>)
#pragma unroll
    for (int j = 0; j < J; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int n = n0 + g + (e / 2) * 8, r = 8 * j + 2 * t + e % 2;
        if (g % 2 == 0 && r < rows && n < N) f[j].cs[e] = Epi::rotationOf(f[j].row[e], n, epi);
      }
}
template <int N, class Epi, int J>
__device__ __forceinline__ void loadFragmentsT(FragmentLoads<Epi> (&f)[J], int n0, int m0, int rows, const EpiParams &epi) {
  loadFragmentRowsT<N, Epi, J>(f, n0, m0, rows, epi);
  loadFragmentRotationsT<N, Epi, J>(f, n0, rows, epi);
}

// Stores one m16n8 fragment of C^T = W · A^T (ptx.cuh's mma C layout; a wgmma m64 accumulator is four of
// them, one a warp): v[e] is C[m0 + j0 + 2t + e % 2][n0 + g + 8 (e / 2)] for lane (g, t). Rows of A at or past
// `rows` (counted from m0) and W rows at or past N are not stored. A pairs epilogue gets W rows n, n + 1
// together in the lane of row n (g even), the odd row's value from lane + 4. What the stores read besides
// the accumulators comes in `f` (loadFragmentsT, before any of the kernel's stores). The whole warp calls it.
template <int N, class Epi>
__device__ __forceinline__ void storeFragmentT(bf16 *C, const float (&v)[4], int n0, int m0, int j0, int rows,
                                               const EpiParams &epi, const FragmentLoads<Epi> &f) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int n = n0 + g + (e / 2) * 8, r = j0 + 2 * t + e % 2;
    if constexpr (Epi::kPairs) {
      const float next = __shfl_down_sync(0xffffffffu, v[e], 4);
      if (g % 2 == 0 && r < rows && n < N) {
        if constexpr (RowLoadingEpilogue<Epi>)
          Epi::template store2Loaded<N>(C, make_float2(v[e], next), m0 + r, n, epi, f.row[e], f.cs[e], f.bias[e]);
        else
          Epi::template store2<N>(C, make_float2(v[e], next), m0 + r, n, epi);
      }
    } else if (r < rows && n < N) {
      if constexpr (Epi::kResidual) Epi::template store1Residual<N>(C, v[e], m0 + r, n, epi, f.res[e]);
      else Epi::template store1<N>(C, v[e], m0 + r, n, epi);
    }
  }
}
// The same, loading the fragment's reads first (one round trip for the four, two for a qkv epilogue).
template <int N, class Epi>
__device__ __forceinline__ void storeFragmentT(bf16 *C, const float (&v)[4], int n0, int m0, int j0, int rows,
                                               const EpiParams &epi) {
  FragmentLoads<Epi> f[1];
  loadFragmentsT<N, Epi, 1>(f, n0, m0 + j0, rows - j0, epi);
  storeFragmentT<N, Epi>(C, v, n0, m0 + j0, 0, rows - j0, epi, f[0]);
}

} // namespace gemv_detail

// The body of gemvMma: the block at `tile` of grid ceil(N / 16), waiting through `wait`, with LOADS
// independent 16-byte W loads per lane in flight (two a chunk: rows g and g + 8).
template <int N, int K, int MAX_M, int WARPS, class Epi, class Pro, int LOADS, class Wait>
__device__ __forceinline__ void gemvMmaTile(const MatmulParams &p, const Tile &tile, const Wait &wait) {
  const auto &[C, A, W, M, epi] = p; // C [M, N], A [M, K], W [N, K], M rows, the epilogue's arguments
  using namespace gemv_detail;
  checkShape<N, K>();
  static_assert(MAX_M >= 1 && MAX_M <= 16,
                "gemvMma: MAX_M must be 1..16 (the rows of A are mma's n8 operand, one or two of them)");
  static_assert(WARPS >= 1 && WARPS <= 16, "gemvMma: WARPS must be 1..16");
  static_assert(!Epi::kArgmax, "gemvMma: the argmax epilogue runs in the FMA gemv only");

  constexpr int kChunks = (K + 31) / 32;                  // 32-wide chunks of K (the last may be short)
  constexpr int kPerWarp = (kChunks + WARPS - 1) / WARPS; // chunks each warp walks
  // Chunks loaded together: LOADS / 2 (4 as a kernel of its own: 8 loads per lane in flight, as gemv).
  static_assert(LOADS >= 2 && LOADS <= 32, "gemvMma: LOADS must be 2..32");
  constexpr int kUnroll = kPerWarp < LOADS / 2 ? kPerWarp : LOADS / 2;
  constexpr int kGroups = kPerWarp / kUnroll, kRest = kPerWarp % kUnroll;
  __shared__ float partial[WARPS > 1 ? WARPS - 1 : 1][32][4]; // warps 1.. hand their sums to warp 0
  __shared__ float2 proStats[Pro::kActive ? MAX_M : 1];
  __shared__ float proScratch[Pro::kActive ? WARPS : 1][MAX_M];

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, t = lane % 4;
  const int row0 = tile.x * 16;
  // Rows past N read row N - 1 (always valid) and are never stored.
  const bf16 *w0 = W + static_cast<long long>(min(row0 + g, N - 1)) * K + t * 8;
  const bf16 *w1 = W + static_cast<long long>(min(row0 + g + 8, N - 1)) * K + t * 8;
  // As gemv: this warp's first chunks of W into L2 before waiting for the kernel before this one.
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int c = u * WARPS + warp;
    if ((kChunks % WARPS == 0 || c < kChunks) && (K % 32 == 0 || c * 32 + t * 8 < K)) {
      prefetchL2(w0 + c * 32);
      prefetchL2(w1 + c * 32);
    }
  }
  prefetchSmallWeightsL2<N, K, Pro>(epi, tile, 32 * WARPS);
  wait();

  // NT n8 operands: rows 0-7 of A's group in the first, 8-15 in the second (MAX_M > 8); every W fragment
  // loaded feeds NT mmas.
  constexpr int NT = (MAX_M + 7) / 8;
  for (int m0 = 0; m0 < M; m0 += MAX_M) {
    const int rows = min(M - m0, MAX_M);
    bool hasRow[NT];
    const bf16 *x[NT];
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      hasRow[j] = 8 * j + g < rows; // lanes of the n8 operand's columns past M feed zeros
      x[j] = A + static_cast<long long>(m0 + (hasRow[j] ? 8 * j + g : 0)) * K + t * 8;
    }
    float acc[NT][4] = {};
    // The prologue's statistics of each activation row (the block computes them together).
    if constexpr (Pro::kActive)
      Pro::template blockStats<K, WARPS, MAX_M>(A + static_cast<long long>(m0) * K, rows, proStats, proScratch, epi);

    // U chunks of this warp starting at its i0-th: all loads first, then the mmas.
    auto steps = [&](int i0, auto unroll) {
      constexpr int U = decltype(unroll)::value;
      uint4 wa[U], wb[U], xa[U][NT];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int c = (i0 + u) * WARPS + warp;
        const bool ok = (kChunks % WARPS == 0 || c < kChunks) && (K % 32 == 0 || c * 32 + t * 8 < K);
        wa[u] = ok ? loadStreaming(w0 + c * 32) : make_uint4(0, 0, 0, 0);
        wb[u] = ok ? loadStreaming(w1 + c * 32) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int c = (i0 + u) * WARPS + warp;
        const bool ok = (kChunks % WARPS == 0 || c < kChunks) && (K % 32 == 0 || c * 32 + t * 8 < K);
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          xa[u][j] = ok && hasRow[j] ? loadCached(x[j] + c * 32) : make_uint4(0, 0, 0, 0);
          if (Pro::kActive && ok && hasRow[j]) xa[u][j] = normalise<Pro>(xa[u][j], c * 32 + t * 8, proStats[8 * j + g], epi);
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          mma16816(acc[j], wa[u].x, wb[u].x, wa[u].y, wb[u].y, xa[u][j].x, xa[u][j].y); // k 8t..8t+3
          mma16816(acc[j], wa[u].z, wb[u].z, wa[u].w, wb[u].w, xa[u][j].z, xa[u][j].w); // k 8t+4..8t+7
        }
    };
    for (int i = 0; i < kGroups; ++i) steps(i * kUnroll, IntConstant<kUnroll>{});
    if constexpr (kRest > 0) steps(kGroups * kUnroll, IntConstant<kRest>{});

#pragma unroll
    for (int j = 0; j < NT; ++j) {
      if constexpr (WARPS > 1) {
        // Lane l holds the same four outputs in every warp: warp 0 adds the others'.
        if (warp > 0)
#pragma unroll
          for (int e = 0; e < 4; ++e) partial[warp - 1][lane][e] = acc[j][e];
        blockSync();
        if (warp == 0)
#pragma unroll
          for (int w = 0; w < WARPS - 1; ++w)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[j][e] += partial[w][lane][e];
        blockSync(); // `partial` is written again by the next operand or group of MAX_M rows
      }
      // acc[j][e]: W row g (+8 for e >= 2), activation row 8j + 2t (+1 for odd e).
      if (warp == 0) storeFragmentT<N, Epi>(C, acc[j], row0, m0, 8 * j, rows, epi);
    }
  }
}

namespace gemv_detail {

// How a tile of GROUPS x 16 rows of W [N, K] travels through the persistent kernel's weight ring for the
// tensor-core body (gemvMmaRingTile): per chunk of KP columns (about kPieceBytes a piece; kChunks of them), one
// piece per group of 16 rows (fewer, or none, in a last tile), one copy a row; piece j is chunk j / GROUPS of
// group j % GROUPS, so each chunk of the activations is read and normalised once for all the tile's groups.
// Row r of a piece sits at r * kStride bytes of its entry; kStride is 64 modulo 128, so the rows g and g + 1
// that a quarter-warp reads 16 bytes of at the same column fall in different banks.
template <int K, int GROUPS> struct MmaRingGeometry {
  static constexpr int kPieceBytes = 16384;
  static constexpr int KP = cmin((K + 31) / 32 * 32, kPieceBytes / 32);
  static constexpr int kChunks = (K + KP - 1) / KP;
  static constexpr int kPieces = kChunks * GROUPS;
  static constexpr int kSlices = KP / 32; // 32-wide slices of K a piece: one mma pair each
  static constexpr int kRowBytes = KP * 2;
  static constexpr int kStride = kRowBytes % 128 == 64 ? kRowBytes : (kRowBytes + 127) / 128 * 128 + 64;
  static_assert(GROUPS >= 1 && GROUPS <= 8, "gemvMmaRingTile: 1..8 groups of 16 rows a tile");
};

// gemvMmaRingTile's shared memory: warps 1.. hand their sums (every group's, every n8 operand's) to warp 0 in
// `partial`; the norm prologue's statistics. Its size is GemvSpec::sharedBytes of a streaming task.
template <int MAX_M, int WARPS, int GROUPS, bool PRO> struct MmaRingScratch {
  float partial[GROUPS][(MAX_M + 7) / 8][WARPS > 1 ? WARPS - 1 : 1][32][4];
  float2 proStats[PRO ? MAX_M : 1];
  float proScratch[PRO ? WARPS : 1][MAX_M];
};

// 16 bytes of shared memory at shared address `addr`.
__device__ __forceinline__ uint4 loadShared16(unsigned addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
  return v;
}

// The argmax epilogue on one m16n8 fragment of C^T (as storeFragmentT lays it out): for each of the fragment's
// rows of A, the best key (argmaxKey of the value as stored, bf16) over its W rows, atomically maxed into
// keys[m0 + row]. A null `keys`: the session samples this step. The whole warp calls it.
template <int N>
__device__ __forceinline__ void argmaxFragmentT(const float (&v)[4], int n0, int m0, int j0, int rows,
                                                unsigned long long *keys) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int odd = 0; odd < 2; ++odd) {
    unsigned long long best = 0;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int n = n0 + g + 8 * h;
      if (n < N) {
        const unsigned long long key = argmaxKey(toFloat(toBf16(v[2 * h + odd])), n);
        best = key > best ? key : best;
      }
    }
#pragma unroll
    for (int d = 4; d < 32; d *= 2) { // lanes of the same t hold the same row of A
      const unsigned long long other = __shfl_xor_sync(0xffffffffu, best, d);
      best = other > best ? other : best;
    }
    const int r = j0 + 2 * t + odd;
    if (g == 0 && r < rows && keys && best) atomicMax(&keys[m0 + r], best);
  }
}

} // namespace gemv_detail

// gemvMma's body reading W from the persistent kernel's weight ring instead of global memory
// (GemvMmaRingTask), a tile of GROUPS x 16 rows. The kernel's producer warp copies the tile's W into the ring
// as pieces (MmaRingGeometry) as soon as there is room, whatever the task's dependencies: W is constant, so
// while a block waits for the task before, or runs attention, the weights of its next matmul tiles are
// already arriving. The body waits for its dependency, then for each chunk of K: the warp's slices of the
// activations (slice s to warp s % WARPS) through the prologue, once; then for each group's piece
// `ring.wait(bytes)` (the entry has landed; its shared address), the warp's 16-byte fragments of its slices
// (lane (g, t) reading rows g and g + 8 as gemvMma does from global memory), `ring.release()` (the warp is
// done with the entry), and the mmas from registers. At 1 row of A the mma wastes 7 of its 8 columns, but a
// 16 x 16 slab of W costs two shared loads and one mma instead of 256 FMAs and their conversions. Every row
// of A is computed in the one pass over W the ring makes, so M must not exceed MAX_M (the plan gives the task
// a MAX_M of at least the batch: GemvSpec::asStreamingTask). Unlike gemvMma, it also takes the argmax
// epilogue (argmaxFragmentT), so the lm_head streams too.
template <int N, int K, int MAX_M, int WARPS, int GROUPS, class Epi, class Pro, class Wait, class Ring>
__device__ __forceinline__ void gemvMmaRingTile(const MatmulParams &p, const Tile &tile, const Wait &wait, Ring &ring) {
  const auto &[C, A, W, M, epi] = p; // C [M, N], A [M, K], W [N, K] (in the ring), M rows, the epilogue's arguments
  using namespace gemv_detail;
  checkShape<N, K>();
  static_assert(MAX_M >= 1 && MAX_M <= 16,
                "gemvMma: MAX_M must be 1..16 (the rows of A are mma's n8 operand, one or two of them)");
  static_assert(WARPS >= 1 && WARPS <= 16, "gemvMma: WARPS must be 1..16");
  using G = MmaRingGeometry<K, GROUPS>;
  constexpr int kPerWarp = (G::kSlices + WARPS - 1) / WARPS; // slices a warp takes of each piece
  constexpr int NT = (MAX_M + 7) / 8;
  // In the kernel's dynamic shared memory before the ring (the task's launch reserves it: GemvSpec::sharedBytes),
  // not static: static shared memory adds up over every body of the kernel and would cost the SM its second block.
  using Scratch = MmaRingScratch<MAX_M, WARPS, GROUPS, Pro::kActive>;
  static_assert(sizeof(Scratch) <= Ring::kScratchBytes, "gemvMmaRingTile: the kernel reserves too little shared memory");
  auto &[partial, proStats, proScratch] = *reinterpret_cast<Scratch *>(ring.scratch);

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, t = lane % 4;
  const int row0 = tile.x * 16 * GROUPS;
  // Group q's rows of W (none for a group past N in a last tile); rows past N read the group's last, unstored.
  int valid[GROUPS];
  unsigned r0[GROUPS], r1[GROUPS];
#pragma unroll
  for (int q = 0; q < GROUPS; ++q) {
    valid[q] = max(0, min(16, N - (row0 + 16 * q)));
    r0[q] = max(0, min(g, valid[q] - 1)) * G::kStride + t * 16;
    r1[q] = max(0, min(g + 8, valid[q] - 1)) * G::kStride + t * 16;
  }
  wait();
  const int rows = min(M, MAX_M);
  if constexpr (Pro::kActive) Pro::template blockStats<K, WARPS, MAX_M>(A, rows, proStats, proScratch, epi);
  bool hasRow[NT];
  const bf16 *x[NT];
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    hasRow[j] = 8 * j + g < rows; // lanes of the n8 operand's columns past M feed zeros
    x[j] = A + static_cast<long long>(hasRow[j] ? 8 * j + g : 0) * K;
  }
  float acc[GROUPS][NT][4] = {};
#pragma unroll 1
  for (int c = 0; c < G::kChunks; ++c) {
    // This warp's slices of the chunk's activations, through the prologue, once for every group.
    uint4 xa[kPerWarp][NT];
    bool ok[kPerWarp];
#pragma unroll
    for (int u = 0; u < kPerWarp; ++u) {
      const int s = u * WARPS + warp, col = c * G::KP + s * 32 + t * 8; // columns past K count as zeros
      ok[u] = (G::kSlices % WARPS == 0 || s < G::kSlices) && (K % G::KP == 0 || col < K);
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        xa[u][j] = ok[u] && hasRow[j] ? loadCached(x[j] + col) : make_uint4(0, 0, 0, 0);
        if (Pro::kActive && ok[u] && hasRow[j]) xa[u][j] = normalise<Pro>(xa[u][j], col, proStats[8 * j + g], epi);
      }
    }
#pragma unroll
    for (int q = 0; q < GROUPS; ++q) {
      const unsigned piece = ring.wait(static_cast<unsigned>(valid[q]) * G::kStride);
      uint4 wa[kPerWarp], wb[kPerWarp];
#pragma unroll
      for (int u = 0; u < kPerWarp; ++u) {
        const bool load = ok[u] && valid[q] > 0;
        wa[u] = load ? loadShared16(piece + r0[q] + (u * WARPS + warp) * 64) : make_uint4(0, 0, 0, 0);
        wb[u] = load ? loadShared16(piece + r1[q] + (u * WARPS + warp) * 64) : make_uint4(0, 0, 0, 0);
      }
      ring.release(); // this warp's W is in registers: the entry can be refilled
#pragma unroll
      for (int u = 0; u < kPerWarp; ++u)
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          mma16816(acc[q][j], wa[u].x, wb[u].x, wa[u].y, wb[u].y, xa[u][j].x, xa[u][j].y); // k 8t..8t+3
          mma16816(acc[q][j], wa[u].z, wb[u].z, wa[u].w, wb[u].w, xa[u][j].z, xa[u][j].w); // k 8t+4..8t+7
        }
    }
  }
  // Lane l holds the same four outputs in every warp: warp 0 adds the others' and stores. The kernel's barrier
  // after the tile keeps the next tile from writing `partial` before warp 0 has read it.
  if constexpr (WARPS > 1) {
    if (warp > 0)
#pragma unroll
      for (int q = 0; q < GROUPS; ++q)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) partial[q][j][warp - 1][lane][e] = acc[q][j][e];
    blockSync();
  }
  if (warp == 0) {
#pragma unroll
    for (int q = 0; q < GROUPS; ++q)
#pragma unroll
      for (int j = 0; j < NT; ++j) {
#pragma unroll
        for (int w = 0; w < WARPS - 1; ++w)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[q][j][e] += partial[q][j][w][lane][e];
        if (valid[q] > 0) {
          storeFragmentT<N, Epi>(C, acc[q][j], row0 + 16 * q, 0, 8 * j, rows, epi);
          if constexpr (Epi::kArgmax) argmaxFragmentT<N>(acc[q][j], row0 + 16 * q, 0, 8 * j, rows, epi.argmax);
        }
      }
  }
}

// The kernels, and the same bodies as tasks of the persistent decode kernel (persistent.cuh).
template <int N, int K, int MAX_M, int ROWS_PER_WARP, int WARPS, class Epi, class Pro = ProNone>
__global__ void __launch_bounds__(WARPS * 32) gemv(const MatmulParams p) {
  gemvTile<N, K, MAX_M, ROWS_PER_WARP, WARPS, Epi, Pro, 8>(p, launchTile(), GridWait{});
}
template <int N, int K, int MAX_M, int WARPS, class Epi, class Pro = ProNone>
__global__ void __launch_bounds__(WARPS * 32) gemvMma(const MatmulParams p) {
  gemvMmaTile<N, K, MAX_M, WARPS, Epi, Pro, 8>(p, launchTile(), GridWait{});
}
// As tasks, LOADS loads in flight per lane: the persistent kernel has few blocks an SM (its registers are
// those of its largest body), so each warp keeps more of its rows in flight instead.
template <int N, int K, int MAX_M, int ROWS_PER_WARP, int WARPS, class Epi, class Pro, int LOADS> struct GemvTask {
  using Params = MatmulParams;
  static constexpr int kThreads = WARPS * 32;
  template <class Wait> __device__ __forceinline__ static void run(const Params &p, const Tile &t, const Wait &w) {
    gemvTile<N, K, MAX_M, ROWS_PER_WARP, WARPS, Epi, Pro, LOADS>(p, t, w);
  }
  // The tile's rows of W into L2 (the tile's weights do not depend on any task).
  __device__ __forceinline__ static void prefetch(const Params &p, const Tile &t) {
    gemv_detail::prefetchRowsL2<N, K, kThreads>(p.W, t.x * WARPS * ROWS_PER_WARP, WARPS * ROWS_PER_WARP);
  }
};
template <int N, int K, int MAX_M, int WARPS, class Epi, class Pro, int LOADS> struct GemvMmaTask {
  using Params = MatmulParams;
  static constexpr int kThreads = WARPS * 32;
  template <class Wait> __device__ __forceinline__ static void run(const Params &p, const Tile &t, const Wait &w) {
    gemvMmaTile<N, K, MAX_M, WARPS, Epi, Pro, LOADS>(p, t, w);
  }
  __device__ __forceinline__ static void prefetch(const Params &p, const Tile &t) {
    gemv_detail::prefetchRowsL2<N, K, kThreads>(p.W, t.x * 16, 16);
  }
};

// gemvMma as a task whose W streams through the persistent kernel's weight ring (sm_90: cp.async.bulk), tiles
// of GROUPS x 16 rows; piece(p, t, j) tells the kernel what to copy for piece j of tile t.
template <int N, int K, int MAX_M, int WARPS, int GROUPS, class Epi, class Pro> struct GemvMmaRingTask {
  using Params = MatmulParams;
  static constexpr int kThreads = WARPS * 32;
  using Geometry = gemv_detail::MmaRingGeometry<K, GROUPS>;
  static constexpr int kPieces = Geometry::kPieces;
  static constexpr unsigned kMaxPieceBytes = 16u * Geometry::kStride;
  template <class Wait, class Ring>
  __device__ __forceinline__ static void run(const Params &p, const Tile &t, const Wait &w, Ring &ring) {
    gemvMmaRingTile<N, K, MAX_M, WARPS, GROUPS, Epi, Pro>(p, t, w, ring);
  }
  __device__ __forceinline__ static RingPiece piece(const Params &p, const Tile &t, int j) {
    const int row = (t.x * GROUPS + j % GROUPS) * 16, k0 = (j / GROUPS) * Geometry::KP;
    return {p.W + static_cast<long long>(min(row, N - 1)) * K + k0, max(0, min(16, N - row)),
            static_cast<unsigned>(min(Geometry::KP, K - k0)) * 2u, K * 2u, static_cast<unsigned>(Geometry::kStride)};
  }
};

} // namespace minfer
