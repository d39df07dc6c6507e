// templates/rope.cuh — rotary position embedding, and the KV-cache write (plain, and fused with k's rope).
//
//   rope<HEADS, HEAD_DIM, STYLE>(const bf16 *x [rows, HEADS*HEAD_DIM], bf16 *y [rows, HEADS*HEAD_DIM],
//                                const int *positions [rows], const float *inv_freq [HEAD_DIM/2], int rows)
//   kv_write<KV_HEADS, HEAD_DIM>(const bf16 *k [rows, KVD], const bf16 *v [rows, KVD],
//                                bf16 *k_cache, bf16 *v_cache [batch, max_seq, KVD],
//                                const int *seq_of [rows], const int *pos_of [rows], int rows, int max_seq)
//   rope_kv_write<KV_HEADS, HEAD_DIM, STYLE>(k, v, k_cache, v_cache, seq_of, pos_of, inv_freq, rows, max_seq)
//       (KVD = KV_HEADS * HEAD_DIM)
//
// Rope: pair i of a head (i < HEAD_DIM/2) is (x[i], x[i + HEAD_DIM/2]) in the Half style (HF Llama's
// rotate_half) and (x[2i], x[2i+1]) in the Interleaved style; it is rotated by the angle pos * inv_freq[i]:
//   (a, b) -> (a cos - b sin, b cos + a sin).
// inv_freq comes from the host (ir::ropeInverseFrequencies, which applies the default, linear or llama3
// schedule), so the kernel knows no schedule. One block per row: its threads first compute the row's
// HEAD_DIM/2 cos/sin pairs once into shared memory (every head shares them), then rotate 16-byte vectors.
// y may alias x.
//
// Accuracy: the angle is (float)pos * inv_freq in fp32, as HF computes it, then sincosf (≤ 2 ulp, with an
// exact range reduction). The angle itself is off by up to ~pos * inv_freq * 2^-23 (inv_freq rounded to
// fp32, then the product rounded): for the fastest pair (inv_freq = 1) 5e-4 rad at position 4096 and
// 1.6e-2 rad at 131072. HF's fp32 reference carries the same error; the interpreter computes in double, and
// at the tested positions (≤ 4000) the difference is far below bf16's 2^-8 resolution. The fused qkv
// epilogue (epilogue.cuh EpiQkv::rotation) reads a table computed in double instead, as the interpreter and
// HF in float64 do: at long contexts a --no-fuse run (this kernel) and a fused one differ by that error.
//
// KV write: the cache of one layer is [batch, max_seq, KVD]; row r of k and v goes to
// cache[seq_of[r]][pos_of[r]]. A row whose seq_of is negative or whose pos_of is outside [0, max_seq) is
// skipped (the runtime validates both; the kernel never writes outside the cache for them; seq_of beyond
// the batch cannot be checked here). rope_kv_write ropes k at its cache position pos_of[r] (a decoder's
// rope position is its cache position) on the way into the cache and copies v.
#pragma once

#include "common.cuh"
#include "pointwise.cuh"

namespace minfer {

// The kernels' one argument; its host mirror (same field names and offsets, checked in every generated
// source) is in compiler/kernels/RowOps.h.
struct RopeParams {
  const bf16 *x;         // [rows, HEADS * HEAD_DIM]
  bf16 *y;               // [rows, HEADS * HEAD_DIM], may alias x
  const int *positions;  // [rows]
  const float *inv_freq; // [HEAD_DIM / 2]
  int rows;
};

// kv_write and rope_kv_write (KVD = KV_HEADS * HEAD_DIM).
struct KvWriteParams {
  const bf16 *k;         // [rows, KVD] (rope_kv_write: not yet roped)
  const bf16 *v;         // [rows, KVD]
  bf16 *k_cache;         // [batch, max_seq, KVD]
  bf16 *v_cache;         // [batch, max_seq, KVD]
  const int *seq_of;     // [rows]
  const int *pos_of;     // [rows]: cache slot and rope position
  const float *inv_freq; // [HEAD_DIM / 2] (rope_kv_write)
  int rows;
  int max_seq;
};


enum class RopeStyle { Half, Interleaved };

namespace rope_detail {

// Rotates one row of HEADS heads from src into dst (which may alias src) at position pos. Every thread of
// the block must call it (it synchronises); cosT/sinT are [HEAD_DIM/2] shared arrays.
template <int HEADS, int HEAD_DIM, RopeStyle STYLE>
__device__ __forceinline__ void ropeRow(const bf16 *src, bf16 *dst, int pos, const float *inv_freq, float *cosT,
                                        float *sinT) {
  static_assert(HEADS > 0 && HEAD_DIM > 0, "rope: HEADS and HEAD_DIM must be positive");
  static_assert(HEAD_DIM % 2 == 0, "rope: HEAD_DIM must be even to rotate pairs");
  constexpr int HALF = HEAD_DIM / 2;
  for (int i = threadIdx.x; i < HALF; i += blockDim.x) {
    const float angle = static_cast<float>(pos) * inv_freq[i];
    sincosf(angle, &sinT[i], &cosT[i]);
  }
  __syncthreads();
  if constexpr (STYLE == RopeStyle::Half) {
    // A unit is VEC consecutive pairs: VEC elements of the first half and the VEC paired ones.
    constexpr int VEC = vecWidth<bf16, HALF>();
    constexpr int UNITS_PER_HEAD = HALF / VEC;
    for (int u = threadIdx.x; u < HEADS * UNITS_PER_HEAD; u += blockDim.x) {
      const int h = u / UNITS_PER_HEAD, i0 = (u % UNITS_PER_HEAD) * VEC;
      const int offA = h * HEAD_DIM + i0, offB = offA + HALF;
      float a[VEC], b[VEC], ya[VEC], yb[VEC];
      loadFloats<VEC>(src + offA, a);
      loadFloats<VEC>(src + offB, b);
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const float c = cosT[i0 + e], s = sinT[i0 + e];
        ya[e] = a[e] * c - b[e] * s;
        yb[e] = b[e] * c + a[e] * s;
      }
      storeBf16<VEC>(dst + offA, ya);
      storeBf16<VEC>(dst + offB, yb);
    }
  } else {
    // A unit is VEC consecutive elements: VEC / 2 adjacent pairs.
    constexpr int VEC = vecWidth<bf16, HEAD_DIM>(); // ≥ 2: HEAD_DIM is even
    constexpr int UNITS_PER_HEAD = HEAD_DIM / VEC;
    for (int u = threadIdx.x; u < HEADS * UNITS_PER_HEAD; u += blockDim.x) {
      const int h = u / UNITS_PER_HEAD, j0 = (u % UNITS_PER_HEAD) * VEC;
      float xv[VEC], yv[VEC];
      loadFloats<VEC>(src + h * HEAD_DIM + j0, xv);
#pragma unroll
      for (int e = 0; e < VEC; e += 2) {
        const int i = (j0 + e) / 2;
        const float c = cosT[i], s = sinT[i];
        yv[e] = xv[e] * c - xv[e + 1] * s;
        yv[e + 1] = xv[e + 1] * c + xv[e] * s;
      }
      storeBf16<VEC>(dst + h * HEAD_DIM + j0, yv);
    }
  }
}

// The element offset of cache row (seq, pos), or -1 when it is outside the cache.
template <int KVD> __device__ __forceinline__ long long cacheRow(int seq, int pos, int max_seq) {
  if (seq < 0 || pos < 0 || pos >= max_seq) return -1;
  return (static_cast<long long>(seq) * max_seq + pos) * KVD;
}

// Copies one row of KVD elements, 16-byte vectors spread over the block.
template <int KVD> __device__ __forceinline__ void copyRow(const bf16 *src, bf16 *dst) {
  constexpr int VEC = vecWidth<bf16, KVD>();
  for (int i = threadIdx.x; i < KVD / VEC; i += blockDim.x)
    *reinterpret_cast<Pack<bf16, VEC> *>(dst + i * VEC) = *reinterpret_cast<const Pack<bf16, VEC> *>(src + i * VEC);
}

} // namespace rope_detail

template <int HEADS, int HEAD_DIM, RopeStyle STYLE>
__global__ void rope(const RopeParams p) {
  gridDependencyWait();
  __shared__ float cosT[HEAD_DIM / 2], sinT[HEAD_DIM / 2];
  const long long r = blockIdx.x;
  if (r >= p.rows) return;
  constexpr int W = HEADS * HEAD_DIM;
  rope_detail::ropeRow<HEADS, HEAD_DIM, STYLE>(p.x + r * W, p.y + r * W, p.positions[r], p.inv_freq, cosT, sinT);
}

template <int KV_HEADS, int HEAD_DIM>
__global__ void kv_write(const KvWriteParams p) {
  gridDependencyWait();
  constexpr int KVD = KV_HEADS * HEAD_DIM;
  static_assert(KV_HEADS > 0 && HEAD_DIM > 0, "kv_write: KV_HEADS and HEAD_DIM must be positive");
  const long long r = blockIdx.x;
  if (r >= p.rows) return;
  const long long dst = rope_detail::cacheRow<KVD>(p.seq_of[r], p.pos_of[r], p.max_seq);
  if (dst < 0) return;
  rope_detail::copyRow<KVD>(p.k + r * KVD, p.k_cache + dst);
  rope_detail::copyRow<KVD>(p.v + r * KVD, p.v_cache + dst);
}

// kv_write with k roped at its cache position on the way in.
template <int KV_HEADS, int HEAD_DIM, RopeStyle STYLE>
__global__ void rope_kv_write(const KvWriteParams p) {
  gridDependencyWait();
  constexpr int KVD = KV_HEADS * HEAD_DIM;
  __shared__ float cosT[HEAD_DIM / 2], sinT[HEAD_DIM / 2];
  const long long r = blockIdx.x;
  if (r >= p.rows) return;
  const int pos = p.pos_of[r];
  const long long dst = rope_detail::cacheRow<KVD>(p.seq_of[r], pos, p.max_seq);
  if (dst < 0) return; // uniform over the block: ropeRow's barrier is skipped by all or none
  rope_detail::copyRow<KVD>(p.v + r * KVD, p.v_cache + dst);
  rope_detail::ropeRow<KV_HEADS, HEAD_DIM, STYLE>(p.k + r * KVD, p.k_cache + dst, pos, p.inv_freq, cosT, sinT);
}

} // namespace minfer
