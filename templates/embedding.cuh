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


template <int D, typename WeightT>
__global__ void embedding(const EmbeddingParams p) {
  const int *ids = p.ids;
  const WeightT *table = static_cast<const WeightT *>(p.table);
  bf16 *out = p.out;
  const int rows = p.rows, table_rows = p.table_rows;
  gridDependencyWait();
  static_assert(D > 0, "embedding: D must be positive");
  constexpr int VEC = vecWidth<bf16, D>();
  constexpr int NV = D / VEC;
  const long long r = blockIdx.x;
  if (r >= rows) return;
  const int id = ids[r];
  bf16 *o = out + r * D;
  if (id < 0 || id >= table_rows) {
    Pack<bf16, VEC> nan;
#pragma unroll
    for (int e = 0; e < VEC; ++e) nan.v[e] = bf16NaN();
    for (int i = threadIdx.x; i < NV; i += blockDim.x) *reinterpret_cast<Pack<bf16, VEC> *>(o + i * VEC) = nan;
    return;
  }
  const WeightT *t = table + static_cast<long long>(id) * D;
  for (int i = threadIdx.x; i < NV; i += blockDim.x) {
    float v[VEC];
    loadFloats<VEC>(t + i * VEC, v);
    storeBf16<VEC>(o + i * VEC, v);
  }
}

} // namespace minfer
