// templates/common.cuh — shared device helpers for minfer's kernel templates (compiled by NVRTC only).
//
// Activations are bf16 row-major [rows, cols]; math and accumulation are fp32. Nothing here includes a
// host header: NVRTC gets cuda_bf16.h from the toolkit and these templates from memory.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace minfer {

using bf16 = __nv_bfloat16;

// Namespace-scope constants in these headers are `inline constexpr`: NVRTC emits a plain `constexpr` one as
// an internal global whose mangled name carries a per-process id, so the same kernel compiled in two
// processes would give different PTX and cubins (and bundles that are not reproducible).
inline constexpr int kWarpSize = 32;

// A compile-time int as a value, for generic lambdas instantiated per constant (gemv.cuh's unrolled steps,
// epilogue.cuh's qkv stores per phase).
template <int V> struct IntConstant {
  static constexpr int value = V;
};

__device__ __forceinline__ float toFloat(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float toFloat(__half x) { return __half2float(x); }
__device__ __forceinline__ float toFloat(float x) { return x; }
__device__ __forceinline__ bf16 toBf16(float x) { return __float2bfloat16_rn(x); }

// 16 bytes: the widest single load, 8 bf16 values.
struct alignas(16) Vec8 {
  bf16 v[8];
};

// Programmatic dependent launch (sm_90+): the runtime launches the decode step's kernels so that each may
// start while the one before it drains (runtime/Session.cpp).
//
// gridDependencyTrigger() lets the next kernel of the stream start its blocks (they run up to their own
// wait) once every block of this grid has called it or finished, instead of only once every block has
// finished. The next kernel's wait still waits for this whole grid, so triggering early is always safe;
// it pays where the next kernel loads constant weights before its wait (the gemvs), as those then stream
// in while this kernel drains.
__device__ __forceinline__ void gridDependencyTrigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
// gridDependencyWait() first triggers (above), then returns once every earlier kernel of the stream has
// finished and its writes are visible; every kernel calls it before it reads anything an earlier kernel
// wrote (in practice first, or after prefetching constant weights). Launched without the attribute, both
// return at once.
__device__ __forceinline__ void gridDependencyWait() {
  gridDependencyTrigger();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// Where a kernel's block sits in its grid. A __global__ kernel passes its own (launchTile()); the persistent
// decode kernel (persistent.cuh) runs the same body once per tile of a task, on whichever block it assigned
// the tile to, so a body reads its coordinates from here, never from blockIdx or gridDim.
struct Tile {
  int x, y, z;    // blockIdx
  int nx, ny, nz; // gridDim
};
__device__ __forceinline__ Tile launchTile() {
  return {static_cast<int>(blockIdx.x), static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.z),
          static_cast<int>(gridDim.x),  static_cast<int>(gridDim.y),  static_cast<int>(gridDim.z)};
}

// A piece of a task's weights that the persistent decode kernel streams into its weight ring (persistent.cuh)
// ahead of the task: `rows` runs of `bytes` bytes (a multiple of 16), run r from src + r * srcStride bytes,
// landing at r * stride bytes into the ring entry (rows * stride bytes are the entry's). The task describes
// its pieces (Task::piece); the kernel issues the copies and the task's body reads the entry.
struct RingPiece {
  const void *src;
  int rows;
  unsigned bytes, srcStride, stride;
};

// What a body calls before it reads anything an earlier kernel (or task) wrote, after prefetching what does
// not depend on it (weights). As a kernel of its own: gridDependencyWait. In the persistent kernel: wait
// for the tiles of the task before it (persistent.cuh's TaskWait). A body calls it from every warp that
// reads such data; warps that leave early need not.
struct GridWait {
  __device__ __forceinline__ void operator()() const { gridDependencyWait(); }
};

// The threads that run a body: the block as a kernel of its own; in the persistent decode kernel its first
// MINFER_TASK_THREADS (after them the weight ring's producer warp may run, which takes no body's work).
__device__ __forceinline__ int bodyThreads() {
#ifdef MINFER_TASKS_SHARE_MEMORY
  return MINFER_TASK_THREADS;
#else
  return static_cast<int>(blockDim.x);
#endif
}

// The barrier of the threads that run a body: __syncthreads as a kernel of its own. In the persistent decode
// kernel the bodies run on its first MINFER_TASK_THREADS threads, and a warp after them may be the weight
// ring's producer, which never waits with them: there it is named barrier 1 over those threads only.
__device__ __forceinline__ void blockSync() {
#ifdef MINFER_TASKS_SHARE_MEMORY
  asm volatile("bar.sync 1, %0;\n" ::"n"(MINFER_TASK_THREADS) : "memory");
#else
  __syncthreads();
#endif
}

// A load of data an earlier kernel of the step wrote (activations, attention partials), through the
// read-only path. In the persistent decode kernel an earlier task of the *same* kernel wrote it, which
// the read-only path does not allow (it may serve a line cached before the write): persistent.cuh
// defines MINFER_TASKS_SHARE_MEMORY before including the families, and the load becomes a plain one, made
// coherent by the task wait's acquire.
template <class T> __device__ __forceinline__ T loadProduced(const T *p) {
#ifdef MINFER_TASKS_SHARE_MEMORY
  return *p;
#else
  return __ldg(p);
#endif
}

// Reductions: Sum and Max, each an operation and its identity.
struct SumOp {
  __device__ __forceinline__ static float apply(float a, float b) { return a + b; }
  __device__ __forceinline__ static float identity() { return 0.f; }
};
struct MaxOp {
  __device__ __forceinline__ static float apply(float a, float b) { return fmaxf(a, b); }
  __device__ __forceinline__ static float identity() { return __int_as_float(0xff800000); } // -inf (no INFINITY in NVRTC)
};

template <class Op> __device__ __forceinline__ float warpReduce(float v) {
#pragma unroll
  for (int off = kWarpSize / 2; off > 0; off /= 2) v = Op::apply(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}
__device__ __forceinline__ float warpSum(float v) { return warpReduce<SumOp>(v); }
__device__ __forceinline__ float warpMax(float v) { return warpReduce<MaxOp>(v); }

// Op over a block of THREADS threads; every thread gets the result. `scratch` holds THREADS/32 floats.
template <class Op, int THREADS> __device__ __forceinline__ float blockReduce(float v, float *scratch) {
  static_assert(THREADS % kWarpSize == 0 && THREADS <= 1024, "block must be whole warps, at most 1024 threads");
  constexpr int kWarps = THREADS / kWarpSize;
  v = warpReduce<Op>(v);
  if (kWarps == 1) return v;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  blockSync(); // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  blockSync();
  return warpReduce<Op>(lane < kWarps ? scratch[lane] : Op::identity());
}
template <int THREADS> __device__ __forceinline__ float blockSum(float v, float *scratch) {
  return blockReduce<SumOp, THREADS>(v, scratch);
}
template <int THREADS> __device__ __forceinline__ float blockMax(float v, float *scratch) {
  return blockReduce<MaxOp, THREADS>(v, scratch);
}

} // namespace minfer
