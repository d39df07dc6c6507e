// templates/split.cuh — split of a fused projection: y_i = x[:, offset_i : offset_i + S_i].
//
// One launch writes up to four parts (q, k, v of GPT-2's c_attn), each a contiguous [rows, S_i] tensor
// that later kernels read with unit row stride. 8 bf16 (16 bytes) per thread when every part allows it.
#pragma once

#include "common.cuh"

namespace minfer {

// The kernels' one argument; its host mirror (same field names and offsets, checked in every generated
// source) is in compiler/kernels/Split.h.
struct SplitParams {
  const bf16 *x;              // [rows, COLS]
  bf16 *y0, *y1, *y2, *y3;    // [rows, S0..S3]; null past the parts
  int rows;
};


template <int COLS, int S0, int S1, int S2, int S3>
__global__ void split(const SplitParams p) {
  const bf16 *__restrict__ x = p.x;
  bf16 *__restrict__ y0 = p.y0;
  bf16 *__restrict__ y1 = p.y1;
  bf16 *__restrict__ y2 = p.y2;
  bf16 *__restrict__ y3 = p.y3;
  const int rows = p.rows;
  gridDependencyWait();
  static_assert(S0 > 0 && S1 >= 0 && S2 >= 0 && S3 >= 0, "split needs a first part and non-negative sizes");
  static_assert(S0 + S1 + S2 + S3 == COLS, "split sizes must add up to the columns");
  // Vectorise by 8 only when every part boundary falls on a multiple of 8 columns.
  constexpr int kVec = (S0 % 8 == 0 && S1 % 8 == 0 && S2 % 8 == 0 && S3 % 8 == 0) ? 8 : 1;
  constexpr int kChunks = COLS / kVec;
  const long long total = (long long)rows * kChunks;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    const int row = int(i / kChunks);
    const int col = int(i % kChunks) * kVec;
    bf16 *dst;
    int width, c;
    if (col < S0) { dst = y0; width = S0; c = col; }
    else if (col < S0 + S1) { dst = y1; width = S1; c = col - S0; }
    else if (col < S0 + S1 + S2) { dst = y2; width = S2; c = col - S0 - S1; }
    else { dst = y3; width = S3; c = col - S0 - S1 - S2; }
    if constexpr (kVec == 8) {
      *reinterpret_cast<Vec8 *>(dst + (long long)row * width + c) =
          *reinterpret_cast<const Vec8 *>(x + (long long)row * COLS + col);
    } else {
      dst[(long long)row * width + c] = x[(long long)row * COLS + col];
    }
  }
}

} // namespace minfer
