// templates/epilogue.cuh — epilogue policies: what a matmul kernel does to each fp32 accumulator before it
// rounds it to bf16 and stores it (bias, activation, residual add).
//
// The fusion pass picks one policy per matmul (compiler/kernels/Epilogue.h maps its enum to these type
// names); gemm.cuh and gemv.cuh take it as a template parameter, so one kernel serves every epilogue and
// the policy's code is inlined into the store. A policy is composed of three steps in this order:
//
//   v = acc (+ bias[col]);  v = act(v);  v = v (+ residual[row, col])
//
// which covers `matmul + bias`, `gelu(matmul + bias)` (GPT-2 MLP up), `silu(matmul)` and
// `x + matmul (+ bias)` (the residual stream after an output projection).
//
// Interface, for a policy P and a kernel whose output C is [M, N] bf16 row-major:
//   P::template apply<N>(acc, row, col, p)         one element (any N)
//   P::template apply2<N>(acc2, row, col, p)       elements (row, col) and (row, col + 1); needs N and col
//                                                  even, so bias and residual pairs are 4-byte aligned
// The residual is [M, N] like C (row stride N). C may alias p.residual (an in-place residual add): each
// residual element is read by the thread that writes that element of C, just before the write, and never
// through the read-only (.nc) path.
#pragma once

#include "common.cuh"

namespace minfer {

// Passed by value to every matmul kernel. Pointers a policy does not use may be null.
struct EpiParams {
  const bf16 *bias;     // [N]
  const bf16 *residual; // [M, N], row stride N
};

// Activations: fp32 in, fp32 out, the same formulas as the interpreter (ir/Interpreter.cpp), with the
// accurate (not fast-math) tanhf / erff / expf.
struct ActNone {
  __device__ __forceinline__ static float f(float x) { return x; }
};
struct ActGeluTanh { // HF gelu_new / gelu_pytorch_tanh
  __device__ __forceinline__ static float f(float x) {
    const float kSqrt2OverPi = 0.7978845608028654f;
    return 0.5f * x * (1.f + tanhf(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
  }
};
struct ActGeluErf {
  __device__ __forceinline__ static float f(float x) { return 0.5f * x * (1.f + erff(x * 0.7071067811865476f)); }
};
struct ActSilu {
  __device__ __forceinline__ static float f(float x) { return x / (1.f + expf(-x)); }
};
struct ActRelu {
  __device__ __forceinline__ static float f(float x) { return fmaxf(x, 0.f); }
};

template <bool BIAS, class Act, bool RESIDUAL> struct EpiPolicy {
  static constexpr bool kUsesBias = BIAS;
  static constexpr bool kUsesResidual = RESIDUAL;

  template <int N> __device__ __forceinline__ static float apply(float acc, int row, int col, const EpiParams &p) {
    float v = acc;
    if constexpr (BIAS) v += toFloat(p.bias[col]);
    v = Act::f(v);
    if constexpr (RESIDUAL) v += toFloat(p.residual[static_cast<long long>(row) * N + col]);
    return v;
  }

  template <int N>
  __device__ __forceinline__ static float2 apply2(float2 acc, int row, int col, const EpiParams &p) {
    static_assert(N % 2 == 0, "apply2 reads bias and residual pairs as 4-byte words: N must be even");
    float2 v = acc;
    if constexpr (BIAS) {
      float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(p.bias + col));
      v.x += b.x;
      v.y += b.y;
    }
    v.x = Act::f(v.x);
    v.y = Act::f(v.y);
    if constexpr (RESIDUAL) {
      const bf16 *r = p.residual + static_cast<long long>(row) * N + col;
      float2 res = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(r));
      v.x += res.x;
      v.y += res.y;
    }
    return v;
  }
};

// The policies the fusion pass can name (compiler/kernels/Epilogue.def lists the same set: a policy
// added here must be added there, and GemmSpecTest compiles every one).
struct EpiNone : EpiPolicy<false, ActNone, false> {};
struct EpiBias : EpiPolicy<true, ActNone, false> {};
struct EpiGeluTanh : EpiPolicy<false, ActGeluTanh, false> {};
struct EpiGeluErf : EpiPolicy<false, ActGeluErf, false> {};
struct EpiSilu : EpiPolicy<false, ActSilu, false> {};
struct EpiRelu : EpiPolicy<false, ActRelu, false> {};
struct EpiBiasGeluTanh : EpiPolicy<true, ActGeluTanh, false> {};
struct EpiBiasGeluErf : EpiPolicy<true, ActGeluErf, false> {};
struct EpiBiasSilu : EpiPolicy<true, ActSilu, false> {};
struct EpiBiasRelu : EpiPolicy<true, ActRelu, false> {};
struct EpiResidual : EpiPolicy<false, ActNone, true> {};
struct EpiBiasResidual : EpiPolicy<true, ActNone, true> {};

} // namespace minfer
