// templates/embedding.cuh — table lookup: out[r] = table[ids[r]] for token and learned-position embeddings,
// or with a second table (the fused `embedding_sum`), out[r] = table[ids[r]] + table2[ids2[r]].
//
//   embedding<D, WeightT, Weight2T = void>(EmbeddingParams)
//
// One block per row (EmbeddingSpec picks the block size: one 16-byte output vector per thread up to 256
// threads, looping beyond). The tables may be bf16, f16 or f32; both rows are added in fp32 and rounded to
// bf16 once. An id outside [0, table_rows) (or ids2's outside [0, table2_rows)) writes NaN over its whole row:
// the runtime validates ids before a launch, so a NaN row is a bug made visible rather than a read out of
// bounds.
#pragma once

#include "common.cuh"
#include "pointwise.cuh"

namespace minfer {

// The kernels' one argument; its host mirror (same field names and offsets, checked in every generated
// source) is in compiler/kernels/RowOps.h.
struct EmbeddingParams {
  const int *ids;    // [rows]
  const void *table; // [table_rows, D] of WeightT
  bf16 *out;         // [rows, D]
  int rows;
  int table_rows;    // ids outside [0, table_rows) give NaN rows
  const int *ids2;    // embedding_sum: [rows], the second table's ids (unused with Weight2T = void)
  const void *table2; // [table2_rows, D] of Weight2T
  int table2_rows;
};


// Whether a template's optional type argument was left out (void).
template <typename T> constexpr bool kIsVoid = false;
template <> constexpr bool kIsVoid<void> = true;

// The body: row tile.x, any number of threads, waiting through `wait`.
template <int D, typename WeightT, typename Weight2T, class Wait>
__device__ __forceinline__ void embeddingTile(const EmbeddingParams &p, const Tile &tile, const Wait &wait) {
  constexpr bool kSum = !kIsVoid<Weight2T>;
  const WeightT *table = static_cast<const WeightT *>(p.table);
  bf16 *out = p.out;
  wait();
  static_assert(D > 0, "embedding: D must be positive");
  constexpr int VEC = vecWidth<bf16, D>();
  constexpr int NV = D / VEC;
  const long long r = tile.x;
  if (r >= p.rows) return;
  const int id = p.ids[r];
  const int id2 = kSum ? p.ids2[r] : 0;
  bf16 *o = out + r * D;
  if (id < 0 || id >= p.table_rows || (kSum && (id2 < 0 || id2 >= p.table2_rows))) {
    Pack<bf16, VEC> nan;
#pragma unroll
    for (int e = 0; e < VEC; ++e) nan.v[e] = bf16NaN();
    for (int i = threadIdx.x; i < NV; i += bodyThreads()) *reinterpret_cast<Pack<bf16, VEC> *>(o + i * VEC) = nan;
    return;
  }
  const WeightT *t = table + static_cast<long long>(id) * D;
  for (int i = threadIdx.x; i < NV; i += bodyThreads()) {
    float v[VEC];
    loadFloats<VEC>(t + i * VEC, v);
    if constexpr (kSum) {
      const Weight2T *t2 = static_cast<const Weight2T *>(p.table2) + static_cast<long long>(id2) * D;
      float w[VEC];
      loadFloats<VEC>(t2 + i * VEC, w);
#pragma unroll
      for (int e = 0; e < VEC; ++e) v[e] += w[e];
    }
    storeBf16<VEC>(o + i * VEC, v);
  }
}

// The kernel, and the body as a task of the persistent decode kernel (persistent.cuh), at any block size.
template <int D, typename WeightT, typename Weight2T = void> __global__ void embedding(const EmbeddingParams p) {
  embeddingTile<D, WeightT, Weight2T>(p, launchTile(), GridWait{});
}
template <int D, typename WeightT, typename Weight2T = void> struct EmbeddingTask {
  using Params = EmbeddingParams;
  static constexpr int kThreads = 0; // any: the row's vectors are strided by the block's (bodyThreads)
  template <class Wait> __device__ __forceinline__ static void run(const Params &p, const Tile &t, const Wait &w) {
    embeddingTile<D, WeightT, Weight2T>(p, t, w);
  }
  __device__ __forceinline__ static void prefetch(const Params &, const Tile &) {} // no weights to stream
};

} // namespace minfer
