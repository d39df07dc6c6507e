// templates/ptx.cuh — the PTX primitives the kernel templates share, each defined once here.
//
//   cp.async (sm_80+)   16 bytes global -> shared without passing through registers, in commit groups
//   ldmatrix            four 8x8 b16 matrices from shared memory into mma fragments (.trans: transposed)
//   mma.sync m16n8k16   bf16 in, fp32 accumulate
//
// Fragment layouts (PTX ISA, "Matrix fragments for mma.m16n8k16"), with g = lane / 4 and t = lane % 4:
//   A (16x16, row-major): a[0] = (row g,   cols 2t, 2t+1)    a[1] = (row g+8, cols 2t, 2t+1)
//                         a[2] = (row g,   cols 2t+8, 2t+9)  a[3] = (row g+8, cols 2t+8, 2t+9)
//   B (16x8, k x n):      b[0] = (k 2t, 2t+1;   col g)       b[1] = (k 2t+8, 2t+9; col g)
//   C (16x8, fp32):       c[0], c[1] = (row g, cols 2t, 2t+1)  c[2], c[3] = (row g+8, cols 2t, 2t+1)
// ldmatrix.x4: lanes 8i .. 8i+7 give the row addresses of matrix i; without .trans lane l receives
// (row l/4, cols 2(l%4), 2(l%4)+1) of each matrix, with .trans (rows 2(l%4), 2(l%4)+1; col l/4).
//
// The cp.async commit and wait carry a "memory" clobber: shared-memory reads of the landed data must not be
// moved above the wait. mma is plain `asm` (no side effects, so the compiler may schedule it freely);
// ldmatrix is volatile, ordered with the barriers around the shared memory it reads.
#pragma once

#include "common.cuh"

namespace minfer {

// Traps unless the launch gave the block at least `bytes` of dynamic shared memory: a host/spec mismatch
// must not turn into reads past the end of shared memory.
__device__ __forceinline__ void requireDynamicShared(unsigned bytes) {
  unsigned given;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(given));
  if (given < bytes) __trap();
}

__device__ __forceinline__ unsigned smemAddress(const void *p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// Copies 16 bytes to shared address `dst`, bypassing L1 (.cg); `valid == false` reads nothing from `src`
// (src-size 0) and writes 16 zero bytes.
__device__ __forceinline__ void cpAsync16(unsigned dst, const void *src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cpAsync16(void *smem, const void *src, bool valid) {
  cpAsync16(smemAddress(smem), src, valid);
}
__device__ __forceinline__ void cpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most PENDING of this thread's committed groups are still in flight.
template <int PENDING> __device__ __forceinline__ void cpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
}

__device__ __forceinline__ void ldmatrixX4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrixX4(unsigned (&r)[4], const bf16 *smem) { ldmatrixX4(r, smemAddress(smem)); }
__device__ __forceinline__ void ldmatrixX4Trans(unsigned (&r)[4], const bf16 *smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smemAddress(smem)));
}

// d += a · b for one m16n8k16 fragment: a is 16x16 (row-major), b is 16x8 (k x n, i.e. W rows as columns).
__device__ __forceinline__ void mma16816(float (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                         unsigned b0, unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mmaBf16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  mma16816(d, a[0], a[1], a[2], a[3], b0, b1);
}
__device__ __forceinline__ void mmaBf16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  mma16816(d, a[0], a[1], a[2], a[3], b[0], b[1]);
}

// A hint to bring the 128-byte line holding p into L2 (no register, no wait).
__device__ __forceinline__ void prefetchL2(const void *p) { asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p)); }
// Asks bytes [0, bytes) from `base` into L2 one line at a time, shared by `count` callers: the caller at
// `index` takes lines index, index + count, ... (each line asked for once over them all). From a base off a
// line start the range's last line may be missed; the caller asks for base + bytes - 1 itself where it matters.
__device__ __forceinline__ void prefetchLinesL2(const void *base, long long bytes, int index, int count) {
  for (long long off = index * 128LL; off < bytes; off += count * 128LL) prefetchL2(static_cast<const char *>(base) + off);
}

// Counters in global memory shared by the blocks of one kernel (persistent.cuh): a relaxed load at GPU scope
// (sees other blocks' adds; to poll with), an acquire load at GPU scope (what the releasing block wrote before
// its release is visible after it; it also invalidates the SM's L1, so a poll loop of them keeps emptying the
// L1 of every other warp on the SM) and a release add.
__device__ __forceinline__ unsigned loadRelaxedGpu(const unsigned *p) {
  unsigned v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ unsigned loadAcquireGpu(const unsigned *p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void addReleaseGpu(unsigned *p, unsigned v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
// The same, returning the value before the add.
__device__ __forceinline__ unsigned fetchAddReleaseGpu(unsigned *p, unsigned v) {
  unsigned old;
  asm volatile("atom.release.gpu.global.add.u32 %0, [%1], %2;\n" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}
// The same with acquire too: what the blocks that added before wrote before their adds is visible after it
// (attention_decode.cuh: the chunk that arrives last merges the others').
__device__ __forceinline__ unsigned fetchAddAcqRelGpu(unsigned *p, unsigned v) {
  unsigned old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;\n" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}
// The GPU's nanosecond clock (%globaltimer), comparable across SMs.
__device__ __forceinline__ unsigned long long globalNanoseconds() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t));
  return t;
}

} // namespace minfer
