// templates/epilogue.cuh — what a matmul kernel fuses around its product: epilogue policies (what happens to
// each fp32 accumulator before it is stored) and, for the decode kernels (gemv.cuh), prologue policies (a
// norm applied to the activation rows as they are read).
//
// compiler/kernels/Epilogue.h names the policy of each kernel spec; gemm.cuh and gemv.cuh take it as a
// template parameter, so its code is inlined into the store. The policies:
//
//   EpiPointwise<BIAS, Act, SCALE, RESIDUAL, ROW_SQ>
//                                              v = act(acc + bias[col]) * scale + residual[row, col] -> C[row, col];
//                                              ROW_SQ (with RESIDUAL, gemm_wgmma.cuh only): the kernel also writes
//                                              each row's sum of squares of what it stored, one partial a tile
//                                              of BN columns, to p.row_sq [M, ceil(N / BN)] (the next matmul's
//                                              RMS norm: ProRowSquares)
//   EpiGated<Act>                              W's rows interleave gate and up (packed so at load): the pair
//                                              (col, col + 1) = (g, u) of output col / 2: C[row, col/2] = act(g) * u
//   EpiQkv<HEADS, KV_HEADS, HEAD_DIM, ROPE, BIAS>
//                                              W stacks q, k, v rows; q goes to C [M, HEADS*HEAD_DIM], k and v
//                                              into the KV caches at (seq_of[row], positions[row]); q and k are
//                                              rotated (ROPE 1: half style, 2: interleaved; 0: none) with W's
//                                              rows for the half style permuted at load so that each rotary
//                                              pair (i, i + HEAD_DIM/2) is a column pair (2i, 2i + 1)
//
// Interface, for a policy P and C [M, N] (N = W's rows):
//   P::kPairs                                    true when P needs columns (col, col + 1) together
//   P::kArgmax                                   EpiArgmax: the kernel also folds each row's argmax (gemv only)
//   P::kRowSquares                               EpiPointwise<.., true>: also the rows' partial sums of squares
//   P::kRopeHeadDim                              EpiQkv with rope: HEAD_DIM, else 0. Column pair (col, col + 1)
//                                                then rotates by the angle of pair (col % HEAD_DIM) / 2, the same
//                                                in every head: a kernel whose tiles hold whole heads may
//                                                compute it once per head offset with P::rotation(pos, i, p)
//                                                and store through P::template store2Rotated<N>(..., r, cs),
//                                                or for the half style a tile row at a time through
//                                                P::template storeTileRowHalfRope<BN> (whole heads of one
//                                                region) or storeRowHalfRope<BN> (any 16-column slice pairs),
//                                                given the row's P::RopeRow<BN> (position, sequence and
//                                                rotations, which the kernel may load ahead of the stores)
//   P::kResidual                                 EpiPointwise with a residual: a kernel may load several
//                                                pairs with P::template residual2<N>(row, col, p) first, then
//                                                store each through P::template store2Residual<N>(..., res)
//                                                (store2 loads each just before its store: C may alias the
//                                                residual, so the compiler cannot move the next load above it);
//                                                single elements likewise with residual1 and store1Residual
//   P::kGated                                    EpiGated: output column col / 2 from the pair (col, col + 1);
//                                                P::gated(acc2) its value, P::template storeOut2<N>(C, v, row,
//                                                oc) two adjacent outputs (oc even, N % 4 == 0) in one 4-byte word
//   P::template store4<N>(C, acc4, row, col, p)  pointwise policies (!P::kPairs), N % 4 == 0, col % 4 == 0: four
//                                                adjacent elements in one 8-byte store, the arithmetic of two
//                                                store2s; with a residual instead residual4 (the four residual
//                                                elements as two bf16 pairs) and store4Residual (the
//                                                residual2 / store2Residual pair for four columns)
//   P::template store1<N>(C, acc, row, col, p)   one element (pointwise policies only; odd N)
//   P::template store2<N>(C, acc2, row, col, p)  elements (row, col) and (row, col + 1), col even, N even
//   P::Row, P::rowOf(row, p)                     what the policy reads per row (EpiQkv: position, sequence),
//                                                read once and passed as a last argument to store1/store2 by
//                                                the kernels that store many columns of a row
// A pointwise C may alias p.residual (an in-place residual add): each residual element is read by the thread
// that writes that element of C, before the write, and never through the read-only (.nc) path.
//
// Prologue policies (the gemvs; gemm_wgmma.cuh takes ProNorm<false, void> only): ProNone, and ProNorm<LAYER, WeightT>, which normalises each activation row
// as the norm kernel (norm.cuh) would — fp32 statistics, two-pass for LayerNorm, rsqrtf, the result rounded to
// bf16 before it is multiplied — so a folded norm gives the matmul what the norm kernel would have stored, up
// to the order of the fp32 sums.
//   P::kActive; P::template blockStats<K, WARPS, MAX_M>(A, rows, st, scratch, p): {mean, inv} of each row
//   into shared st[m], by the whole block (it synchronises); P::apply8(a[8], k0, st[m], p): elements
//   k0..k0+7 of a row, in place. The statistics are computed once per block: a warp each would read the
//   activation rows once per 1-2 rows of W (twice the lm_head's time, measured).
//   P::kLayer, P::kGammaBytes (gamma's element size; 0 for ProNone and for unit gains, ProNorm<false, void>);
//   P::gamma8(g[8], at): the 8 gamma elements at `at` (16-byte aligned, global or shared) as floats, ones
//   for unit gains. gemv_wgmma.cuh takes RMS norms only and
//   applies them in two halves, since its activation rows stream through K with the weights: x * gamma,
//   rounded to bf16, is what it multiplies, and 1 / rms (from the same stream) scales each product. So its
//   rounding is that of x * gamma rather than of the normalised value: the same size of error, not the same bits.
#pragma once

#include "argmax_key.cuh"
#include "common.cuh"

namespace minfer {

// Passed by value to every matmul kernel; the fields a policy does not use may be null / zero. The host
// mirror is compiler/kernels/Epilogue.h's EpiParamsHost (same layout, checked there).
struct EpiParams {
  const bf16 *bias;      // [N]
  const bf16 *residual;  // [M, N], row stride N
  float scale;           // EpiPointwise with SCALE
  int max_seq;           // EpiQkv: cache rows per sequence
  const int *positions;  // EpiQkv: [M] rope angle and cache row
  const int *seq_of;     // EpiQkv: [M] cache sequence (negative: skip the cache write)
  const float2 *rope;    // EpiQkv: [max_seq, HEAD_DIM / 2] (cos, sin) of each position's rotary pairs
  bf16 *k_cache;         // EpiQkv: [batch, max_seq, KV_HEADS * HEAD_DIM]
  bf16 *v_cache;
  const void *gamma;     // ProNorm: [K] of its WeightT
  const void *beta;      // ProNorm<true>: [K]
  float eps;             // ProNorm
  unsigned long long *argmax; // EpiArgmax: [M] keys (argmaxKey), zero before the kernel, atomically maxed
  float *row_sq;         // EpiPointwise<.., ROW_SQ> writes, ProRowSquares reads: [M, row_sq_parts] partial sums
  int row_sq_parts;      // ProRowSquares: the partials of a row (the writing gemm's tiles across its N)
};

// The matmul kernels' one argument (gemm, gemv, gemvMma); its host mirror (same field names and offsets,
// checked in every generated source) is in compiler/kernels/Epilogue.h.
struct MatmulParams {
  bf16 *C;        // [rows, N] (N / 2 gated, the q columns for qkv); may alias epi.residual
  const bf16 *A;  // [rows, K]
  const bf16 *W;  // [N, K]
  int rows;       // M, tokens this step
  EpiParams epi;
};

// Activations: fp32 in, fp32 out, the same formulas as the interpreter (ir/Interpreter.cpp), with the
// accurate (not fast-math) tanhf / erff; SiLU as below.
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
// SiLU through the hardware exponential and reciprocal (__expf: ex2.approx, a few fp32 ulps near the origin;
// __fdividef: 2 ulps), far below the bf16 rounding every caller applies next. The accurate expf and the IEEE
// division are ~40 instructions a value, and the division's slow path (a denominator past 2^126, x < -87)
// more: the gated gemms' epilogues ran 4% faster at 512 rows with this, and 21% where large products took
// the slow path (bench/NOTES.md, session 34). Past x < -87, __expf(-x) is inf and __fdividef returns -0 (the
// exact value is below 1e-36).
struct ActSilu {
  __device__ __forceinline__ static float f(float x) { return __fdividef(x, 1.f + __expf(-x)); }
};
struct ActRelu {
  __device__ __forceinline__ static float f(float x) { return fmaxf(x, 0.f); }
};

// Wide stores (gemm_wgmma.cuh's epilogues). A thread of a wgmma accumulator holds, for each of its rows, columns 2 t4 and
// 2 t4 + 1 (t4 = lane % 4) of every 8-column slice, so a quad's four lanes cover 16 bytes of a slice's row: one
// 4-byte store a lane writes half of an L2 sector, and the sector's other half comes from the next slice's
// store (ncu, TinyLlama's 512-row gemms, H200: twice as many sectors written to L2 as C holds, where cuBLAS
// writes each once; the gated epilogue, one bf16 a lane and slice, four times). Exchanging with the
// neighbouring lane over two adjacent slices gives each lane four adjacent columns, and the quad one whole
// sector of the pair's 16 columns per row, in one 8-byte store a lane.
//
// The one shuffle of each exchange below: a lane offers the neighbouring lane (t4 ^ 1) its `b` where t4 is
// even, its `a` where odd (`odd`), and gets the neighbour's offer. Every lane of the warp must call it.
template <class T> __device__ __forceinline__ T neighbourOffer(T a, T b, bool odd) {
  return __shfl_xor_sync(0xffffffffu, odd ? a : b, 1);
}
// quadExchange4: the accumulator pairs of slices 2q (a) and 2q + 1 (b) of a row in, four adjacent columns out,
// at quadColumn4(t4) of the slice pair's 16: even lanes keep their own first-slice pair and take the
// neighbour's, odd lanes the same with the second slice.
__device__ __forceinline__ float4 quadExchange4(float2 a, float2 b, int t4) {
  const bool odd = t4 & 1;
  const float rx = neighbourOffer(a.x, b.x, odd), ry = neighbourOffer(a.y, b.y, odd);
  return odd ? make_float4(rx, ry, b.x, b.y) : make_float4(a.x, a.y, rx, ry);
}
__host__ __device__ constexpr int quadColumn4(int t4) { return 2 * t4 + (t4 & 1) * 6; } // 0, 8, 4, 12
// The gated epilogue's outputs (one a lane and slice: output column t4 of slice 2q's four, a, and of slice
// 2q + 1's, b) in, two adjacent outputs out, at gatedColumn2(t4) of the pair's 8 outputs.
__device__ __forceinline__ float2 quadExchange2(float a, float b, int t4) {
  const bool odd = t4 & 1;
  const float r = neighbourOffer(a, b, odd);
  return odd ? make_float2(r, b) : make_float2(a, r);
}
__host__ __device__ constexpr int gatedColumn2(int t4) { return t4 + (t4 & 1) * 3; } // 0, 4, 2, 6
// The qkv epilogue's rotated words (EpiQkv::rotatePairsInQuad: lane t4 holds elements 2 t4, 2 t4 + 1 of a
// head half's 8 from slice pair u, a, and of the next 8 from slice pair u + 1, b) in, two adjacent words out,
// elements quadColumn4(t4) .. + 3 of the 16: quadExchange2's pattern on packed bf16 pairs.
__device__ __forceinline__ uint2 quadExchangeWords(unsigned a, unsigned b, int t4) {
  const bool odd = t4 & 1;
  const unsigned r = neighbourOffer(a, b, odd);
  return odd ? make_uint2(r, b) : make_uint2(a, r);
}

template <bool BIAS, class Act, bool SCALE, bool RESIDUAL, bool ROW_SQ = false> struct EpiPointwise {
  static_assert(!ROW_SQ || RESIDUAL, "EpiPointwise: row squares come with the residual add (the residual stream)");
  static constexpr bool kPairs = false;
  static constexpr bool kArgmax = false;
  static constexpr int kRopeHeadDim = 0;
  static constexpr bool kResidual = RESIDUAL;
  static constexpr bool kRowSquares = ROW_SQ;
  static constexpr bool kGated = false;
  struct Row {};
  __device__ __forceinline__ static Row rowOf(int, const EpiParams &) { return {}; }

  template <int N> __device__ __forceinline__ static float apply(float acc, int row, int col, const EpiParams &p) {
    float v = beforeResidual1(acc, col, p);
    if constexpr (RESIDUAL) v += residual1<N>(row, col, p);
    return v;
  }

  template <int N>
  __device__ __forceinline__ static void store1(bf16 *C, float acc, int row, int col, const EpiParams &p) {
    C[static_cast<long long>(row) * N + col] = toBf16(apply<N>(acc, row, col, p));
  }

  // The residual element (row, col) that store1 adds last (RESIDUAL only), and store1 with it already loaded:
  // the same arithmetic in the same order as apply, so the same bits.
  template <int N> __device__ __forceinline__ static float residual1(int row, int col, const EpiParams &p) {
    return toFloat(p.residual[static_cast<long long>(row) * N + col]);
  }
  template <int N>
  __device__ __forceinline__ static void store1Residual(bf16 *C, float acc, int row, int col, const EpiParams &p,
                                                        float res) {
    static_assert(RESIDUAL, "store1Residual: a policy with a residual");
    C[static_cast<long long>(row) * N + col] = toBf16(beforeResidual1(acc, col, p) + res);
  }
  template <int N>
  __device__ __forceinline__ static void store1(bf16 *C, float acc, int row, int col, const EpiParams &p, const Row &) {
    store1<N>(C, acc, row, col, p);
  }
  template <int N>
  __device__ __forceinline__ static void store2(bf16 *C, float2 acc, int row, int col, const EpiParams &p, const Row &) {
    store2<N>(C, acc, row, col, p);
  }

  template <int N>
  __device__ __forceinline__ static void store2(bf16 *C, float2 acc, int row, int col, const EpiParams &p) {
    static_assert(N % 2 == 0, "store2 reads bias and residual pairs as 4-byte words: N must be even");
    if constexpr (RESIDUAL) {
      store2Residual<N>(C, acc, row, col, p, residual2<N>(row, col, p));
    } else {
      const float2 v = beforeResidual2(acc, col, p);
      *reinterpret_cast<__nv_bfloat162 *>(C + static_cast<long long>(row) * N + col) = __floats2bfloat162_rn(v.x, v.y);
    }
  }

  // The residual pair (row, col), (row, col + 1) that store2 adds last (RESIDUAL only).
  template <int N> __device__ __forceinline__ static float2 residual2(int row, int col, const EpiParams &p) {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(p.residual + static_cast<long long>(row) * N + col));
  }

  // store2 with the residual pair `res` = residual2<N>(row, col, p) already loaded; returns the stored pair.
  template <int N>
  __device__ __forceinline__ static float2 store2Residual(bf16 *C, float2 acc, int row, int col, const EpiParams &p,
                                                          float2 res) {
    static_assert(RESIDUAL, "store2Residual: a policy with a residual");
    float2 v = beforeResidual2(acc, col, p);
    v.x += res.x;
    v.y += res.y;
    const __nv_bfloat162 h = __floats2bfloat162_rn(v.x, v.y);
    *reinterpret_cast<__nv_bfloat162 *>(C + static_cast<long long>(row) * N + col) = h;
    return __bfloat1622float2(h);
  }

  // Four adjacent elements (row, col .. col + 3), col % 4 == 0, in one 8-byte store: two store2s' arithmetic.
  // Without a residual; with one, residual4 and store4Residual (the caller loads a row's words together:
  // gemm_wgmma.cuh ResidualWords).
  template <int N>
  __device__ __forceinline__ static void store4(bf16 *C, float4 acc, int row, int col, const EpiParams &p) {
    static_assert(N % 4 == 0, "store4 writes 8-byte words: N must be a multiple of 4");
    static_assert(!RESIDUAL, "store4: a residual policy stores through residual4 and store4Residual");
    const float2 lo = beforeResidual2(make_float2(acc.x, acc.y), col, p);
    const float2 hi = beforeResidual2(make_float2(acc.z, acc.w), col + 2, p);
    storeWord4(C + static_cast<long long>(row) * N + col, __floats2bfloat162_rn(lo.x, lo.y),
               __floats2bfloat162_rn(hi.x, hi.y));
  }
  // The residual elements (row, col .. col + 3) that store4 adds last (RESIDUAL only): one 8-byte load, kept
  // as its two bf16 pairs until store4Residual adds them (half the registers of four floats, so a thread can
  // have a whole accumulator block's loads in flight).
  template <int N> __device__ __forceinline__ static uint2 residual4(int row, int col, const EpiParams &p) {
    return *reinterpret_cast<const uint2 *>(p.residual + static_cast<long long>(row) * N + col);
  }
  // store4 with the residual words `res` = residual4<N>(row, col, p) already loaded; returns the stored values.
  template <int N>
  __device__ __forceinline__ static float4 store4Residual(bf16 *C, float4 acc, int row, int col, const EpiParams &p,
                                                          uint2 res) {
    static_assert(RESIDUAL, "store4Residual: a policy with a residual");
    const float2 rl = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&res.x));
    const float2 rh = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&res.y));
    float2 lo = beforeResidual2(make_float2(acc.x, acc.y), col, p), hi = beforeResidual2(make_float2(acc.z, acc.w), col + 2, p);
    lo.x += rl.x;
    lo.y += rl.y;
    hi.x += rh.x;
    hi.y += rh.y;
    const __nv_bfloat162 l = __floats2bfloat162_rn(lo.x, lo.y), h = __floats2bfloat162_rn(hi.x, hi.y);
    storeWord4(C + static_cast<long long>(row) * N + col, l, h);
    const float2 sl = __bfloat1622float2(l), sh = __bfloat1622float2(h);
    return make_float4(sl.x, sl.y, sh.x, sh.y);
  }

private:
  __device__ __forceinline__ static void storeWord4(bf16 *at, __nv_bfloat162 lo, __nv_bfloat162 hi) {
    uint2 w;
    w.x = *reinterpret_cast<const unsigned *>(&lo);
    w.y = *reinterpret_cast<const unsigned *>(&hi);
    *reinterpret_cast<uint2 *>(at) = w;
  }
  // Column col up to the residual: bias, activation, scale.
  __device__ __forceinline__ static float beforeResidual1(float v, int col, const EpiParams &p) {
    if constexpr (BIAS) v += toFloat(p.bias[col]);
    v = Act::f(v);
    if constexpr (SCALE) v *= p.scale;
    return v;
  }
  // Columns col and col + 1 up to the residual: bias, activation, scale.
  __device__ __forceinline__ static float2 beforeResidual2(float2 v, int col, const EpiParams &p) {
    if constexpr (BIAS) {
      float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(p.bias + col));
      v.x += b.x;
      v.y += b.y;
    }
    v.x = Act::f(v.x);
    v.y = Act::f(v.y);
    if constexpr (SCALE) {
      v.x *= p.scale;
      v.y *= p.scale;
    }
    return v;
  }
};

// The lm_head's epilogue in greedy decode: the logits as EpiPointwise<false, ActNone, false, false> stores
// them, and each row's argmax folded into p.argmax[row] with argmaxKey (argmax_key.cuh): the FMA gemv reduces
// over its block, then one atomicMax per block and row; the wgmma gemv likewise (its warps' fragments through
// gemv.cuh argmaxFragmentT into shared memory); the weight-ring task reduces over a warp's fragment, then one
// atomicMax per warp and row.

struct EpiArgmax : EpiPointwise<false, ActNone, false, false> {
  static constexpr bool kArgmax = true;
};

template <class Act> struct EpiGated {
  static constexpr bool kPairs = true;
  static constexpr bool kArgmax = false;
  static constexpr bool kRowSquares = false;
  static constexpr int kRopeHeadDim = 0;
  static constexpr bool kResidual = false;
  static constexpr bool kGated = true;
  struct Row {};
  __device__ __forceinline__ static Row rowOf(int, const EpiParams &) { return {}; }

  __device__ __forceinline__ static float gated(float2 acc) { return Act::f(acc.x) * acc.y; }
  template <int N>
  __device__ __forceinline__ static void store2(bf16 *C, float2 acc, int row, int col, const EpiParams &) {
    static_assert(N % 2 == 0, "EpiGated: W interleaves gate and up rows, so N must be even");
    C[static_cast<long long>(row) * (N / 2) + col / 2] = toBf16(gated(acc));
  }
  // Outputs (row, oc) and (row, oc + 1), oc even, as store2 rounds each, in one 4-byte store.
  template <int N> __device__ __forceinline__ static void storeOut2(bf16 *C, float2 v, int row, int oc) {
    static_assert(N % 4 == 0, "EpiGated::storeOut2 writes 4-byte words: N / 2 must be even");
    *reinterpret_cast<__nv_bfloat162 *>(C + static_cast<long long>(row) * (N / 2) + oc) = __floats2bfloat162_rn(v.x, v.y);
  }
  template <int N>
  __device__ __forceinline__ static void store2(bf16 *C, float2 acc, int row, int col, const EpiParams &p, const Row &) {
    store2<N>(C, acc, row, col, p);
  }
};

template <int HEADS, int KV_HEADS, int HEAD_DIM, int ROPE, bool BIAS> struct EpiQkv {
  static constexpr bool kPairs = true;
  static constexpr bool kArgmax = false;
  static constexpr bool kRowSquares = false;
  static constexpr int kRopeHeadDim = ROPE != 0 ? HEAD_DIM : 0;
  static constexpr int kRope = ROPE;
  static constexpr bool kResidual = false;
  static constexpr bool kGated = false;
  static constexpr int QD = HEADS * HEAD_DIM, KVD = KV_HEADS * HEAD_DIM;

  // The row's position and cache sequence, read once per row by the kernels that store many columns of it
  // (gemm, gemmWgmma): loaded inside store2 they would be loaded again after every store, which might alias.
  struct Row {
    int pos, seq;
  };
  __device__ __forceinline__ static Row rowOf(int row, const EpiParams &p) {
    return {__ldg(p.positions + row), __ldg(p.seq_of + row)};
  }

  // (cos, sin) of rotary pair i at position pos, from the rotation table the plan gives the epilogue
  // (compiler/kernels/Epilogue.h rotationTable: the interpreter's angle pos * inv_freq[i] in double, its cos
  // and sin rounded to fp32). A load instead of a sincosf: a 128x128 tile of head dim 128 needs 64 of them a
  // thread, ~40 instructions each plus an inlined Payne-Hanek path, which made the qkv epilogue ~5,000
  // instructions a tile and its kernels' ptxas time ~3 s. A position outside the table (only on rows whose
  // output is never read: the session refuses prompts past max_seq) reads its nearest row, never past it.
  __device__ __forceinline__ static float2 rotation(int pos, int i, const EpiParams &p) {
    const int row = min(max(pos, 0), p.max_seq - 1);
    return __ldg(p.rope + static_cast<long long>(row) * (HEAD_DIM / 2) + i);
  }

  template <int N>
  __device__ __forceinline__ static void store2(bf16 *C, float2 acc, int row, int col, const EpiParams &p) {
    store2<N>(C, acc, row, col, p, rowOf(row, p));
  }

  template <int N>
  __device__ __forceinline__ static void store2(bf16 *C, float2 acc, int row, int col, const EpiParams &p,
                                                const Row &r) {
    store2Rotated<N>(C, acc, row, col, p, r, rotationOf(r, col, p));
  }

  // The rotation of columns col, col + 1 on row r: q and k rotate by rotary pair (col % HEAD_DIM) / 2 (q, k
  // and v start at multiples of HEAD_DIM); v does not.
  __device__ __forceinline__ static float2 rotationOf(const Row &r, int col, const EpiParams &p) {
    return ROPE != 0 && col < QD + KVD ? rotation(r.pos, (col % HEAD_DIM) / 2, p) : make_float2(1.f, 0.f);
  }
  // The bias of columns col, col + 1 (0 without one).
  __device__ __forceinline__ static float2 bias2(int col, const EpiParams &p) {
    if constexpr (BIAS) return make_float2(toFloat(__ldg(p.bias + col)), toFloat(__ldg(p.bias + col + 1)));
    else return make_float2(0.f, 0.f);
  }

  // Half-style rope (ROPE 1) for a quad (the 4 lanes holding one row of an 8-column slice, lane q its pair
  // i0 + q) of two consecutive slices f0, f1 of one head (pairs i0 + q and i0 + 4 + q, i0 = (col % HEAD_DIM)
  // / 2 of lane 0, a multiple of 8): the bias of columns col, col + 1 (f0) and col + 8, col + 9 (f1) added,
  // the pairs rotated by cs0 and cs1 and rounded to bf16 (store2Rotated's arithmetic, written out the same
  // way; the tests hold both to the interpreter). Rotated, pair i goes to (i, i + HEAD_DIM / 2) of the head;
  // the quad exchanges the values so that lane q holds elements i0 + 2q and i0 + 2q + 1 of the head's first
  // half (.x) and of its second half (.y), from lanes 2q % 4 and (2q + 1) % 4, f0 (q < 2) or f1 (q >= 2):
  // 4-byte stores of 16-byte row segments instead of 2-byte ones. Every lane of the warp calls it together.
  __device__ __forceinline__ static uint2 rotatePairsInQuad(float2 f0, float2 f1, int col, const EpiParams &p,
                                                            float2 cs0, float2 cs1) {
    if constexpr (BIAS) {
      f0.x += toFloat(__ldg(p.bias + col));
      f0.y += toFloat(__ldg(p.bias + col + 1));
      f1.x += toFloat(__ldg(p.bias + col + 8));
      f1.y += toFloat(__ldg(p.bias + col + 9));
    }
    // Rotated first-half (a) and second-half (b) values of pairs i0 + q (from f0) and i0 + 4 + q (from f1).
    const __nv_bfloat162 a = __floats2bfloat162_rn(f0.x * cs0.x - f0.y * cs0.y, f1.x * cs1.x - f1.y * cs1.y);
    const __nv_bfloat162 b = __floats2bfloat162_rn(f0.y * cs0.x + f0.x * cs0.y, f1.y * cs1.x + f1.x * cs1.y);
    const int lane = threadIdx.x % 32, q = lane % 4, quad = lane & ~3;
    constexpr unsigned mask = 0xffffffffu;
    const unsigned aLo = __shfl_sync(mask, reinterpret_cast<const unsigned &>(a), quad + (2 * q) % 4);
    const unsigned aHi = __shfl_sync(mask, reinterpret_cast<const unsigned &>(a), quad + (2 * q + 1) % 4);
    const unsigned bLo = __shfl_sync(mask, reinterpret_cast<const unsigned &>(b), quad + (2 * q) % 4);
    const unsigned bHi = __shfl_sync(mask, reinterpret_cast<const unsigned &>(b), quad + (2 * q + 1) % 4);
    const unsigned sel = q < 2 ? 0x5410u : 0x7632u; // the low or the high halves of (lo, hi)
    return make_uint2(__byte_perm(aLo, aHi, sel), __byte_perm(bLo, bHi, sel));
  }

  // Wide stores (gemm_wgmma.cuh's whole-sector stores, applied to q, k and v): where a head's slice pairs come
  // in pairs (HEAD_DIM % 32 == 0), head slice pairs 2s and 2s + 1 go out together: their rotated words
  // (rotatePairsInQuad) exchanged with the neighbouring lane (quadExchangeWords), so each lane stores elements
  // 16 s + quadColumn4(q) .. + 3 of each half of the head in one 8-byte store, and the quad a whole 32-byte
  // sector of each. v's columns are pointwise: each slice pair through quadExchange4. Values and rounding are
  // the narrow stores'.
  static constexpr bool kWideRope = HEAD_DIM % 32 == 0;

  // Head slice pairs 2s and 2s + 1's rotated words, out0 and out1, stored at `head` (the head's element 0):
  // 8 bytes of each half a lane. Every lane of the warp calls it; only those with `store` write.
  __device__ __forceinline__ static void storeHeadWords(bf16 *head, int s, uint2 out0, uint2 out1, int q, bool store) {
    const uint2 lo = quadExchangeWords(out0.x, out1.x, q), hi = quadExchangeWords(out0.y, out1.y, q);
    if (store) {
      bf16 *at = head + 16 * s + quadColumn4(q);
      *reinterpret_cast<uint2 *>(at) = lo;
      *reinterpret_cast<uint2 *>(at + HEAD_DIM / 2) = hi;
    }
  }
  // v's slice pair at column `col` (lane 0's, a multiple of 16): f0 and f1 the lane's pairs of its two slices,
  // exchanged (quadExchange4) into columns col + quadColumn4(q) .. + 3, the bias added, rounded, one 8-byte
  // store at dst (that column's element). Every lane calls it; only those with `store` write.
  __device__ __forceinline__ static void storeV4(bf16 *dst, float2 f0, float2 f1, int col, int q, const EpiParams &p,
                                                 bool store) {
    float4 v = quadExchange4(f0, f1, q);
    if constexpr (BIAS) {
      const int c = col + quadColumn4(q);
      v.x += toFloat(__ldg(p.bias + c));
      v.y += toFloat(__ldg(p.bias + c + 1));
      v.z += toFloat(__ldg(p.bias + c + 2));
      v.w += toFloat(__ldg(p.bias + c + 3));
    }
    if (store) {
      const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
      // One 64-bit store: as a uint2, NVVM split this one into two 4-byte stores.
      *reinterpret_cast<unsigned long long *>(dst) =
          static_cast<unsigned long long>(*reinterpret_cast<const unsigned *>(&hi)) << 32 |
          *reinterpret_cast<const unsigned *>(&lo);
    }
  }

  // What the half-style rope stores of one tile row read besides its accumulators, so that a kernel can load
  // it ahead of them: gemm_wgmma.cuh (RopeRows), on cooperative tiles with room, asks for the row's position
  // and sequence (loadRow) as the tile's main loop starts and for its rotations (loadRotations) while the
  // tile's last wgmmas run, so storeTileRowHalfRope and storeRowHalfRope wait on no load (loaded inside them,
  // two dependent loads a row, the position then its rotations, cost ~4 L2 round trips a thread); elsewhere
  // just before the row's stores. A row past M reads no position, and the rotations of position 0.
  // cs[j]: slice pair j of the tile row (and j +
  // HEAD_DIM / 16, ...), which is slice pair (phase + j) % (HEAD_DIM / 16) of its head: lane q's rotary
  // pairs i0 + q and i0 + 4 + q (rotation's table row). A row meets at most HEAD_DIM / 16 of them whatever BN.
  template <int BN> struct RopeRow {
    static constexpr int kHeadSlices = HEAD_DIM / 16;                                // slice pairs in a head
    static constexpr int kRots = kHeadSlices < BN / 16 ? kHeadSlices : BN / 16;     // distinct ones a tile row
    Row r;
    float2 cs[kRots > 0 ? kRots : 1][2];

    // `live` false (a row past M): position 0, sequence -1, and nothing read.
    __device__ __forceinline__ void loadRow(int row, bool live, const EpiParams &p) {
      r = live ? rowOf(row, p) : Row{0, -1};
    }
    // The tile's rotations (none for a tile wholly in v). (rotation's row, written out: through a shared
    // helper ptxas emitted 64-300 more instructions in storeRowHalfRope)
    __device__ __forceinline__ void loadRotations(int tileCol, const EpiParams &p) {
      if (tileCol >= QD + KVD) return;
      const int q = threadIdx.x % 4, phase = tileCol % HEAD_DIM / 16;
      const float2 *rot = p.rope + static_cast<long long>(min(max(r.pos, 0), p.max_seq - 1)) * (HEAD_DIM / 2) + q;
#pragma unroll
      for (int j = 0; j < kRots; ++j) {
        const int i0 = 8 * ((phase + j) % kHeadSlices);
        cs[j][0] = __ldg(rot + i0);
        cs[j][1] = __ldg(rot + i0 + 4);
      }
    }
  };

  // Whether a kernel's tiles of BN columns (starting at multiples of BN) each lie within one of q, k and v,
  // in whole heads, so that storeTileRowHalfRope can serve them.
  template <int BN>
  static constexpr bool kWholeRegionTiles =
      ROPE == 1 && HEAD_DIM % 16 == 0 && BN % HEAD_DIM == 0 && QD % BN == 0 && KVD % BN == 0;

  // One row of a tile of BN columns from `tileCol` (kWholeRegionTiles<BN>), half-style rope: each pair of
  // slices through rotatePairsInQuad, with the tile's region (q, k or v) and the row's destination found once
  // and each rotation used for all the tile's heads; wide stores where kWideRope. `acc` holds the
  // row's values the way an m16n8 accumulator fragment does: slice j's columns 8j + 2q and 8j + 2q + 1 (lane
  // q of the quad) at acc[4j + 2 half] and acc[4j + 2 half + 1]. Every lane of the warp calls it, with `live`
  // false for a row past M: the quad exchanges then run on a converged warp, and only live rows store.
  // `rr`: the row's position and rotations (RopeRow, loaded by the caller; the tile starts a head, so cs[j]
  // is the head's slice pair j).
  template <int BN>
  __device__ __forceinline__ static void storeTileRowHalfRope(bf16 *C, const float (&acc)[BN / 2], int half, int row,
                                                              bool live, int tileCol, const EpiParams &p,
                                                              const RopeRow<BN> &rr) {
    static_assert(kWholeRegionTiles<BN>, "EpiQkv::storeTileRowHalfRope: tiles must hold whole heads of one region");
    constexpr int kFrags = HEAD_DIM / 8, kHeads = BN / HEAD_DIM;
    const int lane = threadIdx.x % 32, q = lane % 4;
    const int region = tileCol < QD ? 0 : tileCol < QD + KVD ? 1 : 2;
    const Row r = rr.r;
    bool store = live;
    bf16 *dst; // the row's element at the tile's first column
    if (region == 0) {
      dst = C + static_cast<long long>(row) * QD + tileCol;
    } else {
      store = store && r.seq >= 0 && r.pos >= 0 && r.pos < p.max_seq; // as kv_write (rope.cuh)
      dst = (region == 1 ? p.k_cache : p.v_cache) + (static_cast<long long>(r.seq) * p.max_seq + r.pos) * KVD +
            (tileCol - (region == 1 ? QD : QD + KVD));
    }
    auto accPair = [&](int j) { return make_float2(acc[4 * j + 2 * half], acc[4 * j + 2 * half + 1]); };
    if (region == 2) { // v: pairs as they are (the region is the warp's, so every lane returns together)
#pragma unroll
      for (int u = 0; u < BN / 16; ++u)
        storeV4(dst + 16 * u + quadColumn4(q), accPair(2 * u), accPair(2 * u + 1), tileCol + 16 * u, q, p, store);
      return;
    }
    if constexpr (kWideRope) {
#pragma unroll
      for (int s = 0; s < kFrags / 4; ++s) {
        // Head slice pairs 2s and 2s + 1 (slices 4s .. 4s + 3): pairs 16s + q, + 4, + 8, + 12.
        const float2 cs0 = rr.cs[2 * s][0], cs1 = rr.cs[2 * s][1], cs2 = rr.cs[2 * s + 1][0], cs3 = rr.cs[2 * s + 1][1];
#pragma unroll
        for (int h = 0; h < kHeads; ++h) {
          const int j = 4 * s + h * kFrags;
          const uint2 out0 = rotatePairsInQuad(accPair(j), accPair(j + 1), tileCol + 8 * j + 2 * q, p, cs0, cs1);
          const uint2 out1 = rotatePairsInQuad(accPair(j + 2), accPair(j + 3), tileCol + 8 * j + 16 + 2 * q, p, cs2, cs3);
          storeHeadWords(dst + h * HEAD_DIM, s, out0, out1, q, store);
        }
      }
    } else {
#pragma unroll
      for (int t = 0; t < kFrags / 2; ++t) {
        // Slices 2t and 2t + 1 of each head: pairs 8t + q and 8t + 4 + q.
        const float2 cs0 = rr.cs[t][0], cs1 = rr.cs[t][1];
#pragma unroll
        for (int h = 0; h < kHeads; ++h) {
          const int j = 2 * t + h * kFrags;
          const uint2 out = rotatePairsInQuad(accPair(j), accPair(j + 1), tileCol + 8 * j + 2 * q, p, cs0, cs1);
          if (store) {
            // Elements 8t + 2q and 8t + 2q + 1 of head h's first half, and the same of its second half.
            const int ia = h * HEAD_DIM + 8 * t + 2 * q;
            *reinterpret_cast<unsigned *>(dst + ia) = out.x;
            *reinterpret_cast<unsigned *>(dst + ia + HEAD_DIM / 2) = out.y;
          }
        }
      }
    }
  }

  // Whether storeRowHalfRope can serve tiles of BN columns (starting at multiples of BN): half-style rope,
  // and 16-column slice pairs that never straddle a head (so never q, k and v either).
  template <int BN> static constexpr bool kSlicePairTiles = ROPE == 1 && HEAD_DIM % 16 == 0 && BN % 16 == 0;

  // storeTileRowHalfRope for tiles that need not hold whole heads of one region (kSlicePairTiles<BN>), e.g.
  // the 80- or 160-column tiles fitted to the SMs: the region, head and rotary pairs found per pair of
  // slices (16 columns, within one head) instead of once per tile, the row's q, k and v destinations once,
  // and every rotation the row needs in `rr` (RopeRow, loaded by the caller).
  // Wide stores (kWideRope): a q or k slice pair at an even place in its head goes out with the next one;
  // one at an odd place whose partner lies in the tile before (a tile starting mid-pair, BN % 32 == 16) or
  // one at an even place whose partner lies in the next tile is stored alone, 4 bytes a lane. The phase's
  // parity is a compile-time constant of the loop (two copies where BN % 32 == 16, one where it is even).
  // The same contract: every lane of the warp calls it, `live` false for a row past M; columns past N (a
  // whole slice pair, as N is a multiple of HEAD_DIM) store nothing.
  template <int BN>
  __device__ __forceinline__ static void storeRowHalfRope(bf16 *C, const float (&acc)[BN / 2], int half, int row,
                                                          bool live, int tileCol, const EpiParams &p,
                                                          const RopeRow<BN> &rr) {
    static_assert(kSlicePairTiles<BN>, "EpiQkv::storeRowHalfRope: half-style rope, 16-column slice pairs");
    constexpr int N = QD + 2 * KVD;
    constexpr int kSlicePairs = BN / 16;
    constexpr int kHeadSlices = HEAD_DIM / 16; // slice pairs in a head
    const int lane = threadIdx.x % 32, q = lane % 4;
    const Row r = rr.r;
    const bool cached = live && r.seq >= 0 && r.pos >= 0 && r.pos < p.max_seq; // as kv_write (rope.cuh)
    // Per region, the offset that turns a column into its element: q's row of C, k's and v's cache rows, less
    // the region's start.
    const long long qOff = static_cast<long long>(row) * QD;
    const long long cacheRow = (static_cast<long long>(r.seq) * p.max_seq + r.pos) * KVD;
    const int phase = tileCol % HEAD_DIM / 16;
    const auto &cs = rr.cs;
    auto accPair = [&](int j) { return make_float2(acc[4 * j + 2 * half], acc[4 * j + 2 * half + 1]); };
    // Slice pair u's rotated words (a q or k slice pair).
    auto rotated = [&](int u) {
      return rotatePairsInQuad(accPair(2 * u), accPair(2 * u + 1), tileCol + 16 * u + 2 * q, p, cs[u % kHeadSlices][0],
                               cs[u % kHeadSlices][1]);
    };
    // Where slice pair u's head starts, in q's row of C or k's cache row (col: u's first column, in q or k).
    auto headAt = [&](int col) {
      const int start = col - col % HEAD_DIM;
      return col < QD ? C + (qOff + start) : p.k_cache + (cacheRow - QD + start);
    };
    auto storeRow = [&](auto parity) {
      constexpr int P = decltype(parity)::value; // phase % 2
#pragma unroll
      for (int u = 0; u < kSlicePairs; ++u) {
        const int col = tileCol + 16 * u; // lane 0's column of slices 2u and 2u + 1 (one head)
        if (N % BN != 0 && col >= N) break;
        if (col >= QD + KVD) { // v: pairs as they are
          storeV4(p.v_cache + (cacheRow - QD - KVD + col + quadColumn4(q)), accPair(2 * u), accPair(2 * u + 1), col, q,
                  p, cached);
          continue;
        }
        const bool isQ = col < QD;
        const bool store = isQ ? live : cached;
        const bool even = (P + u) % 2 == 0; // u's place in its head is even (u is unrolled: a constant)
        if (kWideRope && !even && u > 0) continue; // stored with u - 1
        if (kWideRope && even && u + 1 < kSlicePairs) { // u with u + 1, same head
          storeHeadWords(headAt(col), (col % HEAD_DIM) / 32, rotated(u), rotated(u + 1), q, store);
          continue;
        }
        // Alone: elements i0 + 2q, i0 + 2q + 1 of the head's halves (i0 = the slice pair's first rotary pair).
        const uint2 out = rotated(u);
        if (store) {
          bf16 *dst = headAt(col) + col % HEAD_DIM / 2 + 2 * q;
          *reinterpret_cast<unsigned *>(dst) = out.x;
          *reinterpret_cast<unsigned *>(dst + HEAD_DIM / 2) = out.y;
        }
      }
    };
    if constexpr (!kWideRope || BN % 32 == 0) { // the phase is even: tileCol and HEAD_DIM are multiples of 32
      storeRow(IntConstant<0>{});
    } else if (phase % 2 == 0) {
      storeRow(IntConstant<0>{});
    } else {
      storeRow(IntConstant<1>{});
    }
  }

  // store2 with the rotation `cs` = rotation(r.pos, (col % HEAD_DIM) / 2, p) given (ignored for v columns).
  template <int N>
  __device__ __forceinline__ static void store2Rotated(bf16 *C, float2 acc, int row, int col, const EpiParams &p,
                                                       const Row &r, float2 cs) {
    store2Loaded<N>(C, acc, row, col, p, r, cs, bias2(col, p));
  }
  // store2Rotated with the bias pair `bias` = bias2(col, p) already loaded: a kernel that stores many pairs a
  // thread loads the rows, rotations and biases of all of them before its first store (gemv.cuh
  // loadFragmentsT).
  template <int N>
  __device__ __forceinline__ static void store2Loaded(bf16 *C, float2 acc, int row, int col, const EpiParams &p,
                                                      const Row &r, float2 cs, float2 bias) {
    static_assert(N == QD + 2 * KVD, "EpiQkv: W must stack (HEADS + 2 KV_HEADS) * HEAD_DIM rows");
    static_assert(HEAD_DIM % 2 == 0, "EpiQkv: HEAD_DIM must be even");
    const int pos = r.pos;
    float a = acc.x, b = acc.y;
    if constexpr (BIAS) {
      a += bias.x;
      b += bias.y;
    }
    const int region = col < QD ? 0 : col < QD + KVD ? 1 : 2; // q, k, v
    const int local = col - (region == 0 ? 0 : region == 1 ? QD : QD + KVD);
    bf16 *dst;
    if (region == 0) {
      dst = C + static_cast<long long>(row) * QD;
    } else {
      const int seq = r.seq;
      if (seq < 0 || pos < 0 || pos >= p.max_seq) return; // as kv_write (rope.cuh): never outside the cache
      dst = (region == 1 ? p.k_cache : p.v_cache) + (static_cast<long long>(seq) * p.max_seq + pos) * KVD;
    }
    const int head = local / HEAD_DIM, i = (local % HEAD_DIM) / 2; // rotary pair i of the head
    int ia = local, ib = local + 1;
    if (ROPE != 0 && region < 2) {
      const float c = cs.x, s = cs.y;
      const float ra = a * c - b * s, rb = b * c + a * s;
      a = ra;
      b = rb;
      if (ROPE == 1) { // half style: the pair is (i, i + HEAD_DIM / 2) of the head
        ia = head * HEAD_DIM + i;
        ib = ia + HEAD_DIM / 2;
      }
    }
    if (ib == ia + 1) {
      *reinterpret_cast<__nv_bfloat162 *>(dst + ia) = __floats2bfloat162_rn(a, b);
    } else {
      dst[ia] = toBf16(a);
      dst[ib] = toBf16(b);
    }
  }
};

// Stores the accumulators of C[row][col] and C[row][col + 1] (col even) through policy Epi, leaving out what
// lies past N columns; COL_TAIL false says the caller's tiles never reach past N. Even N: pairs
// (col < N implies col + 1 < N); odd N (GPT-2's vocabulary 50257): one element at a time, pointwise only.
// `r` is Epi::rowOf(row, epi), read once for all the row's columns; the caller has checked row < M.
template <int N, bool COL_TAIL, class Epi>
__device__ __forceinline__ void storeAccPair(bf16 *C, int row, int col, float x, float y, const EpiParams &epi,
                                             const typename Epi::Row &r) {
  if constexpr (N % 2 == 0) {
    if (COL_TAIL && col >= N) return;
    Epi::template store2<N>(C, make_float2(x, y), row, col, epi, r);
  } else {
    if (col < N) Epi::template store1<N>(C, x, row, col, epi, r);
    if (col + 1 < N) Epi::template store1<N>(C, y, row, col + 1, epi, r);
  }
}

// ---- prologues -----------------------------------------------------------------------------------------

struct ProNone {
  static constexpr bool kActive = false, kLayer = false, kRowSquares = false;
  static constexpr int kGammaBytes = 0;
  template <int K, int WARPS, int MAX_M>
  __device__ __forceinline__ static void blockStats(const bf16 *, int, float2 *, float (*)[MAX_M], const EpiParams &) {}
  __device__ __forceinline__ static void apply8(float (&)[8], int, float2, const EpiParams &) {}
  __device__ __forceinline__ static void gamma8(float (&)[8], const void *) {}
};

// The RMS norm of A's rows, its gains in W (PlanBuffer::gains), its sums of squares written by the gemm that
// stored A (EpiPointwise<.., true>: p.row_sq, p.row_sq_parts partials a row): gemm_wgmma.cuh scales each row's
// products by 1 / rms. No pass over A at all.
//
// The four lanes of a quad (one accumulator row) share the row's partials: lane q takes q, q + 4, q + 8 and
// q + 12. They are loaded when the tile starts (load) and added once its main loop is done (invRms), so the
// loads' latency hides under the tile's wgmmas instead of following them; partials past 16 (a writer of
// narrow tiles) are read then. A row's sum is the same for every tile and every launch: a lane adds its
// partials in order, then the quad's two exchanges.
struct ProRowSquares {
  static constexpr bool kActive = true, kLayer = false, kRowSquares = true;
  static constexpr int kGammaBytes = 0, kHeld = 4;
  __device__ __forceinline__ static void load(float (&held)[kHeld], int row, bool inM, int q, const EpiParams &p) {
    const float *part = p.row_sq + static_cast<long long>(row) * p.row_sq_parts;
#pragma unroll
    for (int i = 0; i < kHeld; ++i) held[i] = inM && q + 4 * i < p.row_sq_parts ? part[q + 4 * i] : 0.f;
  }
  // 1 / rms of the row of A [.., K] whose partials `held` came from load(); every lane of the warp calls it.
  template <int K>
  __device__ __forceinline__ static float invRms(const float (&held)[kHeld], int row, bool inM, int lane,
                                                 const EpiParams &p) {
    float total = 0.f;
#pragma unroll
    for (int i = 0; i < kHeld; ++i) total += held[i];
    if (inM)
      for (int j = 4 * kHeld + lane % 4; j < p.row_sq_parts; j += 4)
        total += p.row_sq[static_cast<long long>(row) * p.row_sq_parts + j];
    total += __shfl_xor_sync(0xffffffffu, total, 1);
    total += __shfl_xor_sync(0xffffffffu, total, 2);
    return rsqrtf(total * (1.f / K) + p.eps);
  }
};

// gamma's element size; 0 for WeightT void: unit gains, the norm's gamma multiplied into the columns of the
// matmul's W when the weights were loaded (compiler/Plan.h PlanBuffer::gains), so the prologue only
// normalises.
template <typename WeightT> inline constexpr int kGainBytes = sizeof(WeightT);
template <> inline constexpr int kGainBytes<void> = 0;

template <bool LAYER, typename WeightT> struct ProNorm {
  static constexpr bool kActive = true, kLayer = LAYER, kRowSquares = false;
  static constexpr int kGammaBytes = kGainBytes<WeightT>;
  static_assert(!LAYER || kGammaBytes > 0, "ProNorm: a LayerNorm keeps its gamma and beta (unit gains are RMS only)");

  // {mean (0 for RMS), 1 / sqrt(var + eps)} of rows [0, rows) of A [.., K] into st[m], by the whole block of
  // WARPS warps (each sums a slice of K; the slices meet in `scratch`). Every thread of the block must call
  // it: it synchronises, and st is ready for all when it returns. rows <= MAX_M <= 32 * WARPS.
  template <int K, int WARPS, int MAX_M>
  __device__ __forceinline__ static void blockStats(const bf16 *A, int rows, float2 *st, float (*scratch)[MAX_M],
                                                    const EpiParams &p) {
    static_assert(K % 8 == 0, "ProNorm: K must be a multiple of 8");
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    // Pass 1: the sum (LayerNorm) or the sum of squares (RMSNorm); pass 2 (LayerNorm): the squared
    // deviations from the mean, as norm.cuh does.
#pragma unroll
    for (int pass = 0; pass < (LAYER ? 2 : 1); ++pass) {
#pragma unroll
      for (int m = 0; m < MAX_M; ++m) {
        if (m >= rows) break;
        const float mean = pass == 1 ? st[m].x : 0.f;
        float acc = 0.f;
        for (int k = (warp * 32 + lane) * 8; k < K; k += WARPS * 256) {
          const uint4 raw = *reinterpret_cast<const uint4 *>(A + static_cast<long long>(m) * K + k);
          const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&raw);
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const float2 f = __bfloat1622float2(h[e]);
            if (LAYER && pass == 0) acc += f.x + f.y;
            else acc += (f.x - mean) * (f.x - mean) + (f.y - mean) * (f.y - mean);
          }
        }
        acc = warpSum(acc);
        if (lane == 0) scratch[warp][m] = acc;
      }
      blockSync();
      if (static_cast<int>(threadIdx.x) < rows) {
        float total = 0.f;
#pragma unroll
        for (int w = 0; w < WARPS; ++w) total += scratch[w][threadIdx.x];
        if (LAYER && pass == 0) st[threadIdx.x].x = total * (1.f / K);
        else st[threadIdx.x] = make_float2(LAYER ? st[threadIdx.x].x : 0.f, rsqrtf(total * (1.f / K) + p.eps));
      }
      blockSync();
    }
  }

  // k0 is a multiple of 8: gamma's (and beta's) 8 elements come in 16-byte loads.
  __device__ __forceinline__ static void apply8(float (&a)[8], int k0, float2 st, const EpiParams &p) {
    float g[8], b[8];
    if constexpr (kGammaBytes > 0) gamma8(g, static_cast<const WeightT *>(p.gamma) + k0);
    else gamma8(g, nullptr);
    if constexpr (LAYER) gamma8(b, static_cast<const WeightT *>(p.beta) + k0);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      float v = (a[e] - st.x) * st.y * g[e];
      if constexpr (LAYER) v += b[e];
      a[e] = toFloat(toBf16(v)); // what the norm kernel would have stored
    }
  }

  __device__ __forceinline__ static void gamma8(float (&g)[8], const void *at) {
    if constexpr (kGammaBytes == 0) { // unit gains: nothing to read
#pragma unroll
      for (int e = 0; e < 8; ++e) g[e] = 1.f;
    } else {
      static_assert(kGammaBytes == 2 || kGammaBytes == 4, "ProNorm: gamma is bf16, f16 or f32");
      uint4 raw[kGammaBytes / 2]; // 8 elements in 16-byte loads
#pragma unroll
      for (int i = 0; i < kGammaBytes / 2; ++i) raw[i] = static_cast<const uint4 *>(at)[i];
      const WeightT *w = reinterpret_cast<const WeightT *>(raw);
#pragma unroll
      for (int e = 0; e < 8; ++e) g[e] = toFloat(w[e]);
    }
  }
};

} // namespace minfer
