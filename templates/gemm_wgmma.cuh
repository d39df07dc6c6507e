// templates/gemm_wgmma.cuh — prefill matmul for Hopper (sm_90a): C[M, N] = epi(A[M, K] · W[N, K]^T) with TMA
// loads and wgmma, the same contract as gemm.cuh (bf16 in and out, fp32 accumulation, every epilogue
// policy of epilogue.cuh but the gemv-only argmax).
//
// Structure (hopper.cuh has the primitives and the shared-memory layout):
//   * a block is one producer warpgroup and CONSUMERS consumer warpgroups; it computes BM x BN tiles of C.
//     Two schedules:
//       - cooperative (PINGPONG false): BM = 64 * CONSUMERS, the consumers share each tile, each owning 64
//         rows (one m64nBNk16 wgmma per k16 step), so both store their part at once while the tensor cores
//         idle;
//       - ping-pong (PINGPONG true, two consumers, BN up to 176): BM = 128 and the consumers take the
//         block's tiles in turn, each a whole tile (two m64 wgmmas per k16 step), so one's epilogue runs
//         while the other's MMAs do. The ring is consumed in the order it is filled either way; a slot's
//         empty barrier then counts the arrivals of one consumer;
//   * persistent: the grid is at most one block per SM and each block walks tiles pid, pid + gridDim.x, ...
//     in gemm.cuh's grouped raster order; the producer runs ahead across tiles, so the next tile's first
//     slices load while the consumers store the last one's epilogue;
//   * W does not depend on the kernel before this one: the producer issues its first tile's first STAGES
//     slices of W before it waits for that kernel (gridDependencyWait), and their A after. Launched as a
//     programmatic dependent (prefill and decode, runtime/Session.cpp), a block that lands on an SM the
//     kernel before has left fills its ring with W while that kernel's last blocks finish;
//   * K is walked in 64-wide slices (128 bytes of bf16: one swizzle row) through a STAGES-deep ring. One
//     thread of the producer issues, per slice, a TMA box of A (64 x BM) and of W (64 x BN) completing on
//     the slot's `full` barrier; consumers wait on it, run 4 wgmmas from shared memory, and release the slot
//     on its `empty` barrier once those wgmmas have finished (one warpgroup-level group kept in flight);
//   * tails: the tensor maps carry the true extents (rows M, N, K), so TMA fills everything past them with
//     zeros; the epilogue stores nothing past M or N;
//   * the RMS norm folded across two gemms, its gains in W (PlanBuffer::gains): a residual epilogue with row
//     squares (EpiPointwise<.., true>) also writes, for each row it stores, the sum of squares of the stored
//     bf16 values over the tile's BN columns, one float a tile (p.row_sq [M, ceil(N / BN)]): from
//     registers, the quad's four lanes meeting by shuffle, in a fixed order (deterministic). The next gemm
//     (Pro = ProRowSquares) reads that x, un-normalised, as A, and before its epilogue scales each row's
//     products by 1 / rms from the row's partials, loaded when the tile starts so that their latency hides
//     under its main loop. No pass over x, no norm launch, nothing in the main loop.
//     (Adding up the squares in the main loop from the A slots instead cost these gemms 4-18%, and a
//     producer warp per 64 rows doing it 25%: bench/NOTES.md, session 22.) The product is x · (gamma W) in
//     fp32, then scaled: epilogue.cuh's rounding note for gemv_wgmma.cuh holds here too;
//   * registers: with two consumers (384 threads) the producer gives back all but 40 and the consumers take
//     232 each (setmaxnreg), room for BN = 256's 128 accumulators;
//   * widths: BN is any multiple of 16 up to 256 (one wgmma of that N), so the tuner can fit a tile count to
//     the SMs (compiler/kernels/Gemm.h fittedWgmmaTiles: 128x80 at M 512, N 2560 is 128 tiles where 128x128
//     is 80). The qkv epilogue stores whole-head tiles a row at a time (storeTileRowHalfRope), other widths a
//     16-column slice pair at a time (storeRowHalfRope);
//   * the epilogue writes whole 32-byte L2 sectors where the layout allows (N % 4 == 0; for the qkv rope,
//     HEAD_DIM % 32 == 0 and slice pairs whose partner is in the tile): neighbouring lanes exchange values
//     (epilogue.cuh quadExchange4 and kin) so that a lane stores 8 bytes where the accumulator layout gives it
//     4. What it reads besides the accumulators, a residual (ResidualWords) or the qkv rows' positions and
//     rotations (RopeRows), is asked for before the stores; on cooperative tiles ahead of them: the qkv
//     positions as the tile starts and the rest while its last wgmmas run, a 128-row tile's residual ~6000
//     cycles before its main loop ends, a 64-row one's while its last wgmmas run;
//   * pairs (gemmWgmmaPair): the same body run by clusters of two blocks over vertically adjacent tiles,
//     each block loading half of the W box and multicasting it to both (gemmWgmmaBody says how they keep
//     in step).
//
// Kernel arguments: MatmulParams p (epilogue.cuh, the same as gemm.cuh), then the tensor maps of A
// [M, K] (box 64 x BM) and W [N, K] (box 64 x BN, or BN / 2 for a pair), 128-byte swizzle, encoded by the
// launcher from p.A, p.W, M, N and K (compiler/kernels/Gemm.h GemmSpec::tensorMaps). Launch: grid
// min(tiles, SMs) (at least 1), or for a pair 2 x min(units, SMs / 2) (a unit: two vertically adjacent
// tiles), block 128 * (CONSUMERS + 1), dynamic shared memory kWgmmaSharedBytes<BM, BN, STAGES>.
#pragma once

#include "common.cuh"
#include "epilogue.cuh"
#include "gemm.cuh"
#include "hopper.cuh"

namespace minfer {

// Dynamic shared memory of a gemmWgmma instantiation: the ring of A and W slices, a full and an empty
// barrier per slot, and 1 KB to align the ring to the 1024 bytes the swizzle pattern needs.
template <int BM, int BN, int STAGES>
constexpr int kWgmmaSharedBytes = STAGES * (BM + BN) * 64 * 2 + STAGES * 16 + 1024;

// The slice of the main loop at which prefetchResidualRows runs (and 128-row tiles load their residual words and
// qkv rotations): ~6000 cycles of tensor-core work before the epilogue (a BM x BN x 64 slice is ~BM * BN / 32
// cycles at a Hopper SM's 4096 bf16 FLOP a cycle), enough for the whole grid's residual (8 MB for a 2048 x 2048
// output) to come from DRAM; the first slice where K is shorter.
template <int K, int BM, int BN> __host__ __device__ constexpr int residualPrefetchStep() {
  constexpr int kTilesK = (K + 63) / 64, kStepCycles = BM * BN / 32;
  constexpr int kLead = (6000 + kStepCycles - 1) / kStepCycles;
  return kTilesK > kLead ? kTilesK - kLead : 0;
}

namespace gemm_detail {

// The residual pairs a thread loads at once before storing them (gemmWgmma's narrow residual epilogue, where
// N % 4 != 0; the wide one loads whole rows: ResidualWords), of the
// `slices` 8-column slices of its row: the largest divisor up to 12 (8 of 128's 16 and 256's 32, 9 of
// 144's 18, 10 of 160's 20, 11 of 176's 22), so that a row's loads go out in few round trips without
// holding more registers than a ping-pong tile's accumulators leave free.
__host__ __device__ constexpr int residualGroup(int slices) {
  int g = slices < 12 ? slices : 12;
  while (slices % g != 0) --g;
  return g;
}

// Whether a policy takes the wide stores: pointwise ones (bias, activation, scale, residual, row squares) and
// the gated one, where a row's 4-column groups are 8-byte aligned (N % 4 == 0; GPT-2's vocabulary 50257 is
// not). The qkv policies have their own exchanging stores (EpiQkv::storeTileRowHalfRope) or none (no rope).
template <class Epi, int N>
constexpr bool kWideStores = N % 4 == 0 && Epi::kRopeHeadDim == 0 && (!Epi::kPairs || Epi::kGated);

// The residual words a thread adds in one 64-row accumulator block of a wide-storing residual epilogue: for
// its rows g and g + 8 (`half`) and each slice pair q of the tile, the 4 columns at quadColumn4(t4), as bf16
// pairs (residual4). A row's words are asked for together, before the stores they feed (C may alias the
// residual: each element is read and written by this thread only, and read first), so their latency is paid
// once a row rather than once per group of slices.
// When a row's words are loaded (ResidualAhead):
//   * Early (cooperative tiles of two consumers, 128 rows): both rows, up to 32 words (64 registers, BN up to
//     256, beside 232 - 128 accumulators), as the main loop reaches residualPrefetchStep's slice, ~6000 cycles
//     before the epilogue: the loads' latency and the grid's burst of residual reads at the tile's end hide
//     under the last slices (Llama-2-7B's o projection at 2048 rows, 128x128: 104.3 -> 100.1 us; TinyLlama's,
//     128x256: 30.7 -> 29.0; bench/NOTES.md session 35);
//   * LastSlice (one consumer, 64 rows): both rows where that is at most 16 words (BN up to 128), else a row at a
//     time; the first rows while the tile's last wgmmas run (loadUnderLastSlice): one round trip a tile (TinyLlama's o
//     projection at 512 rows, 64x128: 13.6 -> 13.0 us). Loaded at the early slice instead, this tile ran 6-10%
//     slower;
//   * Stores (ping-pong tiles): a row at a time just before its stores. Loaded under the last wgmmas, or both
//     rows at once, Llama-2-7B's 2048-row o projection ran 5% slower (its epilogue already runs under the other
//     consumer's main loop), and a 128x176 tile's 176 accumulators leave no room for 22 words (44 registers:
//     ptxas spilled).
// Rows past M and columns past N load nothing.
enum class ResidualAhead { Stores, LastSlice, Early };
template <int N, int BN, class Epi, ResidualAhead AHEAD> struct ResidualWords {
  static constexpr bool kActive = kWideStores<Epi, N> && Epi::kResidual;
  static constexpr int kSlicePairs = BN / 16;
  static constexpr int kMaxWords = AHEAD == ResidualAhead::Early ? 32 : AHEAD == ResidualAhead::LastSlice ? 16 : 0;
  static constexpr int kRows = 2 * kSlicePairs <= kMaxWords ? 2 : 1; // the rows (halves) held at once
  uint2 w[kRows][kActive ? kSlicePairs : 1];

  // Rows row0 + 8 half .. for kRows rows; row0 is the thread's row g of the block.
  __device__ __forceinline__ void load(const MatmulParams &p, int row0, int half, int M, int tileN, int lane) {
    if constexpr (kActive) {
      const int colBase = tileN * BN + quadColumn4(lane % 4);
#pragma unroll
      for (int r = 0; r < kRows; ++r)
#pragma unroll
        for (int q = 0; q < kSlicePairs; ++q) {
          const int row = row0 + 8 * (half + r), col = colBase + 16 * q;
          w[r][q] = row < M && (N % BN == 0 || col < N) ? Epi::template residual4<N>(row, col, p.epi)
                                                        : make_uint2(0u, 0u);
        }
    }
  }
  // The first block's first rows ahead of the stores: Early at residualPrefetchStep's slice, LastSlice after the
  // main loop's last issue (the other is a no-op).
  __device__ __forceinline__ void loadEarly(const MatmulParams &p, int row0, int M, int tileN, int lane) {
    if constexpr (AHEAD == ResidualAhead::Early) load(p, row0, 0, M, tileN, lane);
  }
  __device__ __forceinline__ void loadUnderLastSlice(const MatmulParams &p, int row0, int M, int tileN, int lane) {
    if constexpr (AHEAD == ResidualAhead::LastSlice) load(p, row0, 0, M, tileN, lane);
  }
  // Before row `half` of block h stores (row0: the block's row g): what is not loaded yet.
  __device__ __forceinline__ void loadAt(const MatmulParams &p, int h, int row0, int half, int M, int tileN, int lane) {
    if (AHEAD != ResidualAhead::Stores && h == 0 && half == 0) return;
    if (kRows == 2 && half == 1) return;
    load(p, row0, half, M, tileN, lane);
  }
  __device__ __forceinline__ uint2 at(int half, int q) const { return w[kRows == 2 ? half : 0][q]; }
};

// Whether gemmWgmmaBody stores a policy's tiles of BN columns through EpiQkv's half-style rope stores
// (storeTileRowHalfRope, storeRowHalfRope), whose rows it loads ahead (RopeRows).
template <class Epi, int BN> __host__ __device__ constexpr bool ropeRows() {
  if constexpr (Epi::kRopeHeadDim > 0) return Epi::template kSlicePairTiles<BN>;
  else return false;
}
// The qkv epilogue's rows (EpiQkv::RopeRow: position, sequence, rotations) for a tile's stores. Where a
// consumer holds one 64-row block (cooperative) and the accumulators leave room, they are loaded ahead: the
// thread's rows g and g + 8 as the tile's main loop starts (loadRows), their rotations (loadAhead) at
// residualPrefetchStep's slice on 128-row tiles, while the last wgmmas run on 64-row ones (or where that slice is
// the first), so the stores wait on nothing. Otherwise (ping-pong, whose epilogue runs under the other
// consumer's main loop anyway) each row just before its stores, as first written: held across the main loop,
// 8 registers of rows made a ping-pong 128x160 tile spill ~300-450 bytes. Nothing for the other policies.
template <class Epi, int BN, int HALVES, bool = ropeRows<Epi, BN>()> struct RopeRows {
  __device__ __forceinline__ void loadRows(int, int, const MatmulParams &) {}
  __device__ __forceinline__ void loadAhead(int, const MatmulParams &) {}
};
template <class Epi, int BN, int HALVES> struct RopeRows<Epi, BN, HALVES, true> {
  using Row = typename Epi::template RopeRow<BN>;
  // Ahead where the accumulators leave room: one block (cooperative), and BN / 2 accumulators and two rows'
  // 4 kRots floats of rotations within 160 registers (a 128x256 tile at head dim 128 spilled).
  static constexpr bool kAhead = HALVES == 1 && BN / 2 + 8 * Row::kRots <= 160;
  Row rows[kAhead ? 2 : 1];
  // r0: the thread's row g of its block.
  __device__ __forceinline__ void loadRows(int r0, int M, const MatmulParams &p) {
    if constexpr (kAhead) {
#pragma unroll
      for (int half = 0; half < 2; ++half) rows[half].loadRow(r0 + 8 * half, r0 + 8 * half < M, p.epi);
    }
  }
  __device__ __forceinline__ void loadAhead(int tileCol, const MatmulParams &p) {
    if constexpr (kAhead) {
      rows[0].loadRotations(tileCol, p.epi);
      rows[1].loadRotations(tileCol, p.epi);
    }
  }
  // Row `row` (`half` of its block) as its stores need it: loaded ahead, or now (ping-pong).
  __device__ __forceinline__ Row at(int row, int M, int half, int tileCol, const MatmulParams &p) const {
    if constexpr (kAhead) {
      return rows[half];
    } else {
      Row r;
      r.loadRow(row, row < M, p.epi);
      r.loadRotations(tileCol, p.epi);
      return r;
    }
  }
};

// One accumulator row (`half`: rows g or g + 8 of the warp's 16) of a tile at columns tileN * BN .. + BN,
// stored wide. `valid`: the row is below M (a lane past M exchanges but stores nothing, so every lane reaches
// the shuffles). Values and rounding are store2's. A residual comes loaded (ResidualWords, this row's
// words); row squares: each lane's four columns, then the quad's lanes in a fixed order.
template <int N, int BN, class Epi, ResidualAhead AHEAD>
__device__ __forceinline__ void storeRowWide(const MatmulParams &p, const float (&acc)[BN / 2], int half, int row,
                                             bool valid, int tileN, int tilesN, int lane,
                                             const ResidualWords<N, BN, Epi, AHEAD> &res) {
  static_assert(BN % 16 == 0, "storeRowWide: slices come in pairs");
  constexpr int kSlicePairs = BN / 16;
  const int t4 = lane % 4, base = tileN * BN;
  auto accPair = [&](int j) { return make_float2(acc[4 * j + 2 * half], acc[4 * j + 2 * half + 1]); };
  if constexpr (Epi::kGated) {
#pragma unroll
    for (int q = 0; q < kSlicePairs; ++q) {
      const float2 v = quadExchange2(Epi::gated(accPair(2 * q)), Epi::gated(accPair(2 * q + 1)), t4);
      const int oc = (base + 16 * q) / 2 + gatedColumn2(t4);
      if (valid && (N % BN == 0 || 2 * oc < N)) Epi::template storeOut2<N>(p.C, v, row, oc);
    }
  } else if constexpr (Epi::kResidual) {
    float squares = 0.f;
#pragma unroll
    for (int q = 0; q < kSlicePairs; ++q) {
      const float4 v = quadExchange4(accPair(2 * q), accPair(2 * q + 1), t4);
      const int col = base + 16 * q + quadColumn4(t4);
      if (valid && (N % BN == 0 || col < N)) {
        const float4 st = Epi::template store4Residual<N>(p.C, v, row, col, p.epi, res.at(half, q));
        if constexpr (Epi::kRowSquares) squares += st.x * st.x + st.y * st.y + st.z * st.z + st.w * st.w;
      }
    }
    if constexpr (Epi::kRowSquares) {
      squares += __shfl_xor_sync(0xffffffffu, squares, 1);
      squares += __shfl_xor_sync(0xffffffffu, squares, 2);
      if (valid && t4 == 0) p.epi.row_sq[static_cast<long long>(row) * tilesN + tileN] = squares;
    }
  } else {
#pragma unroll
    for (int q = 0; q < kSlicePairs; ++q) {
      const float4 v = quadExchange4(accPair(2 * q), accPair(2 * q + 1), t4);
      const int col = base + 16 * q + quadColumn4(t4);
      if (valid && (N % BN == 0 || col < N)) Epi::template store4<N>(p.C, v, row, col, p.epi);
    }
  }
}

} // namespace gemm_detail

// Asks L2 for the residual rows a consumer's epilogue will add, [row0, row0 + 64 or 128) x the tile's BN
// columns, a few thousand cycles before the tile's main loop ends (residualPrefetchStep): by the
// epilogue they are in L2 rather than DRAM, and a residual load waits a few hundred cycles rather than a
// DRAM round trip. Not earlier: asked for as the main loop started, a long K's stream of A and W (Llama-2-7B's
// down projection at 2048 rows moves 135 MB through the 50 MB L2) evicted them before the epilogue. A hint:
// nothing past the rows (M) or the row's last column is asked for.
template <int N, int BN, bool PINGPONG>
__device__ __forceinline__ void prefetchResidualRows(const MatmulParams &p, int row0, int tileN, int M) {
  constexpr int kRows = PINGPONG ? 128 : 64, kLines = (BN * 2 + 127) / 128 + 1; // + 1: a start off a line
  const char *base = reinterpret_cast<const char *>(p.epi.residual);
  for (int i = threadIdx.x % 128; i < kRows * kLines; i += 128) {
    const int row = row0 + i / kLines;
    const long long col = (static_cast<long long>(tileN) * BN * 2 & ~127ll) + 128 * (i % kLines); // bytes
    if (row < M && col < static_cast<long long>(N) * 2 && col < (static_cast<long long>(tileN) + 1) * BN * 2)
      asm volatile("prefetch.global.L2 [%0];" ::"l"(base + static_cast<long long>(row) * N * 2 + col));
  }
}

// The kernel body, for gemmWgmma (CLUSTER 1) and gemmWgmmaPair (CLUSTER 2, launched as clusters of two
// blocks). A pair's blocks take vertically adjacent tiles of the same columns, tileM = 2 u + rank for the
// pair's unit u, and each loads its own A box and half of the shared W box, multicast into both blocks'
// rings: W is read from L2 once per pair. A slot may refill only once both blocks' consumers have released
// it (each consumer warp arrives on both blocks' empty barriers), and a block leaves only after its peer has
// finished (a cluster barrier at the end), as the peer's consumers arrive on its barriers to the last.
template <int N, int K, int BN, int CONSUMERS, int STAGES, class Epi, bool PINGPONG, int CLUSTER, class Pro>
__device__ __forceinline__ void gemmWgmmaBody(const MatmulParams &p, const TensorMap &mapA, const TensorMap &mapW) {
  static_assert(CLUSTER == 1 || CLUSTER == 2, "gemmWgmma: one block, or a pair that shares W");
  static_assert(N >= 1 && K >= 8 && K % 8 == 0, "gemmWgmma: K must be a positive multiple of 8 (TMA row strides)");
  static_assert(CONSUMERS == 1 || CONSUMERS == 2, "gemmWgmma: one or two consumer warpgroups (BM 64 or 128)");
  static_assert(BN % 16 == 0 && BN >= 16 && BN <= 256,
                "gemmWgmma: BN must be a multiple of 16 from 16 to 256 (a wgmma's N)");
  static_assert(STAGES >= 2, "gemmWgmma: at least two slots (one loading while one is multiplied)");
  // Ping-pong: a consumer holds a whole tile, BN accumulators a thread of its 232 registers; every epilogue
  // compiles without spills up to BN 176 (at 192 the qkv one with a bias spills ~2 KB).
  static_assert(!PINGPONG || (CONSUMERS == 2 && BN <= 176),
                "gemmWgmma: ping-pong takes two consumers of whole 128-row tiles, BN up to 176 (BN accumulators)");
  static_assert(kWgmmaSharedBytes<64 * CONSUMERS, BN, STAGES> <= 227 * 1024,
                "gemmWgmma: the ring exceeds the 227 KB of shared memory a block can have");
  static_assert(!Epi::kPairs || N % 2 == 0, "gemmWgmma: this epilogue needs column pairs, so N must be even");
  static_assert(!Epi::kArgmax, "gemmWgmma: the argmax epilogue runs in the FMA gemv only");
  static_assert(!Pro::kActive || Pro::kRowSquares,
                "gemmWgmma: a folded norm comes with its rows' sums of squares (ProRowSquares)");
  static_assert(!Epi::kRowSquares || N % 2 == 0, "gemmWgmma: row squares come from the paired residual stores (N even)");
  constexpr int BM = 64 * CONSUMERS, BK = 64;
  constexpr int HALVES = PINGPONG ? 2 : 1; // 64-row halves of a tile one consumer multiplies
  constexpr int kTilesK = (K + BK - 1) / BK, kTilesN = (N + BN - 1) / BN;
  constexpr unsigned kSlotA = BM * BK * 2, kSlotW = BN * BK * 2;
  constexpr unsigned kHalfW = kSlotW / CLUSTER; // the W a block of a pair loads: BN / 2 rows, 1 KB-aligned
  requireDynamicShared(kWgmmaSharedBytes<BM, BN, STAGES>);

  extern __shared__ __align__(1024) unsigned char wgmmaShared[];
  const unsigned sA = (smemAddress(wgmmaShared) + 1023) & ~1023u; // [STAGES][BM][64], swizzled
  const unsigned sW = sA + STAGES * kSlotA;                        // [STAGES][BN][64], swizzled
  const unsigned full = sW + STAGES * kSlotW;                      // [STAGES] barriers: the slot has landed
  const unsigned empty = full + STAGES * 8;                        // [STAGES] barriers: the slot may refill

  const int wg = threadIdx.x / 128, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    prefetchTensorMap(&mapA);
    prefetchTensorMap(&mapW);
    for (int s = 0; s < STAGES; ++s) {
      mbarInit(full + 8 * s, 1);              // the producer's arrive, plus the slice's bytes
      // One arrive per warp of the consumer(s), of both blocks of a pair.
      mbarInit(empty + 8 * s, (PINGPONG ? 4 : 4 * CONSUMERS) * CLUSTER);
    }
    mbarInitFence();
  }
  // A pair: neither block's producer multicasts, nor its consumers arrive, before both blocks' barriers exist.
  if constexpr (CLUSTER == 2) {
    clusterArrive();
    clusterWait();
  } else {
    __syncthreads();
  }
  const unsigned rank = CLUSTER == 2 ? clusterRank() : 0;
  // Releases a slot: an arrive on this block's empty barrier, and for a pair on the peer's as well.
  auto release = [&](int s) {
    mbarArrive(empty + 8 * s);
    if constexpr (CLUSTER == 2) mbarArriveCluster(clusterMapShared(empty + 8 * s, rank ^ 1));
  };
  // A (and a residual) may be the previous kernel's output; W is not. The thread that issues the copies
  // waits below, once its first tile's first slices of W are on their way.
  if (threadIdx.x != 0) gridDependencyWait();

  const int M = p.rows;
  const int tilesM = (M + BM - 1) / BM;
  // Units of work: a tile, or for a pair two vertically adjacent tiles (the second past M when tilesM is
  // odd: its loads are TMA's zeros and it stores nothing). The grid is a multiple of CLUSTER.
  const int unitsM = (tilesM + CLUSTER - 1) / CLUSTER, units = unitsM * kTilesN;
  const int firstUnit = blockIdx.x / CLUSTER, unitStep = gridDim.x / CLUSTER;

  if (wg == 0) {
    // Producer: one thread issues every copy; the rest of the warpgroup only gives its registers back.
    if constexpr (CONSUMERS == 2) setMaxRegistersDec<40>();
    if (threadIdx.x == 0) {
      auto loadW = [&](int slot, int kt, int tileN) {
        if constexpr (CLUSTER == 1)
          tmaLoad2d(sW + slot * kSlotW, &mapW, kt * BK, tileN * BN, full + 8 * slot);
        else
          tmaLoad2dMulticast(sW + slot * kSlotW + rank * kHalfW, &mapW, kt * BK, tileN * BN + rank * (BN / 2),
                             full + 8 * slot, 0x3);
      };
      // The first tile's first slices (the ring is empty): W before the wait, under programmatic dependent
      // launch while the kernel before drains, and A after it.
      const int early = firstUnit < units ? (kTilesK < STAGES ? kTilesK : STAGES) : 0;
      int unitM0 = 0, tileN0 = 0;
      if (early > 0) gemm_detail::groupedTile(firstUnit, unitsM, kTilesN, unitM0, tileN0);
      for (int kt = 0; kt < early; ++kt) {
        mbarArriveExpectTx(full + 8 * kt, kSlotA + kSlotW); // a pair's W: both halves land here
        loadW(kt, kt, tileN0);
      }
      gridDependencyWait();
      for (int kt = 0; kt < early; ++kt)
        tmaLoad2d(sA + kt * kSlotA, &mapA, kt * BK, (unitM0 * CLUSTER + rank) * BM, full + 8 * kt);
      int slot = early % STAGES;
      unsigned phase = early == STAGES ? 1 : 0;
      for (int t = firstUnit; t < units; t += unitStep) {
        int unitM, tileN;
        gemm_detail::groupedTile(t, unitsM, kTilesN, unitM, tileN);
        const int tileM = unitM * CLUSTER + rank;
        for (int kt = t == firstUnit ? early : 0; kt < kTilesK; ++kt) {
          mbarWait(empty + 8 * slot, phase ^ 1); // the first pass through the ring finds every slot free
          mbarArriveExpectTx(full + 8 * slot, kSlotA + kSlotW);
          tmaLoad2d(sA + slot * kSlotA, &mapA, kt * BK, tileM * BM, full + 8 * slot);
          loadW(slot, kt, tileN);
          if (++slot == STAGES) slot = 0, phase ^= 1;
        }
      }
    }
    if constexpr (CLUSTER == 2) { // the end of the pair's work (see the consumers' end)
      clusterArrive();
      clusterWait();
    }
    return;
  }

  // Consumers. Cooperative: warpgroup c = wg - 1 multiplies rows [64 c, 64 c + 64) of each tile.
  // Ping-pong: it takes the block's tiles 2 i + c, all their rows.
  if constexpr (CONSUMERS == 2) setMaxRegistersInc<232>();
  const int c = wg - 1, warp = (threadIdx.x / 32) % 4;
  float accs[HALVES][BN / 2];
  int slot = 0;
  unsigned phase = 0;
  // Ping-pong: named barrier 1 + c is consumer c's turn to run its main loop. The turns keep the main
  // loops in tile order, which the ring's parities need: a consumer may wait on a slot's fill only once
  // the fill before it has landed, or the barrier's parity would say a fill two back is this one. After its
  // main loop a consumer hands the turn on (but after the block's last tile: no one takes it), and stores
  // its tile while the other multiplies.
  if (PINGPONG && c == 1) asm volatile("bar.arrive 1, 256;\n" ::: "memory"); // consumer 0 goes first
  int local = -1; // the tile's place in this block's sequence
  for (int t = firstUnit; t < units; t += unitStep) {
    ++local;
    if (PINGPONG) {
      if (local % 2 != c) continue;
      // The other consumer's tiles came before this one in the ring: kTilesK slices each.
      const int first = local * kTilesK;
      slot = first % STAGES;
      phase = (first / STAGES) & 1;
      asm volatile("bar.sync %0, 256;\n" ::"r"(1 + c) : "memory");
    }
    int unitM, tileN;
    gemm_detail::groupedTile(t, unitsM, kTilesN, unitM, tileN);
    const int tileM = unitM * CLUSTER + rank;
    // The folded norm: the partial sums of squares of the accumulator rows (lane / 4 and + 8 of the warp's 16
    // in each 64-row half), loaded now and added after the main loop.
    float held[HALVES][2][Pro::kActive ? ProRowSquares::kHeld : 1];
    auto accRow = [&](int h, int half) {
      return tileM * BM + (PINGPONG ? 64 * h : 64 * c) + warp * 16 + lane / 4 + 8 * half;
    };
    if constexpr (Pro::kActive)
#pragma unroll
      for (int h = 0; h < HALVES; ++h)
#pragma unroll
        for (int half = 0; half < 2; ++half)
          Pro::load(held[h][half], accRow(h, half), accRow(h, half) < M, lane % 4, p.epi);
    // The qkv epilogue's positions and sequences, likewise (where it loads them ahead).
    gemm_detail::RopeRows<Epi, BN, HALVES> ropeRows;
    ropeRows.loadRows(accRow(0, 0), M, p);
    // A wide residual epilogue's words (ResidualWords says when each row is loaded).
    using gemm_detail::ResidualAhead;
    gemm_detail::ResidualWords<N, BN, Epi,
                               PINGPONG ? ResidualAhead::Stores
                               : CONSUMERS == 2 ? ResidualAhead::Early
                                                : ResidualAhead::LastSlice> res;
    int previous = -1; // the slot whose wgmmas may still run
    // A 128-row cooperative tile asks for its qkv rows' rotations at that slice too, where it lies inside the
    // main loop; at slice 0 (short K) they would stall the first wgmma on the rows' positions, so there, as on
    // 64-row tiles, they come under the last wgmmas.
    constexpr int kEarlySlice = residualPrefetchStep<K, BM, BN>();
    constexpr bool kRopeEarly = CONSUMERS == 2 && kEarlySlice > 0;
#pragma unroll 1
    for (int kt = 0; kt < kTilesK; ++kt) {
      if constexpr (Epi::kResidual || (kRopeEarly && Epi::kRopeHeadDim > 0))
        if (kt == kEarlySlice) {
          if constexpr (Epi::kResidual)
            prefetchResidualRows<N, BN, PINGPONG>(p, tileM * BM + (PINGPONG ? 0 : 64 * c), tileN, M);
          res.loadEarly(p, accRow(0, 0), M, tileN, lane);
          if constexpr (kRopeEarly) ropeRows.loadAhead(tileN * BN, p);
        }
      mbarWait(full + 8 * slot, phase);
      const unsigned a = sA + slot * kSlotA + (PINGPONG ? 0 : c * 64 * 128), w = sW + slot * kSlotW;
#pragma unroll
      for (int h = 0; h < HALVES; ++h) wgmmaFenceOperands(accs[h]);
      wgmmaFence();
#pragma unroll
      for (int k = 0; k < BK / 16; ++k)
#pragma unroll
        for (int h = 0; h < HALVES; ++h)
          Wgmma<BN>::mma(accs[h], wgmmaDescriptor(a + h * 64 * 128 + 32 * k), wgmmaDescriptor(w + 32 * k),
                         kt > 0 || k > 0);
      wgmmaCommit();
#pragma unroll
      for (int h = 0; h < HALVES; ++h) wgmmaFenceOperands(accs[h]);
      // The group before this one has finished: its slot may be refilled while this one runs.
      wgmmaWait<1>();
      if (previous >= 0 && lane == 0) release(previous);
      previous = slot;
      if (++slot == STAGES) slot = 0, phase ^= 1;
    }
    if (PINGPONG && t + unitStep < units) asm volatile("bar.arrive %0, 256;\n" ::"r"(2 - c) : "memory");
    res.loadUnderLastSlice(p, accRow(0, 0), M, tileN, lane);
    if constexpr (!kRopeEarly) ropeRows.loadAhead(tileN * BN, p); // and, where RopeRows::kAhead, the qkv rows' rotations
    wgmmaWait<0>();
#pragma unroll
    for (int h = 0; h < HALVES; ++h) wgmmaFenceOperands(accs[h]);
    if (lane == 0) release(previous);
    if constexpr (Pro::kActive) {
      // 1 / rms of each row from its partial sums of squares scales its products (rows past M store nothing).
#pragma unroll
      for (int h = 0; h < HALVES; ++h) {
        float scale[2];
#pragma unroll
        for (int half = 0; half < 2; ++half)
          scale[half] = Pro::template invRms<K>(held[h][half], accRow(h, half), accRow(h, half) < M, lane, p.epi);
#pragma unroll
        for (int j = 0; j < BN / 8; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) accs[h][4 * j + e] *= scale[e / 2];
      }
    }
#pragma unroll
    for (int h = 0; h < HALVES; ++h) {
      // Epilogue straight from the accumulators (layout in hopper.cuh), through the policy, a 64-row half at
      // a time.
      float(&acc)[BN / 2] = accs[h];
      const int rows0 = tileM * BM + (PINGPONG ? 64 * h : 64 * c); // the first of the 64 rows `acc` holds
      const int col0 = tileN * BN + (lane % 4) * 2;
#pragma unroll
      for (int half = 0; half < 2; ++half) { // rows g and g + 8 of the warp's 16
        const int row = rows0 + warp * 16 + lane / 4 + 8 * half;
        res.loadAt(p, h, accRow(h, 0), half, M, tileN, lane); // after the stores before them: they may alias
        constexpr int kHeadDim = Epi::kRopeHeadDim;
        if constexpr (kHeadDim > 0) {
          if constexpr (Epi::template kWholeRegionTiles<BN>) {
            // Every example's qkv at BN 64 and 128 (QD and KVD multiples of BN): the row's destination once,
            // every lane through the quad exchange, rows past M storing nothing.
            Epi::template storeTileRowHalfRope<BN>(p.C, acc, half, row, row < M, tileN * BN, p.epi,
                                                    ropeRows.at(row, M, half, tileN * BN, p));
            continue;
          } else if constexpr (Epi::template kSlicePairTiles<BN>) {
            // Tiles across heads or regions (widths fitted to the SMs: 80, 160, ...): the same per slice pair.
            Epi::template storeRowHalfRope<BN>(p.C, acc, half, row, row < M, tileN * BN, p.epi,
                                               ropeRows.at(row, M, half, tileN * BN, p));
            continue;
          }
        }
        if constexpr (gemm_detail::kWideStores<Epi, N>) {
          gemm_detail::storeRowWide<N, BN, Epi>(p, acc, half, row, row < M, tileN, kTilesN, lane, res);
          continue;
        }
        if (row >= M) continue;
        const typename Epi::Row r = Epi::rowOf(row, p.epi);
        if constexpr (kHeadDim > 0 && kHeadDim % 8 == 0 && BN % (kHeadDim > 0 ? kHeadDim : 1) == 0) {
          // Rope with whole heads in the tile, but for half-style rope with HEAD_DIM % 16 == 0 (the
          // quad-exchanging stores above): fragment j's pair index (col % HEAD_DIM) / 2 depends only on
          // j % (HEAD_DIM / 8), so each rotation is loaded once (EpiQkv::rotation, a table row) and used for
          // every head of the tile. A tile past the rotated q and k columns skips it.
          constexpr int kFrags = kHeadDim / 8, kHeads = BN / kHeadDim;
          const bool rotates = tileN * BN < Epi::QD + Epi::KVD;
#pragma unroll
          for (int jj = 0; jj < kFrags; ++jj) {
            const float2 cs = rotates ? Epi::rotation(r.pos, 4 * jj + lane % 4, p.epi) : make_float2(1.f, 0.f);
#pragma unroll
            for (int h = 0; h < kHeads; ++h) {
              const int j = jj + h * kFrags, col = col0 + 8 * j;
              if (N % BN != 0 && col >= N) continue;
              Epi::template store2Rotated<N>(p.C, make_float2(acc[4 * j + 2 * half], acc[4 * j + 2 * half + 1]), row,
                                             col, p.epi, r, cs);
            }
          }
        } else if constexpr (Epi::kResidual && N % 2 == 0) {
          // The residual pairs of 8 slices loaded first, then stored: 8 loads in flight instead of each waiting
          // behind the store before it. Each element is read and written by this thread only, so an in-place
          // residual (C aliasing it) reads every value before it is overwritten.
          constexpr int kGroup = gemm_detail::residualGroup(BN / 8);
          float squares = 0.f; // row squares: of the stored values
#pragma unroll
          for (int j0 = 0; j0 < BN / 8; j0 += kGroup) {
            float2 res[kGroup];
#pragma unroll
            for (int g = 0; g < kGroup; ++g) {
              const int col = col0 + 8 * (j0 + g);
              res[g] = N % BN == 0 || col < N ? Epi::template residual2<N>(row, col, p.epi) : make_float2(0.f, 0.f);
            }
#pragma unroll
            for (int g = 0; g < kGroup; ++g) {
              const int j = j0 + g, col = col0 + 8 * j;
              if (N % BN != 0 && col >= N) continue;
              const float2 v = Epi::template store2Residual<N>(
                  p.C, make_float2(acc[4 * j + 2 * half], acc[4 * j + 2 * half + 1]), row, col, p.epi, res[g]);
              if constexpr (Epi::kRowSquares) squares += v.x * v.x + v.y * v.y;
            }
          }
          if constexpr (Epi::kRowSquares) {
            // The row's squares over the tile's columns: its quad's four lanes (all on this row, so all here).
            const unsigned quad = 0xFu << (lane & ~3);
            squares += __shfl_xor_sync(quad, squares, 1);
            squares += __shfl_xor_sync(quad, squares, 2);
            if (lane % 4 == 0) p.epi.row_sq[static_cast<long long>(row) * kTilesN + tileN] = squares;
          }
        } else {
#pragma unroll
          for (int j = 0; j < BN / 8; ++j)
            storeAccPair<N, N % BN != 0, Epi>(p.C, row, col0 + 8 * j, acc[4 * j + 2 * half], acc[4 * j + 2 * half + 1],
                                              p.epi, r);
        }
      }
    }
  }
  // A pair: this block's consumers arrive on the peer's barriers until their last slot, and the peer's on
  // this block's: neither block leaves before both are done.
  if constexpr (CLUSTER == 2) {
    clusterArrive();
    clusterWait();
  }
}

template <int N, int K, int BN, int CONSUMERS, int STAGES, class Epi, bool PINGPONG = false, class Pro = ProNone>
__global__ void __launch_bounds__(128 * (CONSUMERS + 1), 1)
    gemmWgmma(const __grid_constant__ MatmulParams p, const __grid_constant__ TensorMap mapA,
              const __grid_constant__ TensorMap mapW) {
  gemmWgmmaBody<N, K, BN, CONSUMERS, STAGES, Epi, PINGPONG, 1, Pro>(p, mapA, mapW);
}

// gemmWgmma as clusters of two blocks that share each W box (TMA multicast): the map of W has boxes of
// BN / 2 rows, and the grid is even.
template <int N, int K, int BN, int CONSUMERS, int STAGES, class Epi, bool PINGPONG = false, class Pro = ProNone>
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(128 * (CONSUMERS + 1), 1)
    gemmWgmmaPair(const __grid_constant__ MatmulParams p, const __grid_constant__ TensorMap mapA,
                  const __grid_constant__ TensorMap mapW) {
  gemmWgmmaBody<N, K, BN, CONSUMERS, STAGES, Epi, PINGPONG, 2, Pro>(p, mapA, mapW);
}

} // namespace minfer
