// templates/pointwise.cuh — elementwise kernels over bf16 activations [rows, COLS] (scale, gelu_tanh,
// gelu_erf, silu, relu; add, mul; silu_mul for the gated MLP), and the vector-access helpers that every
// row-op template (norm, embedding, rope, sampling) shares.
//
// An op enters as a policy type with one static `apply` (fp32 in, fp32 out), so one kernel serves every op
// and the fusion pass can name a policy by type. The activation formulas are epilogue.cuh's (the same ones
// the matmul epilogues use), so a fused and an unfused gelu give the same bits.
//
//   unary<Op, COLS>  (const bf16 *x [rows, COLS], bf16 *y [rows, COLS], int rows, float arg)
//   binary<Op, COLS> (const bf16 *a [rows, COLS], const bf16 *b [rows, COLS], bf16 *y [rows, COLS], int rows)
//
// `arg` is Scale's factor and ignored by the other unary ops. y may alias an input (each element is read and
// written by the same thread). Every pointer must be 16-byte aligned (the runtime's buffers are 256-byte
// aligned and COLS-wide rows keep the alignment when COLS is a multiple of 8); for other COLS the access
// narrows to what COLS allows (vecWidth).
#pragma once

#include "common.cuh"
#include "epilogue.cuh"

namespace minfer {

// The kernels' one argument; its host mirror (same field names and offsets, checked in every generated
// source) is in compiler/kernels/RowOps.h.
struct PointwiseParams {
  const bf16 *a; // [rows, COLS]: x of unary ops
  const bf16 *b; // [rows, COLS]: binary ops
  bf16 *y;       // [rows, COLS], may alias a or b
  int rows;
  float arg;     // unary Scale's factor (ignored otherwise)
};


// ---- vector access shared by the row-op templates --------------------------------------------------

// Elements of T per access for rows of COLS elements: the widest of 16, 8, 4, 2 bytes that divides the row,
// so every access stays aligned when the row start is. 8 for bf16 rows that are a multiple of 8.
template <typename T, int COLS> __host__ __device__ constexpr int vecWidth() {
  int n = 16 / int(sizeof(T));
  while (n > 1 && COLS % n != 0) n /= 2;
  return n;
}

// N values of T loaded or stored as one access, or as several 16-byte accesses when wider (8 floats).
template <typename T, int N> struct alignas(sizeof(T) * N < 16 ? sizeof(T) * N : 16) Pack {
  T v[N];
};

// Loads N consecutive T at p (aligned to the Pack) and widens them to fp32.
template <int N, typename T> __device__ __forceinline__ void loadFloats(const T *p, float (&out)[N]) {
  const Pack<T, N> pk = *reinterpret_cast<const Pack<T, N> *>(p);
#pragma unroll
  for (int e = 0; e < N; ++e) out[e] = toFloat(pk.v[e]);
}

// Rounds N fp32 values to bf16 and stores them at p as one access.
template <int N> __device__ __forceinline__ void storeBf16(bf16 *p, const float (&in)[N]) {
  Pack<bf16, N> pk;
#pragma unroll
  for (int e = 0; e < N; ++e) pk.v[e] = toBf16(in[e]);
  *reinterpret_cast<Pack<bf16, N> *>(p) = pk;
}

// A quiet bf16 NaN: what a kernel writes where it must write something but has no valid value.
__device__ __forceinline__ bf16 bf16NaN() { return __ushort_as_bfloat16(static_cast<unsigned short>(0x7FC0)); }

// ---- op policies --------------------------------------------------------------------------------------

namespace pw {
// Unary: y = f(x). The interpreter's eval<Op> defines each (ir/Interpreter.cpp).
struct Scale {
  __device__ __forceinline__ static float apply(float x, float factor) { return x * factor; }
};
struct GeluTanh {
  __device__ __forceinline__ static float apply(float x, float) { return ActGeluTanh::f(x); }
};
struct GeluErf {
  __device__ __forceinline__ static float apply(float x, float) { return ActGeluErf::f(x); }
};
struct Silu {
  __device__ __forceinline__ static float apply(float x, float) { return ActSilu::f(x); }
};
struct Relu {
  __device__ __forceinline__ static float apply(float x, float) { return ActRelu::f(x); }
};
// Binary: y = f(a, b).
struct Add {
  __device__ __forceinline__ static float apply(float a, float b) { return a + b; }
};
struct Mul {
  __device__ __forceinline__ static float apply(float a, float b) { return a * b; }
};
// The gated MLP: silu(gate) * up, one kernel instead of silu then mul (the product is rounded once).
struct SiluMul {
  __device__ __forceinline__ static float apply(float gate, float up) { return ActSilu::f(gate) * up; }
};
} // namespace pw

// 256 threads: 8 warps, each thread one 16-byte vector per input, so a block has 4 KB per input in flight;
// 8 such blocks fill an SM (2048 threads) at prefill sizes, and a decode-sized row (rows = 1) still spreads
// over a few SMs. PointwiseSpec launches one vector per thread; the grid-stride loop makes any grid correct.
inline constexpr int kPointwiseThreads = 256;

namespace pw {
// Calls f(i) for every 16-byte vector i (VEC elements) of a [rows, COLS] tensor, grid-stride over blocks of
// THREADS threads: rows * COLS is a multiple of VEC, so the flat tensor is whole vectors.
template <int COLS, int THREADS, class F> __device__ __forceinline__ void forEachVector(int rows, const Tile &tile, F f) {
  static_assert(COLS > 0, "pointwise: COLS must be positive");
  constexpr int VEC = vecWidth<bf16, COLS>();
  const long long n = static_cast<long long>(rows) * (COLS / VEC);
  for (long long i = tile.x * static_cast<long long>(THREADS) + threadIdx.x; i < n;
       i += static_cast<long long>(tile.nx) * THREADS)
    f(i * VEC);
}

// y = Op(a, arg) elementwise: the body, the block at `tile` of THREADS threads.
template <typename Op, int COLS, int THREADS, class Wait>
__device__ __forceinline__ void unaryTile(const PointwiseParams &p, const Tile &tile, const Wait &wait) {
  wait();
  constexpr int VEC = vecWidth<bf16, COLS>();
  forEachVector<COLS, THREADS>(p.rows, tile, [&](long long at) {
    float v[VEC];
    loadFloats<VEC>(p.a + at, v);
#pragma unroll
    for (int e = 0; e < VEC; ++e) v[e] = Op::apply(v[e], p.arg);
    storeBf16<VEC>(p.y + at, v);
  });
}

// y = Op(a, b) elementwise: the body.
template <typename Op, int COLS, int THREADS, class Wait>
__device__ __forceinline__ void binaryTile(const PointwiseParams &p, const Tile &tile, const Wait &wait) {
  wait();
  constexpr int VEC = vecWidth<bf16, COLS>();
  forEachVector<COLS, THREADS>(p.rows, tile, [&](long long at) {
    float va[VEC], vb[VEC];
    loadFloats<VEC>(p.a + at, va);
    loadFloats<VEC>(p.b + at, vb);
#pragma unroll
    for (int e = 0; e < VEC; ++e) va[e] = Op::apply(va[e], vb[e]);
    storeBf16<VEC>(p.y + at, va);
  });
}
} // namespace pw

// The kernels, and the bodies as tasks of the persistent decode kernel (persistent.cuh).
template <typename Op, int COLS>
__global__ void __launch_bounds__(kPointwiseThreads) unary(const PointwiseParams p) {
  pw::unaryTile<Op, COLS, kPointwiseThreads>(p, launchTile(), GridWait{});
}
template <typename Op, int COLS>
__global__ void __launch_bounds__(kPointwiseThreads) binary(const PointwiseParams p) {
  pw::binaryTile<Op, COLS, kPointwiseThreads>(p, launchTile(), GridWait{});
}
// Either as a task (BINARY: binary's body, else unary's).
template <typename Op, int COLS, int THREADS, bool BINARY> struct PointwiseTask {
  using Params = PointwiseParams;
  static constexpr int kThreads = THREADS;
  template <class Wait> __device__ __forceinline__ static void run(const Params &p, const Tile &t, const Wait &w) {
    if constexpr (BINARY) pw::binaryTile<Op, COLS, THREADS>(p, t, w);
    else pw::unaryTile<Op, COLS, THREADS>(p, t, w);
  }
  __device__ __forceinline__ static void prefetch(const Params &, const Tile &) {} // no weights to stream
};

} // namespace minfer
