// templates/embedding.cuh — table lookup: out[r] = table[ids[r]] for token and learned-position embeddings.
//
//   embedding<D, WeightT>(const int *ids [rows], const WeightT *table [table_rows, D], bf16 *out [rows, D],
//                         int rows, int table_rows)
//
// One block per row (EmbeddingSpec picks the block size: one 16-byte output vector per thread up to 256
// threads, looping beyond). The table may be bf16, f16 or f32; values are rounded to bf16 once.
// An id outside [0, table_rows) writes NaN over its whole row: the runtime validates ids before a launch,
// so a NaN row is a bug made visible rather than a read out of bounds.
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
  int table_rows;    // ids outside [0, table_rows) give zero rows
};


// The body: row tile.x, any number of threads, waiting through `wait`.
template <int D, typename WeightT, class Wait>
__device__ __forceinline__ void embeddingTile(const EmbeddingParams &p, const Tile &tile, const Wait &wait) {
  const int *ids = p.ids;
  const WeightT *table = static_cast<const WeightT *>(p.table);
  bf16 *out = p.out;
  const int rows = p.rows, table_rows = p.table_rows;
  wait();
  static_assert(D > 0, "embedding: D must be positive");
  constexpr int VEC = vecWidth<bf16, D>();
  constexpr int NV = D / VEC;
  const long long r = tile.x;
  if (r >= rows) return;
  const int id = ids[r];
  bf16 *o = out + r * D;
  if (id < 0 || id >= table_rows) {
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
    storeBf16<VEC>(o + i * VEC, v);
  }
}

// The kernel, and the body as a task of the persistent decode kernel (persistent.cuh), at any block size.
template <int D, typename WeightT> __global__ void embedding(const EmbeddingParams p) {
  embeddingTile<D, WeightT>(p, launchTile(), GridWait{});
}
template <int D, typename WeightT> struct EmbeddingTask {
  using Params = EmbeddingParams;
  static constexpr int kThreads = 0; // any: the row's vectors are strided by the block's (bodyThreads)
  template <class Wait> __device__ __forceinline__ static void run(const Params &p, const Tile &t, const Wait &w) {
    embeddingTile<D, WeightT>(p, t, w);
  }
  __device__ __forceinline__ static void prefetch(const Params &, const Tile &) {} // no weights to stream
};

} // namespace minfer
