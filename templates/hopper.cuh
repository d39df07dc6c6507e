// templates/hopper.cuh — the sm_90a primitives the Hopper kernels share (gemm_wgmma.cuh, gemv_wgmma.cuh,
// attention_prefill_wgmma.cuh), each defined once.
//
//   mbarrier             a shared-memory barrier that counts arrivals and, for TMA, bytes (transactions)
//   TMA                  cp.async.bulk.tensor: a 2-D box of a global matrix into shared memory, described by
//                        a tensor map the host encodes (runtime: cuda::encodeTensorMap2D) and passes as a
//                        __grid_constant__ kernel argument; out-of-bounds elements arrive as zeros.
//                        cp.async.bulk: a contiguous run of bytes, no map
//   wgmma                warpgroup (4 warps, 128 threads) matrix multiply-accumulate, A and B read straight
//                        from shared memory through 64-bit matrix descriptors, asynchronously
//   setmaxnreg           moves registers between warpgroups (a producer gives, the consumers take)
//   clusters             blocks launched together that share their shared memory (split-K partial sums)
//
// Shared-memory layout the descriptors below assume (what TMA writes with CU_TENSOR_MAP_SWIZZLE_128B and a
// 64-element bf16 box width): a tile of R rows x 64 bf16 (128 bytes) per row, row r at byte 128 r, its
// 16-byte chunk c stored at chunk position c ^ (r % 8); groups of 8 rows (1024 bytes) repeat the pattern,
// so every tile must start 1024-byte aligned. wgmma's "128-byte swizzle, K-major" canonical layout is
// exactly that, with the stride between 8-row groups (SBO) 1024 bytes. A k16 slice of the tile starts 32
// bytes further along the row: its descriptor is the tile's with the start address advanced by 32 bytes
// (the hardware applies the swizzle to the full address, so the chunk XOR stays right).
//
// wgmma accumulator layout (m64nN, fp32), for warp w of the warpgroup, lane l, g = l / 4, t = l % 4:
//   d[4j + 0], d[4j + 1] = (row 16 w + g,     cols 8 j + 2 t, 8 j + 2 t + 1)
//   d[4j + 2], d[4j + 3] = (row 16 w + g + 8, cols 8 j + 2 t, 8 j + 2 t + 1)       j = 0 .. N/8 - 1
// i.e. each 8-column slice is an mma.sync m16n8 C fragment (ptx.cuh), so the epilogues apply unchanged.
#pragma once

#include "common.cuh"
#include "ptx.cuh"

namespace minfer {

// CUtensorMap: 128 opaque bytes, 64-byte aligned (cuda.h's type, which NVRTC does not have).
struct alignas(64) TensorMap {
  unsigned long long opaque[16];
};

// ---- mbarrier ----------------------------------------------------------------------------------------------

__device__ __forceinline__ void mbarInit(unsigned bar, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals) : "memory");
}
// Makes initialised barriers visible to the other threads and to the async proxy (TMA) before first use.
__device__ __forceinline__ void mbarInitFence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbarArrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// One arrival that also announces `bytes` of TMA transactions the current phase must wait for.
__device__ __forceinline__ void mbarArriveExpectTx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// Spins until the phase with parity `parity` has completed.
__device__ __forceinline__ void mbarWait(unsigned bar, unsigned parity) {
  unsigned done;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
  } while (!done);
}

// ---- TMA -------------------------------------------------------------------------------------------------

__device__ __forceinline__ void prefetchTensorMap(const TensorMap *map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(map) : "memory");
}
// The box of `map` whose first element is (inner x, outer y) into shared `dst`; completes `bytes` (the
// whole box, out-of-bounds zeros included) on barrier `bar`.
__device__ __forceinline__ void tmaLoad2d(unsigned dst, const TensorMap *map, int x, int y, unsigned bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
               "[%4];\n" ::"r"(dst),
               "l"(map), "r"(x), "r"(y), "r"(bar)
               : "memory");
}

// tmaLoad2d into the same shared offset `dst` of every block of the cluster in `ctaMask` (bit r: rank r),
// completing the box's bytes on the barrier at offset `bar` of each of them (TMA multicast: one L2 read
// for several blocks).
__device__ __forceinline__ void tmaLoad2dMulticast(unsigned dst, const TensorMap *map, int x, int y, unsigned bar,
                                                   unsigned short ctaMask) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster "
               "[%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
               "l"(map), "r"(x), "r"(y), "r"(bar), "h"(ctaMask)
               : "memory");
}

// `bytes` (a multiple of 16) contiguous bytes from global `src` into shared `dst`, both 16-byte aligned;
// completes them on barrier `bar` (cp.async.bulk: the same engine as TMA, no tensor map).
__device__ __forceinline__ void bulkLoad(unsigned dst, const void *src, unsigned bytes, unsigned bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}

// ---- clusters -------------------------------------------------------------------------------------------
// A kernel declared with __cluster_dims__ runs its blocks in groups that may read and write each other's
// shared memory. Every thread of every block of the cluster takes part in each barrier phase, in order
// (arrive, then wait), and a block touches another's shared memory only after a phase that began after
// that block started (so its shared memory exists) and before one the other block waits on before it
// leaves.

// This block's rank within its cluster.
__device__ __forceinline__ unsigned clusterRank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
// Arrives on the cluster barrier without ordering memory (the first phase: "this block has started").
__device__ __forceinline__ void clusterArriveRelaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
// Arrives, releasing this thread's earlier writes (shared::cluster included) to the threads that wait.
__device__ __forceinline__ void clusterArrive() { asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory"); }
// Waits for the current phase (every thread of the cluster arrived), acquiring what they released.
__device__ __forceinline__ void clusterWait() { asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory"); }
// The shared::cluster address of this block's shared address `addr` in the block of rank `rank`.
__device__ __forceinline__ unsigned clusterMapShared(unsigned addr, unsigned rank) {
  unsigned out;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(out) : "r"(addr), "r"(rank));
  return out;
}
// Arrives on the barrier at the shared::cluster address `bar` (from clusterMapShared: another block's), with
// the default (CTA-scope) release, as CUTLASS's ClusterBarrier does: enough where the arrival only says that
// reads have finished (wgmma's, waited for). A .release.cluster arrive costs a cluster-scope fence each time.
__device__ __forceinline__ void mbarArriveCluster(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// 16 bytes to a shared::cluster address (from clusterMapShared).
__device__ __forceinline__ void clusterStore4(unsigned addr, float a, float b, float c, float d) {
  asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "f"(a), "f"(b), "f"(c), "f"(d)
               : "memory");
}

// 4 bytes to a shared::cluster address.
__device__ __forceinline__ void clusterStore1(unsigned addr, float a) {
  asm volatile("st.shared::cluster.f32 [%0], %1;\n" ::"r"(addr), "f"(a) : "memory");
}

// ---- generic and async proxies -----------------------------------------------------------------------------

// Makes this thread's shared-memory writes (generic proxy) visible to the async proxy (wgmma, TMA); a
// barrier after it makes them visible to the other threads' wgmmas.
__device__ __forceinline__ void fenceProxyAsyncShared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// Named barrier `id` (1..15; 0 is __syncthreads) over `threads` threads (a multiple of 32).
__device__ __forceinline__ void namedBarrierSync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// ---- wgmma -----------------------------------------------------------------------------------------------

// The shared-memory matrix descriptor of a K-major, 128-byte-swizzled tile at shared address `addr`
// (1024-byte aligned, or advanced from such by a multiple of 32 bytes within the first row):
//   bits 0-13 address / 16, 16-29 leading-dimension offset (unused for this layout), 32-45 stride
//   between 8-row groups / 16 (1024 bytes), 62-63 swizzle mode (1 = 128 bytes).
__device__ __forceinline__ unsigned long long wgmmaDescriptor(unsigned addr) {
  return static_cast<unsigned long long>((addr & 0x3FFFF) >> 4) | (static_cast<unsigned long long>(1024 >> 4) << 32) |
         (1ull << 62);
}
// The descriptor of an N-major (MN-major), 128-byte-swizzled B operand at `addr` (1024-byte aligned): each
// k row is 128 bytes of 64 consecutive N elements, as TMA writes a box 64 elements wide; groups of 8 k rows
// are 1024 bytes apart (stride offset), and the next 64 N elements start `nextColumns` bytes further
// (leading offset: the next box). A k16 slice of the tile starts 2048 bytes (16 rows) further along.
__device__ __forceinline__ unsigned long long wgmmaDescriptorMN(unsigned addr, unsigned nextColumns) {
  return static_cast<unsigned long long>((addr & 0x3FFFF) >> 4) |
         (static_cast<unsigned long long>((nextColumns & 0x3FFFF) >> 4) << 16) |
         (static_cast<unsigned long long>(1024 >> 4) << 32) | (1ull << 62);
}
// Orders this thread's register and shared-memory accesses before the warpgroup's next wgmma.
__device__ __forceinline__ void wgmmaFence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmmaCommit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most PENDING of the warpgroup's committed wgmma groups are still running.
template <int PENDING> __device__ __forceinline__ void wgmmaWait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(PENDING) : "memory");
}
// Keeps the compiler from moving accesses of `r` across an asynchronous wgmma that reads or writes it.
template <int COUNT> __device__ __forceinline__ void wgmmaFenceOperands(float (&r)[COUNT]) {
#pragma unroll
  for (int i = 0; i < COUNT; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

template <int ROWS> __device__ __forceinline__ void wgmmaFenceOperands(unsigned (&r)[ROWS][4]) {
#pragma unroll
  for (int i = 0; i < ROWS; ++i)
    asm volatile("" : "+r"(r[i][0]), "+r"(r[i][1]), "+r"(r[i][2]), "+r"(r[i][3])::"memory");
}

template <int REGS> __device__ __forceinline__ void setMaxRegistersInc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGS));
}
template <int REGS> __device__ __forceinline__ void setMaxRegistersDec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGS));
}

// d (+)= A · B^T for one m64nNk16 step: A is 64 x 16 and B (W's rows) N x 16, both K-major in shared memory
// through their descriptors; `accumulate` 0 overwrites d. N / 2 fp32 accumulators per thread. The operand
// lists are written out: PTX takes every accumulator as its own register, and inline asm has no symbolic
// operand names under NVCC/NVRTC ("symbolic operand reference not supported").
template <int N> struct Wgmma;

template <> struct Wgmma<8> {
  __device__ __forceinline__ static void mma(float (&d)[4], unsigned long long a, unsigned long long b, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "l"(a), "l"(b), "r"(accumulate));
  }
};

// N a multiple of 16 up to 256 (Wgmma<8> above has its own list): one instruction of the exact width, so
// a tile can be any multiple of 16 columns wide (the tuner fits tiles to the SMs: 80, 176, ...). The
// descriptors and the accumulate flag come first (%0-%2, read-write though nothing writes them) so that the
// accumulators' register numbers, %3 on, do not depend on N; MINFER_WG_REGSk lists the first 8k of them
// and MINFER_WG_OPSk their operands.
#define MINFER_WG_REGS1 "%3, %4, %5, %6, %7, %8, %9, %10"
#define MINFER_WG_REGS2 MINFER_WG_REGS1 ", %11, %12, %13, %14, %15, %16, %17, %18"
#define MINFER_WG_REGS3 MINFER_WG_REGS2 ", %19, %20, %21, %22, %23, %24, %25, %26"
#define MINFER_WG_REGS4 MINFER_WG_REGS3 ", %27, %28, %29, %30, %31, %32, %33, %34"
#define MINFER_WG_REGS5 MINFER_WG_REGS4 ", %35, %36, %37, %38, %39, %40, %41, %42"
#define MINFER_WG_REGS6 MINFER_WG_REGS5 ", %43, %44, %45, %46, %47, %48, %49, %50"
#define MINFER_WG_REGS7 MINFER_WG_REGS6 ", %51, %52, %53, %54, %55, %56, %57, %58"
#define MINFER_WG_REGS8 MINFER_WG_REGS7 ", %59, %60, %61, %62, %63, %64, %65, %66"
#define MINFER_WG_REGS9 MINFER_WG_REGS8 ", %67, %68, %69, %70, %71, %72, %73, %74"
#define MINFER_WG_REGS10 MINFER_WG_REGS9 ", %75, %76, %77, %78, %79, %80, %81, %82"
#define MINFER_WG_REGS11 MINFER_WG_REGS10 ", %83, %84, %85, %86, %87, %88, %89, %90"
#define MINFER_WG_REGS12 MINFER_WG_REGS11 ", %91, %92, %93, %94, %95, %96, %97, %98"
#define MINFER_WG_REGS13 MINFER_WG_REGS12 ", %99, %100, %101, %102, %103, %104, %105, %106"
#define MINFER_WG_REGS14 MINFER_WG_REGS13 ", %107, %108, %109, %110, %111, %112, %113, %114"
#define MINFER_WG_REGS15 MINFER_WG_REGS14 ", %115, %116, %117, %118, %119, %120, %121, %122"
#define MINFER_WG_REGS16 MINFER_WG_REGS15 ", %123, %124, %125, %126, %127, %128, %129, %130"
#define MINFER_WG_8(i)                                                                                         \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]),     \
      "+f"(d[i + 7])
#define MINFER_WG_OPS1 MINFER_WG_8(0)
#define MINFER_WG_OPS2 MINFER_WG_OPS1, MINFER_WG_8(8)
#define MINFER_WG_OPS3 MINFER_WG_OPS2, MINFER_WG_8(16)
#define MINFER_WG_OPS4 MINFER_WG_OPS3, MINFER_WG_8(24)
#define MINFER_WG_OPS5 MINFER_WG_OPS4, MINFER_WG_8(32)
#define MINFER_WG_OPS6 MINFER_WG_OPS5, MINFER_WG_8(40)
#define MINFER_WG_OPS7 MINFER_WG_OPS6, MINFER_WG_8(48)
#define MINFER_WG_OPS8 MINFER_WG_OPS7, MINFER_WG_8(56)
#define MINFER_WG_OPS9 MINFER_WG_OPS8, MINFER_WG_8(64)
#define MINFER_WG_OPS10 MINFER_WG_OPS9, MINFER_WG_8(72)
#define MINFER_WG_OPS11 MINFER_WG_OPS10, MINFER_WG_8(80)
#define MINFER_WG_OPS12 MINFER_WG_OPS11, MINFER_WG_8(88)
#define MINFER_WG_OPS13 MINFER_WG_OPS12, MINFER_WG_8(96)
#define MINFER_WG_OPS14 MINFER_WG_OPS13, MINFER_WG_8(104)
#define MINFER_WG_OPS15 MINFER_WG_OPS14, MINFER_WG_8(112)
#define MINFER_WG_OPS16 MINFER_WG_OPS15, MINFER_WG_8(120)
#define MINFER_WGMMA_N(n, k)                                                                                   \
  if constexpr (N == n)                                                                                         \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %2, 0;\n"                                                  \
                 "wgmma.mma_async.sync.aligned.m64n" #n "k16.f32.bf16.bf16 {" MINFER_WG_REGS##k "}, %0, %1, p, 1, 1, " \
                 "0, 0;\n}\n"                                                                                   \
                 : "+l"(a), "+l"(b), "+r"(accumulate), MINFER_WG_OPS##k);
template <int N> struct Wgmma {
  static_assert(N % 16 == 0 && N >= 16 && N <= 256, "Wgmma: N must be a multiple of 16 from 16 to 256");
  __device__ __forceinline__ static void mma(float (&d)[N / 2], unsigned long long a, unsigned long long b,
                                             int accumulate) {
    MINFER_WGMMA_N(16, 1)
    MINFER_WGMMA_N(32, 2)
    MINFER_WGMMA_N(48, 3)
    MINFER_WGMMA_N(64, 4)
    MINFER_WGMMA_N(80, 5)
    MINFER_WGMMA_N(96, 6)
    MINFER_WGMMA_N(112, 7)
    MINFER_WGMMA_N(128, 8)
    MINFER_WGMMA_N(144, 9)
    MINFER_WGMMA_N(160, 10)
    MINFER_WGMMA_N(176, 11)
    MINFER_WGMMA_N(192, 12)
    MINFER_WGMMA_N(208, 13)
    MINFER_WGMMA_N(224, 14)
    MINFER_WGMMA_N(240, 15)
    MINFER_WGMMA_N(256, 16)
  }
};
#undef MINFER_WGMMA_N
#undef MINFER_WG_8
#undef MINFER_WG_REGS1
#undef MINFER_WG_OPS1
#undef MINFER_WG_REGS2
#undef MINFER_WG_OPS2
#undef MINFER_WG_REGS3
#undef MINFER_WG_OPS3
#undef MINFER_WG_REGS4
#undef MINFER_WG_OPS4
#undef MINFER_WG_REGS5
#undef MINFER_WG_OPS5
#undef MINFER_WG_REGS6
#undef MINFER_WG_OPS6
#undef MINFER_WG_REGS7
#undef MINFER_WG_OPS7
#undef MINFER_WG_REGS8
#undef MINFER_WG_OPS8
#undef MINFER_WG_REGS9
#undef MINFER_WG_OPS9
#undef MINFER_WG_REGS10
#undef MINFER_WG_OPS10
#undef MINFER_WG_REGS11
#undef MINFER_WG_OPS11
#undef MINFER_WG_REGS12
#undef MINFER_WG_OPS12
#undef MINFER_WG_REGS13
#undef MINFER_WG_OPS13
#undef MINFER_WG_REGS14
#undef MINFER_WG_OPS14
#undef MINFER_WG_REGS15
#undef MINFER_WG_OPS15
#undef MINFER_WG_REGS16
#undef MINFER_WG_OPS16

// d += A · B for one m64nNk16 step with A (64 x 16) in registers and B (16 x N) N-major in shared memory
// (imm-trans-b 1: each k row holds N contiguous elements, as a V tile [keys][head_dim] does), through a
// descriptor of wgmmaDescriptorMN. A's fragment is an mma.sync m16n8k16 A fragment for each warp's 16 rows
// (warp w of the warpgroup: rows 16 w .. 16 w + 15): a[0] (row g, k 2t..2t+1), a[1] (row g + 8, same k),
// a[2] (row g, k 2t+8..2t+9), a[3] (row g + 8, same k). Always accumulates.
template <int N> struct WgmmaRegA;

template <> struct WgmmaRegA<64> {
  __device__ __forceinline__ static void mma(float (&d)[32], const unsigned (&a)[4], unsigned long long b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
                 "}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
  }
};

template <> struct WgmmaRegA<128> {
  __device__ __forceinline__ static void mma(float (&d)[64], const unsigned (&a)[4], unsigned long long b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
                 "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
  }
};

} // namespace minfer
