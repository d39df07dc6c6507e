// templates/gemv_wgmma.cuh — decode matmul for Hopper (sm_90a) at a few to 16 rows: C[M, N] = epi(A[M, K] ·
// W[N, K]^T), bound by reading W once, the same contract as gemv.cuh's kernels (bf16 in and out, fp32
// accumulation, every epilogue policy, the lm_head's argmax included; the RMS norm prologue, not LayerNorm's).
//
// The operands swap places: W's rows are wgmma's 64-row A operand and the (up to 16) rows of A its N side,
// so the product is C^T = W · A^T, 64 rows of W a block, and a row of A costs no more W traffic than the
// first. Everything else serves streaming W at the copy bandwidth:
//   * one producer warp issues TMA boxes (64 rows x 64 bf16 of W, MMA_N x 64 of A, 128-byte swizzle: the
//     widest box the swizzle allows) into a STAGES-deep ring of slots, a slot BK of K (BK / 64 boxes of
//     each, so each row of W is asked for BK * 2 contiguous bytes at once: DRAM serves long runs of a row
//     better than 128-byte pieces of 64 rows); one consumer warpgroup waits on a slot's `full` barrier,
//     runs BK / 16 m64nMMA_Nk16 wgmmas from shared memory and releases the slot on its `empty` barrier
//     when they are done. Nothing but the ring's depth limits the bytes in flight (STAGES x BK x 128 bytes
//     of W a block);
//   * W does not depend on the kernel before this one: the producer issues the first STAGES boxes of W
//     before it waits for that kernel (gridDependencyWait), and the boxes of A after. Every block also
//     lets the next kernel start early (gridDependencyTrigger), so its weights stream in while this one
//     drains;
//   * split-K over a cluster: SPLIT blocks (one cluster, __cluster_dims__) share a 64-row tile, each taking
//     a contiguous share of K's BK-wide slices, so ceil(N / 64) x SPLIT blocks cover the SMs when N / 64
//     alone would not (a 4096-wide projection has 64 tiles for 132 SMs). Ranks 1.. write their partial
//     sums into rank 0's shared memory (st.shared::cluster); rank 0 adds them in rank order (deterministic)
//     and runs the epilogue. No global workspace, nothing to reset between launches;
//   * a folded RMS norm of A's rows (Pro = ProNorm<false, ..>) costs no pass of its own: the producer
//     copies the block's share of gamma into shared memory once (cp.async.bulk, before the wait: a
//     weight); as each slot lands, the consumers turn its A boxes into x * gamma (rounded to bf16) in place
//     and add up each row's sum of squares; at the end 1 / rms scales the row's products (epilogue.cuh says
//     how that rounds). Under a split each rank's sums go to rank 0 with its partial products. With unit
//     gains (ProNorm<false, void>: gamma multiplied into W's columns at load) the consumers only read the A
//     boxes for the sums of squares, after issuing the slot's wgmmas, and no gamma is loaded;
//   * tails: the tensor maps carry the true extents (N rows of W, M rows of A, K), so TMA fills everything
//     past them with zeros and the epilogue stores nothing past M or N. M above MAX_M stays correct: the
//     block walks groups of MMA_N rows of A, reading its W again for each.
//
// The accumulators (hopper.cuh's layout) are, per warp of the consumer warpgroup, mma.sync m16n8 fragments
// of C^T: gemv.cuh's storeFragmentT stores them through the epilogue policy, as gemvMma's.
//
// Kernel arguments: MatmulParams p (epilogue.cuh), then the tensor maps of W [N, K] (box 64 x 64) and A
// [M, K] (box 64 x MMA_N), 128-byte swizzle, encoded by the launcher from p.W, p.A, N, M and K
// (compiler/kernels/Gemv.h GemvSpec::tensorMaps). Launch: grid ceil(N / 64) * SPLIT, block 160 (the
// consumer warpgroup, then the producer warp), dynamic shared memory kGemvWgmmaSharedBytes<MAX_M, BK,
// STAGES, SPLIT>.
#pragma once

#include "common.cuh"
#include "epilogue.cuh"
#include "gemv.cuh"
#include "hopper.cuh"

namespace minfer {

// wgmma's N: the rows of A a pass takes (8 up to MAX_M = 8, else 16).
template <int MAX_M> constexpr int kGemvWgmmaN = MAX_M <= 8 ? 8 : 16;

// Dynamic shared memory of a gemvWgmma instantiation without a prologue: the ring (a slot is BK / 64 boxes
// of 64 rows of W and of MMA_N rows of A, 128 bytes a row), a full and an empty barrier per slot, the
// partial sums ranks 1.. hand to rank 0 (MMA_N / 2 floats a consumer thread each), each rank's sums of
// squares of the rows (the norm prologue: MMA_N floats a rank), and 1 KB to align the ring to the 1024
// bytes the swizzle pattern needs. The norm prologue adds kGemvWgmmaGammaBytes, and the argmax epilogue MMA_N
// keys of 8 bytes after that (the block's best key per row of A).
template <int MAX_M, int BK, int STAGES, int SPLIT>
constexpr int kGemvWgmmaSharedBytes = STAGES * (BK / 64) * (64 + kGemvWgmmaN<MAX_M>) * 128 + STAGES * 16 +
                                      (SPLIT - 1) * 128 * (kGemvWgmmaN<MAX_M> / 2) * 4 +
                                      SPLIT * kGemvWgmmaN<MAX_M> * 4 + 1024;

// The norm prologue's shared memory: the block's share of gamma (the slices of K it walks, elements of
// GAMMA_BYTES), padded to 16 bytes, and its barrier (16 bytes); 0 without a prologue (GAMMA_BYTES 0).
template <int K, int BK, int SPLIT, int GAMMA_BYTES>
constexpr int kGemvWgmmaGammaBytes =
    GAMMA_BYTES == 0 ? 0 : ((K + BK - 1) / BK + SPLIT - 1) / SPLIT * BK * GAMMA_BYTES / 16 * 16 + 16;

template <int N, int K, int MAX_M, int BK, int STAGES, int SPLIT, class Epi, class Pro = ProNone>
__global__ void __cluster_dims__(SPLIT, 1, 1) __launch_bounds__(160, 1)
    gemvWgmma(const __grid_constant__ MatmulParams p, const __grid_constant__ TensorMap mapW,
              const __grid_constant__ TensorMap mapA) {
  static_assert(N >= 1 && K >= 8 && K % 8 == 0, "gemvWgmma: K must be a positive multiple of 8 (TMA row strides)");
  static_assert(MAX_M >= 1 && MAX_M <= 16, "gemvWgmma: MAX_M must be 1..16 (the rows of A are wgmma's N, 8 or 16)");
  static_assert(SPLIT >= 1 && SPLIT <= 8, "gemvWgmma: SPLIT must be 1..8 (a portable cluster)");
  static_assert(BK == 64 || BK == 128 || BK == 256, "gemvWgmma: BK must be 64, 128 or 256 (1, 2 or 4 boxes a slot)");
  static_assert(STAGES >= 2, "gemvWgmma: at least two slots (one loading while one is multiplied)");
  constexpr int kShared = kGemvWgmmaSharedBytes<MAX_M, BK, STAGES, SPLIT> +
                          kGemvWgmmaGammaBytes<K, BK, SPLIT, Pro::kGammaBytes> + (Epi::kArgmax ? kGemvWgmmaN<MAX_M> * 8 : 0);
  static_assert(kShared <= 227 * 1024, "gemvWgmma: the ring exceeds the 227 KB of shared memory a block can have");
  static_assert(!Epi::kPairs || N % 2 == 0, "gemvWgmma: this epilogue needs W rows in pairs, so N must be even");
  static_assert(!Pro::kLayer, "gemvWgmma: a folded LayerNorm runs in the FMA and mma.sync gemvs only");
  constexpr int MMA_N = kGemvWgmmaN<MAX_M>;
  constexpr int kBoxes = BK / 64;                         // boxes of W (and of A) a slot
  constexpr int kSlices = (K + BK - 1) / BK;              // BK-wide slices of K
  constexpr int kPerRank = (kSlices + SPLIT - 1) / SPLIT; // slices each rank of the cluster walks
  static_assert((SPLIT - 1) * kPerRank < kSlices, "gemvWgmma: SPLIT leaves a rank without slices of K; split less");
  // A box is 64 rows (W) or MMA_N rows (A) of 128 bytes, each a multiple of 1024 bytes: W's boxes, then A's.
  constexpr unsigned kBoxW = 64 * 128, kBoxA = MMA_N * 128, kSlotW = kBoxes * kBoxW, kSlot = kBoxes * (kBoxW + kBoxA);
  // Every slot loads and multiplies all its boxes, also those of the last slice that lie past K: TMA fills
  // them with zeros (and counts their bytes). Skipping their wgmmas would put them on a divergent path,
  // where ptxas serialises every wgmma of the kernel (C7520).
  requireDynamicShared(kShared);

  extern __shared__ __align__(1024) unsigned char gemvWgmmaShared[];
  const unsigned ring = (smemAddress(gemvWgmmaShared) + 1023) & ~1023u; // [STAGES] slots: W, then A
  const unsigned full = ring + STAGES * kSlot;                          // [STAGES] barriers: the slot has landed
  const unsigned empty = full + STAGES * 8;                             // [STAGES] barriers: the slot may refill
  const unsigned partials = empty + STAGES * 8;                         // [SPLIT - 1][128][MMA_N / 2] floats
  const unsigned sums = partials + (SPLIT - 1) * 128 * (MMA_N / 2) * 4;  // [SPLIT][MMA_N] floats: sums of squares
  const unsigned gamma = sums + SPLIT * MMA_N * 4;                       // the prologue: gamma from slice `first`
  const unsigned gammaFull = gamma + kGemvWgmmaGammaBytes<K, BK, SPLIT, Pro::kGammaBytes> - 16; // its barrier
  const unsigned bestKeys = gamma + kGemvWgmmaGammaBytes<K, BK, SPLIT, Pro::kGammaBytes>; // EpiArgmax: [MMA_N]
  auto sharedAt = [&](unsigned addr) { return gemvWgmmaShared + (addr - smemAddress(gemvWgmmaShared)); };
  unsigned long long *blockBest = reinterpret_cast<unsigned long long *>(sharedAt(bestKeys)); // the block's best key a row

  const unsigned rank = SPLIT > 1 ? clusterRank() : 0;
  const int row0 = static_cast<int>(blockIdx.x / SPLIT) * 64; // this block's 64 rows of W
  const int first = static_cast<int>(rank) * kPerRank;        // its share of K's slices
  const int count = kSlices - first < kPerRank ? kSlices - first : kPerRank;
  const int M = p.rows, groups = (M + MMA_N - 1) / MMA_N;

  if (threadIdx.x == 0) {
    prefetchTensorMap(&mapW);
    prefetchTensorMap(&mapA);
    for (int s = 0; s < STAGES; ++s) {
      mbarInit(full + 8 * s, 1);  // the producer's arrive, plus the slot's bytes
      mbarInit(empty + 8 * s, 4); // one arrive per consumer warp
    }
    if constexpr (Pro::kGammaBytes > 0) mbarInit(gammaFull, 1);
    mbarInitFence();
  }
  if constexpr (SPLIT > 1) clusterArriveRelaxed(); // this block has started; waited for before the first hand-over
  __syncthreads();
  gridDependencyTrigger();

  if (threadIdx.x >= 128) {
    // Producer: one thread issues every copy, the slots in the order the consumers take them: for each
    // group of MMA_N rows of A, this rank's slices of K. Slot i's fill is item i of that sequence.
    const bool issues = threadIdx.x == 128;
    auto load = [&](int item, bool w, bool a) {
      const int slot = item % STAGES, slice = first + item % count, y = (item / count) * MMA_N;
      const unsigned at = ring + slot * kSlot, bar = full + 8 * slot;
      for (int b = 0; b < kBoxes; ++b) {
        if (w) tmaLoad2d(at + b * kBoxW, &mapW, slice * BK + 64 * b, row0, bar);
        if (a) tmaLoad2d(at + kSlotW + b * kBoxA, &mapA, slice * BK + 64 * b, y, bar);
      }
    };
    // The first group's first slots; none without rows (no copy may be left in flight when the block exits).
    const int early = groups == 0 ? 0 : count < STAGES ? count : STAGES;
    if (issues) {
      if constexpr (Pro::kGammaBytes > 0)
        if (groups > 0) { // gamma up to K's end (TMA-style zeros are not needed: nothing reads past K)
          const int begin = first * BK, end = (first + count) * BK < K ? (first + count) * BK : K;
          const unsigned bytes = static_cast<unsigned>((end - begin) * Pro::kGammaBytes);
          mbarArriveExpectTx(gammaFull, bytes);
          bulkLoad(gamma, static_cast<const char *>(p.epi.gamma) + begin * Pro::kGammaBytes, bytes, gammaFull);
        }
      for (int i = 0; i < early; ++i) { // W first: it does not depend on the kernel before this one
        mbarArriveExpectTx(full + 8 * i, kSlot);
        load(i, true, false);
      }
      // The bias (Qwen2's qkv) and the argmax keys, which no kernel of this step has touched, into L2, each line
      // once over the grid's producers (gamma has its bulk copy above: ProNone).
      gemv_detail::prefetchSmallWeightsL2<N, K, ProNone>(p.epi, static_cast<int>(blockIdx.x), static_cast<int>(gridDim.x));
      gridDependencyWait(); // A is that kernel's output
      for (int i = 0; i < early; ++i) load(i, false, true);
    }
    for (int group = 0; group < groups; ++group) {
      if (issues)
        for (int item = group * count + (group == 0 ? early : 0); item < (group + 1) * count; ++item) {
          const int slot = item % STAGES;
          mbarWait(empty + 8 * slot, ((item / STAGES) & 1) ^ 1); // the first pass finds every slot free
          mbarArriveExpectTx(full + 8 * slot, kSlot);
          load(item, true, true);
        }
      __syncwarp();
      // Every thread of the cluster takes part in its barrier phases: the producer warp follows the
      // consumers' sequence below, after issuing the group (their wait for it needs its slots filled).
      if constexpr (SPLIT > 1) {
        clusterWait();
        clusterArrive();
        clusterWait();
        if (group + 1 < groups) clusterArrive();
      }
    }
    return;
  }

  // The consumer warpgroup: warp w holds W rows row0 + 16 w .. + 15 of the tile (hopper.cuh's layout).
  gridDependencyWait(); // the epilogue reads the kernel before this one's outputs (a residual, positions)
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // What the first group's stores read, asked for under its main loop: after it they were two trips to
  // memory on the kernel's chain, mostly to DRAM (a decode step streams every layer's W through L2 between a
  // layer's reads of positions and of the rotation table). The residual's elements and a qkv epilogue's rows
  // and biases now; the rows' rotations, which wait for the rows, halfway through the loop (`rotationsAt`),
  // so that no wgmma waits for them. Later groups (M past MMA_N) load theirs before their stores.
  gemv_detail::FragmentLoads<Epi> loads[MMA_N / 8];
  const int firstRows = M < MMA_N ? M : MMA_N, rotationsAt = count / 2;
  if (groups > 0 && rank == 0) gemv_detail::loadFragmentRowsT<N, Epi>(loads, row0 + 16 * warp, 0, firstRows, p.epi);
  // The norm prologue: thread t takes 16-byte chunk position t % 8 of row t / 8 in each A box.
  const int proRow = threadIdx.x / 8, proChunk = threadIdx.x % 8;
  if constexpr (Pro::kGammaBytes > 0)
    if (groups > 0) mbarWait(gammaFull, 0);
  int item = 0;
  for (int group = 0; group < groups; ++group) {
    float acc[MMA_N / 2];
#pragma unroll
    for (int e = 0; e < MMA_N / 2; ++e) acc[e] = 0.f;
    float squares = 0.f; // the prologue: this thread's part of its row's sum of squares
    int previous = -1;   // the slot whose wgmmas may still run
#pragma unroll 1
    for (int i = 0; i < count; ++i, ++item) {
      const int slot = item % STAGES;
      const unsigned w = ring + slot * kSlot, a = w + kSlotW;
      if constexpr (gemv_detail::RowLoadingEpilogue<Epi>)
        if (group == 0 && i == rotationsAt && rank == 0)
          gemv_detail::loadFragmentRotationsT<N, Epi>(loads, row0 + 16 * warp, firstRows, p.epi);
      mbarWait(full + 8 * slot, (item / STAGES) & 1);
      if constexpr (Pro::kGammaBytes > 0) {
        // With the 128-byte swizzle, chunk position c of row r holds the row's chunk c ^ (r % 8).
#pragma unroll
        for (int b = 0; b < kBoxes; ++b) {
          const int k = i * BK + 64 * b + 8 * (proChunk ^ (proRow % 8)); // from slice `first` on
          if (proRow >= MMA_N || first * BK + k >= K) continue;           // past K: zeros, as TMA filled them
          float g[8];
          Pro::gamma8(g, sharedAt(gamma + k * Pro::kGammaBytes));
          uint4 *chunk = reinterpret_cast<uint4 *>(sharedAt(a + b * kBoxA + proRow * 128 + proChunk * 16));
          uint4 raw = *chunk;
          __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&raw);
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const float2 x = __bfloat1622float2(h[e]);
            squares += x.x * x.x + x.y * x.y;
            h[e] = __floats2bfloat162_rn(x.x * g[2 * e], x.y * g[2 * e + 1]);
          }
          *chunk = raw;
        }
        fenceProxyAsyncShared(); // the consumers' wgmmas read what every one of them wrote
        namedBarrierSync(1, 128);
      }
      wgmmaFenceOperands(acc);
      wgmmaFence();
#pragma unroll
      for (int b = 0; b < kBoxes; ++b)
#pragma unroll
        for (int k = 0; k < 4; ++k)
          Wgmma<MMA_N>::mma(acc, wgmmaDescriptor(w + b * kBoxW + 32 * k), wgmmaDescriptor(a + b * kBoxA + 32 * k), 1);
      wgmmaCommit();
      if constexpr (Pro::kActive && Pro::kGammaBytes == 0) {
        // Unit gains (gamma rides in W): the prologue only adds up the rows' squares, reading the A boxes
        // while the wgmmas read them too, so the slot's products need no write, fence or barrier first.
#pragma unroll
        for (int b = 0; b < kBoxes; ++b) {
          if (proRow >= MMA_N) continue; // past K: TMA's zeros add nothing
          const uint4 raw = *reinterpret_cast<const uint4 *>(sharedAt(a + b * kBoxA + proRow * 128 + proChunk * 16));
          const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&raw);
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const float2 x = __bfloat1622float2(h[e]);
            squares += x.x * x.x + x.y * x.y;
          }
        }
      }
      wgmmaFenceOperands(acc);
      // The group before this one has finished: its slot may be refilled while this one runs.
      wgmmaWait<1>();
      if (previous >= 0 && lane == 0) mbarArrive(empty + 8 * previous);
      previous = slot;
    }
    wgmmaWait<0>();
    wgmmaFenceOperands(acc);
    if (lane == 0) mbarArrive(empty + 8 * previous);
    // The prologue: a row's 8 threads are neighbouring lanes; one writes the row's sum of squares to this
    // rank's place in `sums` in rank 0's shared memory (under a split, in the hand-over's phase below).
    // `scale` then takes 1 / rms of the rows this thread's accumulators belong to (columns 8 j + 2 t and
    // + 1 of C^T), the ranks' sums added in rank order, before anyone may overwrite `sums` for the next group.
    float scale[MMA_N / 8][2];
    auto writeSquares = [&] {
      if (!Pro::kActive || proChunk != 0 || proRow >= MMA_N) return;
      const unsigned at = sums + (rank * MMA_N + proRow) * 4;
      if (rank == 0) *reinterpret_cast<float *>(sharedAt(at)) = squares;
      else clusterStore1(clusterMapShared(at, 0), squares);
    };
    auto readScale = [&] {
      const float *rankSums = reinterpret_cast<const float *>(sharedAt(sums));
#pragma unroll
      for (int j = 0; j < MMA_N / 8; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int r = 8 * j + 2 * (lane % 4) + e;
          float total = 0.f;
#pragma unroll
          for (int q = 0; q < SPLIT; ++q) total += rankSums[q * MMA_N + r];
          scale[j][e] = rsqrtf(total * (1.f / K) + p.epi.eps);
        }
    };
    if constexpr (Pro::kActive) {
      squares += __shfl_xor_sync(0xffffffffu, squares, 1);
      squares += __shfl_xor_sync(0xffffffffu, squares, 2);
      squares += __shfl_xor_sync(0xffffffffu, squares, 4);
      if constexpr (SPLIT == 1) {
        writeSquares();
        namedBarrierSync(1, 128);
        readScale();
      }
    }

    if constexpr (SPLIT > 1) {
      // Ranks 1.. hand their partial products (and sums of squares) to rank 0, whose shared memory exists
      // (the first phase) and is free (the phase rank 0 arrives on once it has read the previous group's).
      clusterWait();
      writeSquares();
      if (rank > 0) {
        const unsigned slotAddr = partials + ((rank - 1) * 128 + threadIdx.x) * (MMA_N / 2) * 4;
        const unsigned remote = clusterMapShared(slotAddr, 0);
#pragma unroll
        for (int e = 0; e < MMA_N / 2; e += 4) clusterStore4(remote + 4 * e, acc[e], acc[e + 1], acc[e + 2], acc[e + 3]);
      }
      clusterArrive();
      clusterWait();
      if (rank == 0) {
        const float *in = reinterpret_cast<const float *>(sharedAt(partials));
        for (int r = 0; r < SPLIT - 1; ++r)
#pragma unroll
          for (int e = 0; e < MMA_N / 2; ++e) acc[e] += in[(r * 128 + threadIdx.x) * (MMA_N / 2) + e];
        if constexpr (Pro::kActive) readScale();
      }
      if (group + 1 < groups) clusterArrive(); // rank 0 has read the partials (the others: nothing to wait for)
      if (rank > 0) continue;
    }
    const int m0 = group * MMA_N, rows = M - m0 < MMA_N ? M - m0 : MMA_N;
    // Greedy decode (a non-null epi.argmax; uniform over the block): the block's best key per row of A,
    // reduced in shared memory from each warp's fragments, then one atomicMax a block and row.
    const bool argmax = Epi::kArgmax && p.epi.argmax;
    if (argmax) {
      if (threadIdx.x < MMA_N) blockBest[threadIdx.x] = 0;
      namedBarrierSync(1, 128);
    }
    // What the stores read, all loaded before the first store (the first group's: above).
    if (group > 0) gemv_detail::loadFragmentsT<N, Epi>(loads, row0 + 16 * warp, m0, rows, p.epi);
#pragma unroll
    for (int j = 0; j < MMA_N / 8; ++j) {
      float v[4] = {acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]};
      if constexpr (Pro::kActive)
#pragma unroll
        for (int e = 0; e < 4; ++e) v[e] *= scale[j][e % 2];
      gemv_detail::storeFragmentT<N, Epi>(p.C, v, row0 + 16 * warp, m0, 8 * j, rows, p.epi, loads[j]);
      if (argmax) gemv_detail::argmaxFragmentT<N>(v, row0 + 16 * warp, 0, 8 * j, rows, blockBest);
    }
    if (argmax) {
      namedBarrierSync(1, 128); // every warp's best is in
      // Keys only grow within a step: where the row's key already holds a larger one (read plainly, perhaps
      // stale, so never too large), this block's cannot win and its atomic is skipped.
      if (threadIdx.x < rows) {
        unsigned long long *key = p.epi.argmax + m0 + threadIdx.x;
        const unsigned long long best = blockBest[threadIdx.x];
        if (best > *reinterpret_cast<volatile unsigned long long *>(key)) atomicMax(key, best);
      }
      namedBarrierSync(1, 128); // blockBest is read before the next group resets it
    }
  }
}

} // namespace minfer
