// templates/attention_prefill.cuh — causal flash attention for prefill (many query rows of one sequence),
// and the warp-level tensor-core tile that attention_decode.cuh reuses.
//
// One launch serves one sequence: the host offsets k_cache / v_cache to that sequence's [max_seq, kv_dim]
// slab. Query row i sits at position start_pos + i and attends cache positions 0 .. start_pos + i; kv_write
// (templates/rope.cuh) has already put positions 0 .. start_pos + rows - 1 into the cache. Query head h reads
// kv head h / (HEADS / KV_HEADS).
//
// The algorithm is FlashAttention-2's forward pass: a block owns BLOCK_M query rows of one head (grid
// (HEADS, ceil(rows / BLOCK_M))); each of its WARPS warps owns 16 rows; the block walks key tiles of
// BLOCK_N keys from position 0 upwards, double-buffered in shared memory by cp.async, and every warp keeps an
// online softmax (running max m, running sum l, unnormalised output O, all fp32) for its rows:
//   S = Q K^T * scale * log2(e)          mma.sync m16n8k16 bf16 -> fp32, ldmatrix from shared memory
//   m' = max(m, rowmax S);  P = 2^(S - m');  l = l 2^(m - m') + rowsum P;  O = O 2^(m - m') + P V
// Only tiles that cross the diagonal are masked; tiles wholly above it (keys past the warp's last row) are
// skipped. Tiles are visited in increasing key order, so every row meets key 0 (always visible) in its first
// tile and its running max is finite from then on.
//
// Head dims: any multiple of 8 up to 128. The mma k-dimension is 16, so a head dim below a multiple of 16
// (8 in the tiny test models) is padded in shared memory with zero columns (kPaddedHeadDim); q's padding is
// zero too, so the padded products add exactly 0.
#pragma once

#include "common.cuh"
#include "ptx.cuh"

namespace minfer {

// The kernels' one argument; its host mirror (same field names and offsets, checked in every generated
// source) is in compiler/kernels/Attention.h.
struct AttentionPrefillParams {
  const bf16 *q;       // [rows, HEADS * HEAD_DIM] of one sequence
  const bf16 *k_cache; // [max_seq, KV_HEADS * HEAD_DIM] of that sequence
  const bf16 *v_cache;
  bf16 *out;           // [rows, HEADS * HEAD_DIM]
  int rows;
  int start_pos;       // the sequence's tokens already in the cache before these rows
  float scale;
};

namespace attn {

// The mma k-dimension is 16: head dims are padded up to a multiple of 16 in shared memory and registers.
__host__ __device__ constexpr int paddedHeadDim(int headDim) { return (headDim + 15) / 16 * 16; }
// Shared-memory row stride in bf16: 8 extra elements (16 bytes) shift consecutive rows by 4 banks, so the 8
// row addresses of one ldmatrix 8x8 matrix land in 8 distinct 16-byte bank groups (no conflicts) for every
// padded head dim (16 .. 128).
__host__ __device__ constexpr int smemStride(int paddedDim) { return paddedDim + 8; }

__device__ __forceinline__ float negInf() { return __int_as_float(0xff800000u); }

// 2^x with results below 2^-126 flushed to zero (one MUFU.EX2; exp2f adds the subnormal scaling around it).
// Softmax weights that small are zero in bf16 anyway.
__device__ __forceinline__ float exp2Ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Two floats as a bf16x2 register: `lo` in the low half (the lower column index).
__device__ __forceinline__ unsigned packBf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<unsigned *>(&v);
}

// ---- the warp tile: 16 query rows against a tile of keys ---------------------------------------------------

// Q fragments of the warp's 16 rows, one A fragment per 16 columns of the (padded) head dim, read with
// ldmatrix from a shared tile whose row 0 is the warp's first row.
template <int HDP> __device__ __forceinline__ void loadQFragments(unsigned (&qf)[HDP / 16][4], const bf16 *sQ) {
  constexpr int LDS = smemStride(HDP);
  const int lane = threadIdx.x % kWarpSize;
  // Matrices 0..3 are (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15).
  const bf16 *base = sQ + (lane % 16) * LDS + (lane / 16) * 8;
#pragma unroll
  for (int ks = 0; ks < HDP / 16; ++ks) ldmatrixX4(qf[ks], base + ks * 16);
}

// s = Q K^T for BN keys: s[j] is the C fragment of keys 8j .. 8j+7. `sK` is [BN][LDS], key-major, as the
// cache stores it: non-transposed ldmatrix of K rows yields the col-major B fragment of K^T directly.
template <int HDP, int BN>
__device__ __forceinline__ void scoreTile(float (&s)[BN / 8][4], const unsigned (&qf)[HDP / 16][4], const bf16 *sK) {
  constexpr int LDS = smemStride(HDP);
  const int lane = threadIdx.x % kWarpSize;
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
  // Matrices 0..3 are (keys 0-7, d 0-7), (keys 0-7, d 8-15), (keys 8-15, d 0-7), (keys 8-15, d 8-15) of a
  // 16-key x 16-dim block: b[0], b[1] of key tile 2p, then b[0], b[1] of key tile 2p+1.
  const bf16 *base = sK + ((lane / 16) * 8 + lane % 8) * LDS + ((lane / 8) % 2) * 8;
#pragma unroll
  for (int p = 0; p < BN / 16; ++p) {
#pragma unroll
    for (int ks = 0; ks < HDP / 16; ++ks) {
      unsigned b[4];
      ldmatrixX4(b, base + p * 16 * LDS + ks * 16);
      mmaBf16(s[2 * p], qf[ks], b[0], b[1]);
      mmaBf16(s[2 * p + 1], qf[ks], b[2], b[3]);
    }
  }
}

// The running state of 16 query rows: each thread holds rows g and g+8 (index 0 and 1 below).
template <int HDP> struct RowState {
  float o[HDP / 8][4]; // unnormalised output, C fragments over the head dim
  float m[2];          // running max of the log2-scaled scores
  float l[2];          // running sum of 2^(s - m), this thread's columns only (quad-reduced at the end)

  __device__ __forceinline__ void init() {
#pragma unroll
    for (int j = 0; j < HDP / 8; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
    m[0] = m[1] = negInf();
    l[0] = l[1] = 0.f;
  }

  // Folds one tile of masked scores (-inf where masked) into the running max and sum, turning `s` into the
  // probabilities P (unnormalised, relative to the new max); `corr` gets the factor the output accumulated so
  // far must be scaled by (rescale), for rows g and g + 8. The scores are in log2 units once multiplied by
  // `scale` (> 0): the max is taken over the raw scores and the scaling folds into one FMA per element.
  template <int BN>
  __device__ __forceinline__ void softmaxScores(float (&s)[BN / 8][4], float (&corr)[2], float scale = 1.f) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float raw = negInf();
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) raw = fmaxf(raw, fmaxf(s[j][2 * r], s[j][2 * r + 1]));
      // The 4 threads of a quad (same g) hold the row's columns between them.
      raw = fmaxf(raw, __shfl_xor_sync(0xffffffffu, raw, 1));
      raw = fmaxf(raw, __shfl_xor_sync(0xffffffffu, raw, 2));
      const float mx = fmaxf(m[r], raw * scale);
      // A row that has seen only masked keys keeps max -inf; subtracting 0 instead keeps 2^(-inf) = 0 and
      // avoids (-inf) - (-inf) = NaN.
      const float base = mx == negInf() ? 0.f : mx;
      corr[r] = exp2Ftz(m[r] - base);
      m[r] = mx;
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        s[j][2 * r] = exp2Ftz(fmaf(s[j][2 * r], scale, -base));
        s[j][2 * r + 1] = exp2Ftz(fmaf(s[j][2 * r + 1], scale, -base));
        sum += s[j][2 * r] + s[j][2 * r + 1];
      }
      l[r] = l[r] * corr[r] + sum;
    }
  }

  __device__ __forceinline__ void rescale(const float (&corr)[2]) {
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int j = 0; j < HDP / 8; ++j) {
        o[j][2 * r] *= corr[r];
        o[j][2 * r + 1] *= corr[r];
      }
  }

  // Both: the tile folded in and the output rescaled at once.
  template <int BN> __device__ __forceinline__ void softmaxUpdate(float (&s)[BN / 8][4]) {
    float corr[2];
    softmaxScores<BN>(s, corr);
    rescale(corr);
  }

  // o += P V for BN keys; `sV` is [BN][LDS] key-major, read with transposing ldmatrix (V is the k x n
  // operand, k = keys). P goes from C fragments to A fragments in registers: the C fragments of key tiles
  // 2kk and 2kk+1 are exactly the A fragment of keys 16kk .. 16kk+15 (FlashAttention-2's register reuse).
  template <int BN> __device__ __forceinline__ void accumulatePV(const float (&p)[BN / 8][4], const bf16 *sV) {
    constexpr int LDS = smemStride(HDP);
    const int lane = threadIdx.x % kWarpSize;
    // Matrices 0..3 are (keys 0-7, d 0-7), (keys 8-15, d 0-7), (keys 0-7, d 8-15), (keys 8-15, d 8-15):
    // transposed, b[0], b[1] of dim tile 2q, then of dim tile 2q+1.
    const bf16 *base = sV + (((lane / 8) % 2) * 8 + lane % 8) * LDS + (lane / 16) * 8;
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      unsigned a[4];
      a[0] = packBf16(p[2 * kk][0], p[2 * kk][1]);
      a[1] = packBf16(p[2 * kk][2], p[2 * kk][3]);
      a[2] = packBf16(p[2 * kk + 1][0], p[2 * kk + 1][1]);
      a[3] = packBf16(p[2 * kk + 1][2], p[2 * kk + 1][3]);
#pragma unroll
      for (int q = 0; q < HDP / 16; ++q) {
        unsigned b[4];
        ldmatrixX4Trans(b, base + kk * 16 * LDS + q * 16);
        mmaBf16(o[2 * q], a, b[0], b[1]);
        mmaBf16(o[2 * q + 1], a, b[2], b[3]);
      }
    }
  }

  // Completes the row sums across the quad; call once, after the last tile.
  __device__ __forceinline__ void finishSums() {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
      l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    }
  }

  // After the last tile: the normalised output of this thread's rows `row0 + g` and `row0 + g + 8` (those
  // below `rows`), its first HEAD_DIM columns as bf16 pairs into `out` (the head's column 0 of row 0; rows
  // `stride` elements apart).
  template <int HEAD_DIM> __device__ __forceinline__ void storeRows(bf16 *out, size_t stride, int row0, int rows) {
    static_assert(HEAD_DIM % 8 == 0 && HEAD_DIM <= HDP, "whole 8-column slices of the padded head");
    finishSums();
    const int lane = threadIdx.x % kWarpSize, g = lane / 4, t = lane % 4;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = row0 + g + r * 8;
      if (row >= rows) continue;
      const float inv = 1.f / l[r]; // l >= 1: the row's max element contributes 2^0
      bf16 *dst = out + (size_t)row * stride;
#pragma unroll
      for (int j = 0; j < HEAD_DIM / 8; ++j)
        *reinterpret_cast<__nv_bfloat162 *>(dst + j * 8 + 2 * t) = __floats2bfloat162_rn(o[j][2 * r] * inv, o[j][2 * r + 1] * inv);
    }
  }
};

// Zeroes columns [from, to) of `rows` shared rows (the head-dim padding), cooperatively over the block.
template <int THREADS>
__device__ __forceinline__ void zeroColumns(bf16 *smem, int rows, int stride, int from, int to) {
  const int width = to - from;
  for (int i = threadIdx.x; i < rows * width; i += THREADS) smem[(i / width) * stride + from + i % width] = toBf16(0.f);
}

// Shared memory of attention_prefill in bytes: the Q tile and two stages of K and V tiles.
__host__ __device__ constexpr int prefillSmemBytes(int headDim, int blockM, int blockN) {
  return (blockM + 4 * blockN) * smemStride(paddedHeadDim(headDim)) * 2;
}

} // namespace attn

// q:       [rows, HEADS * HEAD_DIM] bf16, row i at position start_pos + i
// k_cache: [max_seq, KV_HEADS * HEAD_DIM] bf16, this sequence's slab; positions < start_pos + rows are valid
// v_cache: [max_seq, KV_HEADS * HEAD_DIM] bf16, likewise
// out:     [rows, HEADS * HEAD_DIM] bf16
// Grid (HEADS, ceil(rows / BLOCK_M)), block WARPS * 32 threads, dynamic shared memory
// attn::prefillSmemBytes(HEAD_DIM, BLOCK_M, BLOCK_N) (the kernel traps when given less).
template <int HEADS, int KV_HEADS, int HEAD_DIM, int BLOCK_M, int BLOCK_N, int WARPS>
__global__ void __launch_bounds__(WARPS * kWarpSize)
    attention_prefill(const AttentionPrefillParams p) {
  const bf16 *__restrict__ q = p.q;
  const bf16 *__restrict__ k_cache = p.k_cache;
  const bf16 *__restrict__ v_cache = p.v_cache;
  bf16 *__restrict__ out = p.out;
  const int rows = p.rows, start_pos = p.start_pos;
  const float scale = p.scale;
  gridDependencyWait();
  static_assert(HEADS > 0 && KV_HEADS > 0 && HEADS % KV_HEADS == 0, "HEADS must be a multiple of KV_HEADS (GQA)");
  static_assert(HEAD_DIM % 8 == 0 && HEAD_DIM >= 8, "HEAD_DIM must be a multiple of 8 (16-byte rows)");
  static_assert(HEAD_DIM <= 128, "HEAD_DIM above 128: the fp32 output tile (HEAD_DIM/2 registers a thread) would spill");
  static_assert(BLOCK_M == 16 * WARPS, "each warp owns 16 query rows (the mma M): BLOCK_M must be 16 * WARPS");
  static_assert(BLOCK_N % 16 == 0 && BLOCK_N >= 16 && BLOCK_N <= 128, "BLOCK_N must be a multiple of 16, at most 128");
  static_assert(WARPS >= 1 && WARPS <= 16, "1 to 16 warps");

  constexpr int THREADS = WARPS * kWarpSize;
  constexpr int HDP = attn::paddedHeadDim(HEAD_DIM);
  constexpr int LDS = attn::smemStride(HDP);
  constexpr int GROUP = HEADS / KV_HEADS;
  constexpr int Q_DIM = HEADS * HEAD_DIM, KV_DIM = KV_HEADS * HEAD_DIM;
  constexpr int CHUNKS = HEAD_DIM / 8; // 16-byte chunks in one head's row
  constexpr float kLog2e = 1.4426950408889634f;

  extern __shared__ __align__(16) unsigned char smemRaw[];
  requireDynamicShared(attn::prefillSmemBytes(HEAD_DIM, BLOCK_M, BLOCK_N));
  bf16 *sQ = reinterpret_cast<bf16 *>(smemRaw); // [BLOCK_M][LDS]
  bf16 *sK = sQ + BLOCK_M * LDS;                 // [2][BLOCK_N][LDS]
  bf16 *sV = sK + 2 * BLOCK_N * LDS;             // [2][BLOCK_N][LDS]

  const int tid = threadIdx.x, warp = tid / kWarpSize, lane = tid % kWarpSize;
  // Blocks start in the order of their linear index, heads fastest: every head's last row tile (it sees the
  // most keys) starts before any head's next-to-last one, and so on, so the shortest tiles fill the tail of
  // the grid (longest first over the whole grid; with the row tile as x, each head's short tiles started
  // among the long ones and the last long ones ran alone at the end).
  const int m0 = (gridDim.y - 1 - blockIdx.y) * BLOCK_M;
  const int head = blockIdx.x, kvHead = head / GROUP;
  const int blockRows = min(BLOCK_M, rows - m0);
  const int kvEnd = start_pos + m0 + blockRows; // keys 0 .. kvEnd-1 are visible to some row of the block
  const int numTiles = (kvEnd + BLOCK_N - 1) / BLOCK_N;

  if constexpr (HEAD_DIM < HDP) { // zero padding columns; cp.async never writes them
    attn::zeroColumns<THREADS>(sQ, BLOCK_M, LDS, HEAD_DIM, HDP);
    attn::zeroColumns<THREADS>(sK, 2 * BLOCK_N, LDS, HEAD_DIM, HDP);
    attn::zeroColumns<THREADS>(sV, 2 * BLOCK_N, LDS, HEAD_DIM, HDP);
  }

  // Q tile: rows past `rows` are zero-filled (their results are never stored).
  for (int c = tid; c < BLOCK_M * CHUNKS; c += THREADS) {
    const int r = c / CHUNKS, ch = c % CHUNKS, row = m0 + r;
    const bool valid = row < rows;
    cpAsync16(sQ + r * LDS + ch * 8, valid ? q + (size_t)row * Q_DIM + head * HEAD_DIM + ch * 8 : q, valid);
  }
  // One K and one V tile into stage `stage`; keys at or past kvEnd are zero-filled, never read.
  auto loadKV = [&](int tile, int stage) {
    bf16 *dK = sK + stage * BLOCK_N * LDS, *dV = sV + stage * BLOCK_N * LDS;
    for (int c = tid; c < BLOCK_N * CHUNKS; c += THREADS) {
      const int r = c / CHUNKS, ch = c % CHUNKS, key = tile * BLOCK_N + r;
      const bool valid = key < kvEnd;
      const size_t off = valid ? (size_t)key * KV_DIM + kvHead * HEAD_DIM + ch * 8 : 0;
      cpAsync16(dK + r * LDS + ch * 8, k_cache + off, valid);
      cpAsync16(dV + r * LDS + ch * 8, v_cache + off, valid);
    }
  };
  loadKV(0, 0);
  cpAsyncCommit(); // group 0: the Q tile and key tile 0

  const int warpRow0 = m0 + warp * 16;
  const bool warpActive = warpRow0 < rows;
  // The last key any valid row of this warp sees; tiles starting after it are fully masked for the warp.
  const int warpLastKey = start_pos + min(warpRow0 + 15, rows - 1);
  const int g = lane / 4, t = lane % 4;
  const float scaleLog2 = scale * kLog2e;

  unsigned qf[HDP / 16][4];
  attn::RowState<HDP> st;
  st.init();

  for (int tile = 0; tile < numTiles; ++tile) {
    if (tile + 1 < numTiles) loadKV(tile + 1, (tile + 1) & 1); // stage (tile+1)&1 was freed by the last barrier
    cpAsyncCommit(); // possibly empty: keeps one group per iteration so the wait below stays exact
    cpAsyncWait<1>(); // this thread's copies of `tile` (and Q) have landed
    __syncthreads();        // ... and everyone else's
    if (tile == 0) attn::loadQFragments<HDP>(qf, sQ + warp * 16 * LDS);

    const int tileStart = tile * BLOCK_N;
    if (warpActive && tileStart <= warpLastKey) {
      float s[BLOCK_N / 8][4];
      attn::scoreTile<HDP, BLOCK_N>(s, qf, sK + (tile & 1) * BLOCK_N * LDS);
      // Mask only where the tile reaches past the warp's first row's position (the diagonal tiles); keys
      // past kvEnd are past every valid row's position, so this also covers the zero-filled tail.
      const bool diagonal = tileStart + BLOCK_N - 1 > start_pos + warpRow0;
#pragma unroll
      for (int j = 0; j < BLOCK_N / 8; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float v = s[j][e] * scaleLog2;
          if (diagonal) {
            const int key = tileStart + j * 8 + 2 * t + (e & 1);
            const int row = warpRow0 + g + (e >> 1) * 8;
            if (key > start_pos + row) v = attn::negInf();
          }
          s[j][e] = v;
        }
      }
      st.template softmaxUpdate<BLOCK_N>(s);
      st.template accumulatePV<BLOCK_N>(s, sV + (tile & 1) * BLOCK_N * LDS);
    }
    __syncthreads(); // every warp is done with stage tile&1 before iteration tile+1 refills it
  }

  if (!warpActive) return;
  st.template storeRows<HEAD_DIM>(out + head * HEAD_DIM, Q_DIM, warpRow0, rows);
}

} // namespace minfer
