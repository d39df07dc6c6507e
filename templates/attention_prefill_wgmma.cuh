// templates/attention_prefill_wgmma.cuh — causal flash attention for prefill on Hopper (sm_90a): the same
// contract as attention_prefill.cuh (one launch per sequence, AttentionPrefillParams, query row i at
// position start_pos + i seeing cache positions 0 .. start_pos + i), with TMA loads and wgmma.
//
// Structure (hopper.cuh has the primitives and the shared-memory layout):
//   * a block owns BLOCK_M = 64 * CONSUMERS query rows of one head (grid (HEADS, ceil(rows / BLOCK_M)), the
//     row tiles that see the most keys first); it is one producer warpgroup and CONSUMERS consumer
//     warpgroups, each of which owns 64 rows;
//   * one producer thread loads the block's Q tile once, then walks key tiles of BLOCK_N keys through a
//     STAGES-deep ring: per slot a TMA box of K and one of V (each CHUNKS boxes of 64 head-dim columns,
//     128-byte swizzle), with a full and an empty barrier for K and for V apart, so the scores of a tile
//     can start before its V has landed;
//   * a consumer, per key tile: S = Q K^T with m64nBLOCK_Nk16 wgmmas from shared memory (Q and K both
//     K-major); the mask and the online softmax on the accumulators in registers (attn::RowState, the same
//     code as the mma.sync kernel: an 8-column slice of a wgmma accumulator is an mma.sync C fragment);
//     then O += P V with P as wgmma's register A operand (the C fragments of two 8-key slices are the A
//     fragment of 16 keys) and V N-major from shared memory (imm-trans-b). The scores of the next tile and
//     P V of this one are issued together, so the next softmax runs while P V does, and the consumers (two,
//     or three at head dim 64) take turns to issue, so one's softmax runs while another's products do
//     (FlashAttention-3);
//   * head dims 64 .. 128 in steps of 16: the head dim is padded to CHUNKS * 64 columns. Q's padding
//     columns are zeroed in shared memory after they land (TMA brings the next head's values there, or
//     zeros past the row), so K's padding columns, whatever they hold, add nothing to S; V's padding columns
//     only reach output columns that are never stored;
//   * tails: the tensor maps carry the true extents (q: rows; k and v: start_pos + rows positions), so TMA
//     fills rows and positions past them with zeros; keys past a row's position are masked to -inf, so
//     their P is 0 and the finite values V holds there add nothing.
//
// Kernel arguments: AttentionPrefillParams p, then the tensor maps of q [rows, HEADS * HEAD_DIM] (box 64 x
// BLOCK_M), k_cache and v_cache [start_pos + rows, KV_HEADS * HEAD_DIM] (box 64 x BLOCK_N), encoded by the
// launcher (compiler/kernels/Attention.h, AttentionPrefillSpec::tensorMaps). Launch: grid
// (HEADS, ceil(rows / BLOCK_M)), block 128 * (CONSUMERS + 1), dynamic shared memory
// attn::prefillWgmmaSmemBytes(HEAD_DIM, BLOCK_M, BLOCK_N, STAGES).
#pragma once

#include "attention_prefill.cuh"
#include "hopper.cuh"

namespace minfer {
namespace attn {

// 64-column boxes (128 bytes of bf16: one swizzle row) that hold a head.
__host__ __device__ constexpr int wgmmaChunks(int headDim) { return (headDim + 63) / 64; }

// Dynamic shared memory of attentionPrefillWgmma: the Q tile, STAGES K and V tiles, their barriers (Q's,
// and a full and an empty one per slot for each of K and V), and 1 KB to align the tiles to 1024 bytes.
__host__ __device__ constexpr int prefillWgmmaSmemBytes(int headDim, int blockM, int blockN, int stages) {
  return wgmmaChunks(headDim) * 128 * (blockM + 2 * stages * blockN) + (1 + 4 * stages) * 8 + 1024;
}

} // namespace attn

template <int HEADS, int KV_HEADS, int HEAD_DIM, int CONSUMERS, int BLOCK_N, int STAGES>
__global__ void __launch_bounds__(128 * (CONSUMERS + 1), 1)
    attentionPrefillWgmma(const __grid_constant__ AttentionPrefillParams p, const __grid_constant__ TensorMap mapQ,
                          const __grid_constant__ TensorMap mapK, const __grid_constant__ TensorMap mapV) {
  static_assert(HEADS > 0 && KV_HEADS > 0 && HEADS % KV_HEADS == 0, "HEADS must be a multiple of KV_HEADS (GQA)");
  static_assert(HEAD_DIM % 16 == 0 && HEAD_DIM >= 64 && HEAD_DIM <= 128,
                "attentionPrefillWgmma: HEAD_DIM must be a multiple of 16 in 64..128");
  static_assert(CONSUMERS >= 1 && CONSUMERS <= 3, "attentionPrefillWgmma: one to three consumer warpgroups");
  static_assert(CONSUMERS < 3 || HEAD_DIM <= 64,
                "attentionPrefillWgmma: three consumers have 128 registers a thread, which spill above head dim 64");
  static_assert(BLOCK_N == 64 || BLOCK_N == 128, "attentionPrefillWgmma: BLOCK_N must be 64 or 128 (a wgmma's N)");
  static_assert(STAGES >= 2, "attentionPrefillWgmma: at least two slots");
  constexpr int BLOCK_M = 64 * CONSUMERS, CHUNKS = attn::wgmmaChunks(HEAD_DIM), DP = 64 * CHUNKS;
  static_assert(attn::prefillWgmmaSmemBytes(HEAD_DIM, BLOCK_M, BLOCK_N, STAGES) <= 227 * 1024,
                "attentionPrefillWgmma: the tiles exceed the 227 KB of shared memory a block can have");
  constexpr int GROUP = HEADS / KV_HEADS, Q_DIM = HEADS * HEAD_DIM;
  constexpr unsigned kQChunk = BLOCK_M * 128, kKVChunk = BLOCK_N * 128, kKVSlot = CHUNKS * kKVChunk;
  constexpr float kLog2e = 1.4426950408889634f;
  requireDynamicShared(attn::prefillWgmmaSmemBytes(HEAD_DIM, BLOCK_M, BLOCK_N, STAGES));

  extern __shared__ __align__(1024) unsigned char attnShared[];
  const unsigned sQ = (smemAddress(attnShared) + 1023) & ~1023u; // [CHUNKS][BLOCK_M][64], swizzled
  const unsigned sK = sQ + CHUNKS * kQChunk;                     // [STAGES][CHUNKS][BLOCK_N][64]
  const unsigned sV = sK + STAGES * kKVSlot;                     // [STAGES][CHUNKS][BLOCK_N][64]
  const unsigned qFull = sV + STAGES * kKVSlot;                  // the Q tile has landed
  const unsigned kFull = qFull + 8, vFull = kFull + 8 * STAGES;  // [STAGES]: the slot's K / V has landed
  const unsigned kEmpty = vFull + 8 * STAGES, vEmpty = kEmpty + 8 * STAGES; // [STAGES]: it may refill

  const int wg = threadIdx.x / 128, lane = threadIdx.x % 32;
  const int rows = p.rows, start = p.start_pos;
  // Blocks start in the order of their linear index, heads fastest: every head's last row tile (it sees the
  // most keys) starts before any head's next-to-last one, and so on, so the shortest tiles fill the tail of
  // the grid (longest first over the whole grid; with the row tile as x, each head's short tiles started
  // among the long ones and the last long ones ran alone at the end).
  const int m0 = (gridDim.y - 1 - blockIdx.y) * BLOCK_M;
  const int head = blockIdx.x, kvHead = head / GROUP;
  const int kvEnd = start + min(m0 + BLOCK_M, rows); // keys 0 .. kvEnd - 1 are visible to some row
  const int numTiles = (kvEnd + BLOCK_N - 1) / BLOCK_N;

  if (threadIdx.x == 0) {
    prefetchTensorMap(&mapQ);
    prefetchTensorMap(&mapK);
    prefetchTensorMap(&mapV);
    mbarInit(qFull, 1);
    for (int s = 0; s < STAGES; ++s) {
      mbarInit(kFull + 8 * s, 1); // the producer's arrive, plus the box bytes
      mbarInit(vFull + 8 * s, 1);
      mbarInit(kEmpty + 8 * s, 4 * CONSUMERS); // one arrive per consumer warp
      mbarInit(vEmpty + 8 * s, 4 * CONSUMERS);
    }
    mbarInitFence();
  }
  __syncthreads();
  gridDependencyWait(); // q and the cache rows are the previous kernel's output

  if (wg == 0) {
    // Producer: one thread issues every copy; the rest of the warpgroup only gives its registers back (to
    // the consumers: 384 threads share 64K registers as 40 + 2 x 232 a thread, 512 as 24 + 3 x 160).
    if constexpr (CONSUMERS == 2) setMaxRegistersDec<40>();
    if constexpr (CONSUMERS == 3) setMaxRegistersDec<24>();
    if (threadIdx.x == 0) {
      mbarArriveExpectTx(qFull, CHUNKS * kQChunk);
      for (int c = 0; c < CHUNKS; ++c) tmaLoad2d(sQ + c * kQChunk, &mapQ, head * HEAD_DIM + 64 * c, m0, qFull);
      for (int t = 0; t < numTiles; ++t) {
        const int slot = t % STAGES;
        const unsigned phase = (t / STAGES) & 1;
        mbarWait(kEmpty + 8 * slot, phase ^ 1); // the first pass through the ring finds every slot free
        mbarArriveExpectTx(kFull + 8 * slot, kKVSlot);
        for (int c = 0; c < CHUNKS; ++c)
          tmaLoad2d(sK + slot * kKVSlot + c * kKVChunk, &mapK, kvHead * HEAD_DIM + 64 * c, t * BLOCK_N, kFull + 8 * slot);
        mbarWait(vEmpty + 8 * slot, phase ^ 1);
        mbarArriveExpectTx(vFull + 8 * slot, kKVSlot);
        for (int c = 0; c < CHUNKS; ++c)
          tmaLoad2d(sV + slot * kKVSlot + c * kKVChunk, &mapV, kvHead * HEAD_DIM + 64 * c, t * BLOCK_N, vFull + 8 * slot);
      }
    }
    return;
  }

  // Consumers: warpgroup c = wg - 1 owns rows r0 .. r0 + 63 of the block.
  if constexpr (CONSUMERS == 2) setMaxRegistersInc<232>();
  if constexpr (CONSUMERS == 3) setMaxRegistersInc<160>();
  const int c = wg - 1, warp = (threadIdx.x / 32) % 4, g = lane / 4, t4 = lane % 4;
  const int r0 = m0 + 64 * c, warpRow0 = r0 + 16 * warp;
  // The last key any valid row of this warpgroup sees; tiles after it are masked for all its rows. A
  // warpgroup past the last row computes nothing but still takes part in the ring (it waits for every
  // slot and releases it), so the barriers' counts hold.
  const bool active = r0 < rows;
  const int lastKey = start + min(r0 + 63, rows - 1);
  const float scaleLog2 = p.scale * kLog2e;
  const unsigned qTile = sQ + c * 64 * 128; // this warpgroup's 64 rows of each Q chunk

  mbarWait(qFull, 0);
  if constexpr (HEAD_DIM < DP) {
    // Zero Q's padding columns (HEAD_DIM .. DP - 1, in the last chunk) of this warpgroup's rows: 16-byte
    // pieces, each at its swizzled place (piece j of row r sits at j ^ (r % 8)).
    constexpr int kFirst = (HEAD_DIM % 64) / 8, kPieces = 8 - kFirst;
    const unsigned last = qTile + (CHUNKS - 1) * kQChunk;
    for (int i = threadIdx.x % 128; i < 64 * kPieces; i += 128) {
      const int r = i / kPieces, j = kFirst + i % kPieces;
      asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(last + r * 128 + ((j ^ (r % 8)) * 16)), "r"(0)
                   : "memory");
    }
    // The writes, by the generic proxy, must be visible to wgmma (the async proxy) of the whole warpgroup.
    fenceProxyAsyncShared();
    namedBarrierSync(1 + c, 128);
  }

  attn::RowState<DP> st;
  st.init();
  float(&o)[DP / 2] = reinterpret_cast<float(&)[DP / 2]>(st.o);

  // The ring, slot by slot: wait until a tile's K (V) has landed, release it once this warp is done with it.
  auto waitK = [&](int t) { mbarWait(kFull + 8 * (t % STAGES), (t / STAGES) & 1); };
  auto waitV = [&](int t) { mbarWait(vFull + 8 * (t % STAGES), (t / STAGES) & 1); };
  auto releaseK = [&](int t) {
    if (lane == 0) mbarArrive(kEmpty + 8 * (t % STAGES));
  };
  auto releaseV = [&](int t) {
    if (lane == 0) mbarArrive(vEmpty + 8 * (t % STAGES));
  };
  // S = Q K_t^T, issued (asynchronous; the caller commits and waits).
  auto issueScores = [&](float(&sc)[BLOCK_N / 8][4], int t) {
    float(&flat)[BLOCK_N / 2] = reinterpret_cast<float(&)[BLOCK_N / 2]>(sc);
    wgmmaFence();
#pragma unroll
    for (int ch = 0; ch < CHUNKS; ++ch)
#pragma unroll
      for (int k = 0; k < 4; ++k)
        Wgmma<BLOCK_N>::mma(flat, wgmmaDescriptor(qTile + ch * kQChunk + 32 * k),
                            wgmmaDescriptor(sK + (t % STAGES) * kKVSlot + ch * kKVChunk + 32 * k), ch > 0 || k > 0);
  };
  // O += P V_t, issued.
  auto issuePV = [&](const unsigned(&pa)[BLOCK_N / 16][4], int t) {
    wgmmaFenceOperands(o);
    wgmmaFence();
#pragma unroll
    for (int kk = 0; kk < BLOCK_N / 16; ++kk)
      WgmmaRegA<DP>::mma(o, pa[kk], wgmmaDescriptorMN(sV + (t % STAGES) * kKVSlot + kk * 2048, kKVChunk));
  };
  // Tile t's scores masked where the tile crosses this warp's diagonal, then folded into the running max and
  // sum (scaled to log2 units on the way); P stays in `sc` (packP), `corr` rescales the output.
  auto softmax = [&](float(&sc)[BLOCK_N / 8][4], int t, float(&corr)[2]) {
    const int tileStart = t * BLOCK_N;
    // Mask only where the tile reaches past the warp's first row's position (the diagonal tiles); keys
    // past kvEnd are past every row's position, so this also covers the zero-filled tail. Two copies of the
    // softmax, one behind the mask: with the mask under `if (diagonal)` alone the compiler predicated it
    // and ran its compare and select on every score of every tile (ncu, head dim 64, 2048 tokens: 4.8M of
    // the kernel's 27M instructions), though only one tile in ~8 a warp is diagonal.
    if (tileStart + BLOCK_N - 1 > start + warpRow0) {
#pragma unroll
      for (int j = 0; j < BLOCK_N / 8; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = tileStart + j * 8 + 2 * t4 + (e & 1);
          const int row = warpRow0 + g + (e >> 1) * 8;
          if (key > start + row) sc[j][e] = attn::negInf();
        }
      }
      st.template softmaxScores<BLOCK_N>(sc, corr, scaleLog2);
    } else {
      st.template softmaxScores<BLOCK_N>(sc, corr, scaleLog2);
    }
  };
  auto packP = [&](const float(&sc)[BLOCK_N / 8][4], unsigned(&pa)[BLOCK_N / 16][4]) {
#pragma unroll
    for (int kk = 0; kk < BLOCK_N / 16; ++kk) {
      pa[kk][0] = attn::packBf16(sc[2 * kk][0], sc[2 * kk][1]);
      pa[kk][1] = attn::packBf16(sc[2 * kk][2], sc[2 * kk][3]);
      pa[kk][2] = attn::packBf16(sc[2 * kk + 1][0], sc[2 * kk + 1][1]);
      pa[kk][3] = attn::packBf16(sc[2 * kk + 1][2], sc[2 * kk + 1][3]);
    }
  };

  // Ping-pong between the consumers (FlashAttention-3), in turn: named barrier kTurn + c is warpgroup c's turn
  // to issue wgmmas; after issuing, it hands the turn to the next (c + 1, the last to the first), so one's
  // softmax runs while the others' matrix products do. Only while every consumer has rows: then all walk all
  // of the block's tiles (an earlier warpgroup's part of the diagonal tiles past its rows is masked, P = 0),
  // so their turns line up.
  const bool pingpong = CONSUMERS > 1 && m0 + 64 * (CONSUMERS - 1) < rows;
  constexpr int kTurn = 1 + CONSUMERS; // after the padding's barriers 1 .. CONSUMERS
  int turnsLeft = 0; // this warpgroup's issue points still to come
  auto takeTurn = [&] {
    if (pingpong) asm volatile("bar.sync %0, 256;\n" ::"r"(kTurn + c) : "memory");
  };
  auto passTurn = [&] {
    // The last consumer's last issue hands nothing on: the first has already had its last turn.
    if (pingpong && !(c == CONSUMERS - 1 && --turnsLeft == 0))
      asm volatile("bar.arrive %0, 256;\n" ::"r"(kTurn + (c + 1) % CONSUMERS) : "memory");
  };

  // The tiles this warpgroup needs are a prefix: those up to its last row's position (with ping-pong, all
  // of the block's). The rest (the other warpgroup's diagonal) it only waits for and releases.
  const int needed = !active ? 0 : pingpong ? numTiles : min(numTiles, lastKey / BLOCK_N + 1);
  turnsLeft = needed + 1;
  if (pingpong && c == CONSUMERS - 1) asm volatile("bar.arrive %0, 256;\n" ::"r"(kTurn) : "memory"); // first goes first
  if (needed > 0) {
    // FlashAttention-3's pipelining within a warpgroup: tile t's scores are issued together with P_{t-1}
    // V_{t-1}, and the softmax of tile t runs on the CUDA cores while that P V runs on the tensor cores.
    // Once it has landed, the output is rescaled by tile t's correction and P_t is packed into the A
    // registers. Nothing a wgmma reads may be written while a group is in flight: packing P_t before the
    // wait made ptxas serialise every wgmma of the kernel.
    unsigned a[BLOCK_N / 16][4]; // P of the tile whose P V is next
    float corr[2];
    {
      float s[BLOCK_N / 8][4];
      waitK(0);
      takeTurn();
      issueScores(s, 0);
      wgmmaCommit();
      passTurn();
      wgmmaWait<0>();
      wgmmaFenceOperands(reinterpret_cast<float(&)[BLOCK_N / 2]>(s));
      releaseK(0);
      softmax(s, 0, corr); // o is still zero: nothing to rescale
      packP(s, a);
    }
#pragma unroll 1
    for (int t = 1; t < needed; ++t) {
      float s[BLOCK_N / 8][4];
      waitK(t);
      waitV(t - 1); // both before either is issued: nothing but wgmmas between the two groups
      takeTurn();
      issueScores(s, t);
      wgmmaCommit();
      issuePV(a, t - 1);
      wgmmaCommit();
      passTurn();
      wgmmaWait<1>(); // the scores of tile t are in; P_{t-1} V_{t-1} may still run
      wgmmaFenceOperands(reinterpret_cast<float(&)[BLOCK_N / 2]>(s));
      releaseK(t);
      softmax(s, t, corr);
      wgmmaWait<0>();
      wgmmaFenceOperands(o);
      wgmmaFenceOperands(a); // P_{t-1}'s registers stay until the wgmmas that read them have finished
      releaseV(t - 1);
      st.rescale(corr);
      packP(s, a);
      // The rescaled output and the new P are defined here, before the next tile's wgmmas start.
      wgmmaFenceOperands(o);
      wgmmaFenceOperands(a);
    }
    waitV(needed - 1);
    takeTurn();
    issuePV(a, needed - 1);
    wgmmaCommit();
    passTurn();
    wgmmaWait<0>();
    wgmmaFenceOperands(o);
    wgmmaFenceOperands(a);
    releaseV(needed - 1);
  }
  for (int t = needed; t < numTiles; ++t) {
    waitK(t);
    releaseK(t);
    waitV(t);
    releaseV(t);
  }

  if (!active) return;
  st.template storeRows<HEAD_DIM>(p.out + head * HEAD_DIM, Q_DIM, warpRow0, rows);
}

} // namespace minfer
