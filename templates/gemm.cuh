// templates/gemm.cuh — prefill matmul on tensor cores: C[M, N] = epi(A[M, K] · W[N, K]^T).
//
// A is the activation (bf16, row-major, M = tokens this step, a runtime value); W is an HF Linear weight
// (bf16 [out = N, in = K], row-major); C is bf16 [M, N]; accumulation is fp32. Every shape but M is a
// template constant, so all index arithmetic on K and N folds and the tails that cannot occur vanish.
//
// Structure (the Ampere recipe, which is also what sm_89 and plain sm_90 run best without wgmma):
//   * a block computes a BM x BN tile of C with WARPS_M x WARPS_N warps, each owning a (BM/WARPS_M) x
//     (BN/WARPS_N) warp tile made of m16n8k16 mma.sync fragments (bf16 in, fp32 accumulate);
//   * K is walked in BK-wide slices; a STAGES-deep ring of shared-memory buffers is filled with 16-byte
//     cp.async copies (zero-filled past M, N and K), so STAGES - 1 slices are in flight while one is
//     being multiplied; one barrier per slice;
//   * mma fragments are double-buffered in registers, the next k16 step's (and across a slice boundary,
//     the next slice's first) loading while the current one multiplies;
//   * fragments come out of shared memory with ldmatrix.x4. A and W are both K-contiguous, which is what
//     mma's row (A) and col (B) operands want, so neither needs .trans;
//   * shared memory is XOR-swizzled in 16-byte chunks so that both the cp.async stores and the ldmatrix
//     reads touch 8 distinct chunks of every 128-byte line: no bank conflicts, no padding;
//   * blocks are rastered in groups of kGroupM tile rows so that the blocks running at once share A rows
//     and W columns in L2 (an lm_head W of 131 MB is then read ceil(M / (8 BM)) times, not M / BM);
//   * the epilogue policy (epilogue.cuh) is applied to the fp32 accumulators and the result stored as
//     bf16 pairs (4-byte stores) when N is even, single bf16 values when it is odd (GPT-2's 50257).
//
// Kernel arguments, in order (the runtime builds them from compiler/kernels/Gemm.h's contract):
//   bf16 *C            [M, N]   may alias epi.residual (in-place residual add), never A or W
//   const bf16 *A      [M, K]   16-byte aligned (K % 8 == 0 keeps every row aligned)
//   const bf16 *W      [N, K]   16-byte aligned
//   int M              rows; any value >= 0 (rows past M are zero-filled on load and never stored)
//   EpiParams epi      bias [N] and/or residual [M, N], as the policy needs
// Launch: grid (ceil(N / BN), ceil(M / BM)), block 32 * WARPS_M * WARPS_N, dynamic shared memory
// kGemmSharedBytes<BM, BN, BK, STAGES> (above 48 KB the launcher opts in).
#pragma once

#include "common.cuh"
#include "epilogue.cuh"
#include "ptx.cuh"

namespace minfer {

// Bytes of dynamic shared memory a gemm instantiation needs: the STAGES-deep ring of A and W slices.
template <int BM, int BN, int BK, int STAGES> constexpr int kGemmSharedBytes = STAGES * (BM + BN) * BK * 2;

namespace gemm_detail {

// Tile rows per raster group: 8 tile rows of A (1024 rows at BM = 128) stay hot in L2 while the blocks
// of one wave sweep their W columns; Triton's and CUTLASS's usual choice.
inline constexpr int kGroupM = 8;

// Tile `pid` of a tilesM x tilesN grid in grouped raster order: consecutive ids walk down kGroupM tile rows,
// then move one tile column right, so the tiles in flight at once share A rows and W columns in L2.
__device__ __forceinline__ void groupedTile(int pid, int tilesM, int tilesN, int &tileM, int &tileN) {
  const int perGroup = kGroupM * tilesN;
  const int firstM = (pid / perGroup) * kGroupM;
  const int rowsInGroup = min(tilesM - firstM, kGroupM);
  tileM = firstM + (pid % perGroup) % rowsInGroup;
  tileN = (pid % perGroup) / rowsInGroup;
}

// Where 16-byte chunk c of row r of a [rows][CPR chunks] tile lives, in chunks from the tile's start.
// Chunks are grouped in 128-byte lines of 8 (one row when CPR = 8, two rows when CPR = 4, a half row
// when CPR = 16) and the chunk's position inside its line is XORed with a 3-bit key taken from the row.
// Both access patterns then see 8 distinct positions in every group of 8 lanes (one shared-memory
// wavefront), i.e. all 32 banks:
//   * cp.async: 8 consecutive lanes store 8 consecutive chunks, one whole line;
//   * ldmatrix: 8 lanes read the same chunk of 8 consecutive rows, whose keys are 8 distinct values
//     (CPR >= 8) or 4 distinct values in lines whose two rows sit in opposite halves (CPR = 4).
// The mapping is a bijection within each line, so the tile stays dense: no padding.
template <int CPR> __device__ __forceinline__ int swizzle(int r, int c) {
  constexpr int kRowsPerLine = CPR >= 8 ? 1 : 8 / CPR;
  return (r * CPR + c) ^ ((r / kRowsPerLine) & 7);
}

} // namespace gemm_detail

template <int N, int K, int BM, int BN, int BK, int STAGES, int WARPS_M, int WARPS_N, class Epi>
__global__ void __launch_bounds__(WARPS_M *WARPS_N * 32)
    gemm(const MatmulParams p) {
  const auto &[C, A, W, M, epi] = p; // C [M, N], A [M, K], W [N, K], M rows, the epilogue's arguments
  gridDependencyWait();
  using namespace gemm_detail;
  static_assert(N >= 1 && K >= 8, "gemm: N must be at least 1 and K at least 8");
  static_assert(K % 8 == 0, "gemm: K must be a multiple of 8 (rows are copied 16 bytes = 8 bf16 at a time)");
  static_assert(BK == 32 || BK == 64 || BK == 128,
                "gemm: BK must be 32, 64 or 128 (the swizzle works on 64- or 128-byte rows; mma eats K by 16)");
  static_assert(WARPS_M >= 1 && WARPS_N >= 1 && WARPS_M * WARPS_N <= 16,
                "gemm: between 1 and 16 warps per block (at most 512 threads)");
  static_assert(BM % (16 * WARPS_M) == 0, "gemm: BM must be a multiple of 16 * WARPS_M (warp tiles are m16 fragments)");
  static_assert(BN % (16 * WARPS_N) == 0,
                "gemm: BN must be a multiple of 16 * WARPS_N (a W fragment load covers two n8 fragments)");
  static_assert(STAGES >= 2, "gemm: STAGES must be at least 2 (one slice loading while one is multiplied)");
  static_assert(kGemmSharedBytes<BM, BN, BK, STAGES> <= 227 * 1024,
                "gemm: STAGES * (BM + BN) * BK * 2 bytes exceeds the 227 KB of shared memory a block can have");
  static_assert((BM / WARPS_M) * (BN / WARPS_N) <= 128 * 64,
                "gemm: a warp tile above 128x64 needs more than 256 accumulator registers per thread");

  constexpr int kThreads = WARPS_M * WARPS_N * 32;
  constexpr int kWarpM = BM / WARPS_M, kWarpN = BN / WARPS_N; // warp tile
  constexpr int kFragM = kWarpM / 16, kFragN = kWarpN / 8;    // m16n8 fragments per warp tile
  constexpr int kChunksPerRow = BK / 8;                       // 16-byte chunks per tile row
  constexpr int kTilesK = (K + BK - 1) / BK;
  constexpr int kChunksA = BM * kChunksPerRow, kChunksW = BN * kChunksPerRow;
  constexpr int kItersA = (kChunksA + kThreads - 1) / kThreads; // cp.async per thread per slice
  constexpr int kItersW = (kChunksW + kThreads - 1) / kThreads;
  constexpr int kStageBytesA = BM * BK * 2, kStageBytesW = BN * BK * 2;

  extern __shared__ __align__(128) unsigned char gemmShared[];
  const unsigned sA = smemAddress(gemmShared);            // [STAGES][BM][BK], swizzled
  const unsigned sW = sA + STAGES * kStageBytesA;         // [STAGES][BN][BK], swizzled

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int warpM = warp / WARPS_N, warpN = warp % WARPS_N;

  int tileM, tileN;
  groupedTile(blockIdx.y * gridDim.x + blockIdx.x, gridDim.y, gridDim.x, tileM, tileN);
  const int m0 = tileM * BM, n0 = tileN * BN;

  // Each thread's share of a slice copy: chunk column c = tid % CPR of rows r0 + i * kRowStep, the same
  // for every slice. One base pointer per operand and compile-time offsets (i * kRowStep rows) keep the
  // copy state to a few registers. Rows past M (A) or N (W) copy nothing and zero-fill.
  static_assert(kThreads % kChunksPerRow == 0, "gemm: a block's threads must cover whole tile rows");
  constexpr int kRowStep = kThreads / kChunksPerRow; // tile rows covered by one pass of all threads
  const int copyRow = tid / kChunksPerRow, copyCol = tid % kChunksPerRow;
  const int rowsLeftA = M - m0 - copyRow;             // copy i is a real row of A when i * kRowStep < this
  const int rowsLeftW = N - n0 - copyRow;
  const bf16 *copySrcA = A + static_cast<long long>(m0 + copyRow) * K + copyCol * 8;
  const bf16 *copySrcW = W + static_cast<long long>(n0 + copyRow) * K + copyCol * 8;
  // Moving kRowStep rows down keeps the swizzle key when kRowStep spans whole key periods (8 rows of 128
  // bytes, 16 rows of 64 bytes); then copy i lands at a fixed offset from copy 0.
  constexpr bool kKeyPeriodic = kRowStep % (kChunksPerRow >= 8 ? 8 : 16) == 0;
  const unsigned copyDst = swizzle<kChunksPerRow>(copyRow, copyCol) * 16;
  auto copyOffset = [&](int i) -> unsigned {
    if constexpr (kKeyPeriodic) return copyDst + i * kRowStep * kChunksPerRow * 16;
    else return swizzle<kChunksPerRow>(copyRow + i * kRowStep, copyCol) * 16;
  };

  // Issues the copies of K slice `kt` into ring slot `slot` (all threads; the caller commits the group).
  auto loadSlice = [&](int kt, int slot) {
    const int k0 = kt * BK;
    const bool kOk = (K % BK == 0) || k0 + copyCol * 8 < K;
#pragma unroll
    for (int i = 0; i < kItersA; ++i) {
      if (kChunksA % kThreads == 0 || copyRow + i * kRowStep < BM) {
        const bool ok = kOk && i * kRowStep < rowsLeftA;
        const bf16 *src = copySrcA + static_cast<long long>(i) * kRowStep * K + k0;
        cpAsync16(sA + slot * kStageBytesA + copyOffset(i), ok ? src : A, ok);
      }
    }
#pragma unroll
    for (int i = 0; i < kItersW; ++i) {
      if (kChunksW % kThreads == 0 || copyRow + i * kRowStep < BN) {
        const bool ok = kOk && ((N % BN == 0) || i * kRowStep < rowsLeftW);
        const bf16 *src = copySrcW + static_cast<long long>(i) * kRowStep * K + k0;
        cpAsync16(sW + slot * kStageBytesW + copyOffset(i), ok ? src : W, ok);
      }
    }
  };

  // ldmatrix row addresses (see ldmatrixX4 and swizzle). For A, lanes 0-15 give rows 0-15 of a 16-row
  // fragment at k chunk 0 and lanes 16-31 the same rows at chunk 1; for W, lanes 0-7 / 8-15 give n rows
  // 0-7 at chunks 0 / 1 and lanes 16-31 the same for n rows 8-15. Because the swizzle key does not change
  // across 16 rows (CPR >= 4) and only XORs the low 3 bits, fragment (f, kk) sits at
  //   f * 16 * CPR + (offset ^ (2 * kk))   chunks
  // from this lane's fragment-0, kk-0 offset: no per-iteration swizzle arithmetic.
  const int offA = swizzle<kChunksPerRow>(warpM * kWarpM + lane % 16, lane / 16);
  const int offW = swizzle<kChunksPerRow>(warpN * kWarpN + lane % 8 + (lane / 16) * 8, (lane / 8) % 2);

  float acc[kFragM][kFragN][4];
#pragma unroll
  for (int i = 0; i < kFragM; ++i)
#pragma unroll
    for (int j = 0; j < kFragN; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

  // Fragments are double-buffered in registers: those of step kk + 1 load while step kk multiplies, and
  // at the last step of a slice the next slice's first fragments load behind its mmas, so ldmatrix latency
  // is hidden at slice boundaries too (the CUTLASS multistage schedule; +10% on H200 at BK = 32).
  constexpr int kSteps = BK / 16; // k16 mma steps per slice: 2, 4 or 8, even, so buffer parity carries over
  unsigned a[2][kFragM][4], b[2][kFragN][2];
  auto loadFragments = [&](int buf, int slot, int kk) {
    const unsigned baseA = sA + slot * kStageBytesA, baseW = sW + slot * kStageBytesW;
#pragma unroll
    for (int i = 0; i < kFragM; ++i)
      ldmatrixX4(a[buf][i], baseA + (i * 16 * kChunksPerRow + (offA ^ (2 * kk))) * 16);
#pragma unroll
    for (int j = 0; j < kFragN / 2; ++j) {
      unsigned t[4];
      ldmatrixX4(t, baseW + (j * 16 * kChunksPerRow + (offW ^ (2 * kk))) * 16);
      b[buf][2 * j][0] = t[0];
      b[buf][2 * j][1] = t[1];
      b[buf][2 * j + 1][0] = t[2];
      b[buf][2 * j + 1][1] = t[3];
    }
  };

  // Prologue: STAGES - 1 slices in flight. Every slice step commits a group, empty or not, so the group
  // count stays in step with kt and cpAsyncWait<STAGES - 2> always means "the next slice has landed".
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < kTilesK) loadSlice(s, s);
    cpAsyncCommit();
  }
  cpAsyncWait<STAGES - 2>();
  __syncthreads();
  loadFragments(0, 0, 0);

  int readSlot = 0, writeSlot = STAGES - 1;
#pragma unroll 1
  for (int kt = 0; kt < kTilesK; ++kt) {
    // Refill the slot slice kt - 1 used: every warp finished reading it before the barrier that ended
    // the previous iteration.
    if (kt + STAGES - 1 < kTilesK) loadSlice(kt + STAGES - 1, writeSlot);
    cpAsyncCommit();
#pragma unroll
    for (int kk = 0; kk < kSteps; ++kk) {
      if (kk == kSteps - 1) {
        // Slice kt + 1 has landed for this thread, then (barrier) for all; the barrier also orders every
        // warp's reads of slice kt before the refill at the top of the next iteration.
        cpAsyncWait<STAGES - 2>();
        __syncthreads();
        readSlot = readSlot == STAGES - 1 ? 0 : readSlot + 1;
        writeSlot = writeSlot == STAGES - 1 ? 0 : writeSlot + 1;
      }
      if (kk < kSteps - 1 || kt + 1 < kTilesK) loadFragments((kk + 1) % 2, readSlot, (kk + 1) % kSteps);
#pragma unroll
      for (int i = 0; i < kFragM; ++i)
#pragma unroll
        for (int j = 0; j < kFragN; ++j) mmaBf16(acc[i][j], a[kk % 2][i], b[kk % 2][j]);
    }
  }

  // Epilogue: fragment (i, j) holds C[row][col], C[row][col + 1] in acc[0..1] and row + 8 in acc[2..3],
  // with row = lane / 4 and col = 2 (lane % 4) inside the 16x8 fragment.
  static_assert(!Epi::kPairs || N % 2 == 0, "gemm: this epilogue needs column pairs, so N must be even");
  static_assert(!Epi::kArgmax, "gemm: the argmax epilogue runs in the FMA gemv only");
#pragma unroll
  for (int i = 0; i < kFragM; ++i) {
#pragma unroll
    for (int half = 0; half < 2; ++half) { // rows g and g + 8 of the fragment
      const int row = m0 + warpM * kWarpM + i * 16 + lane / 4 + 8 * half;
      if (row >= M) continue;
      const typename Epi::Row r = Epi::rowOf(row, epi);
#pragma unroll
      for (int j = 0; j < kFragN; ++j) {
        const int col = n0 + warpN * kWarpN + j * 8 + (lane % 4) * 2;
        storeAccPair<N, N % BN != 0, Epi>(C, row, col, acc[i][j][2 * half], acc[i][j][2 * half + 1], epi, r);
      }
    }
  }
}

} // namespace minfer
