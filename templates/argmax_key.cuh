// templates/argmax_key.cuh — a row's argmax as one 64-bit key that atomicMax can reduce, encoded and decoded
// here only. The lm_head's gemv folds the argmax with it (epilogue.cuh EpiArgmax, gemv.cuh), and the decode
// step's bookkeeping reads the token back (decode_step.cuh).
//
// High word: the logit's bits made monotone (larger value, larger key; -0 folded into +0). Low word: the
// column complemented, so that of equal logits the lowest index has the largest key: the same pick as the
// argmax kernel (sampling.cuh), the lowest index of the largest logit.
#pragma once

namespace minfer {

__device__ __forceinline__ unsigned long long argmaxKey(float v, int col) {
  if (v == 0.f) v = 0.f; // -0 -> +0
  unsigned u = __float_as_uint(v);
  u = (u & 0x80000000u) ? ~u : (u | 0x80000000u); // monotonic in v
  return (static_cast<unsigned long long>(u) << 32) | (0xffffffffu - static_cast<unsigned>(col));
}

// The column a key was made from.
__device__ __forceinline__ int argmaxKeyIndex(unsigned long long key) {
  return static_cast<int>(0xffffffffu - static_cast<unsigned>(key & 0xffffffffu));
}

} // namespace minfer
