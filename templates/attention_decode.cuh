// templates/attention_decode.cuh — split-K flash decoding: one new query per sequence against its KV cache.
//
// Decode attention is bound by reading the cache (2 * ctx * KV_HEADS * HEAD_DIM * 2 bytes a sequence), so
// the design goal is reading every K/V byte once, with many loads in flight on every SM. attention_decode:
// grid (KV_HEADS, B, num_splits = ceil(max_seq / SPLIT_TOKENS)). A block takes one chunk of SPLIT_TOKENS
// positions of one kv head of one sequence and serves *all* GROUP = HEADS / KV_HEADS query heads that share
// it, so K/V come from HBM once per group. The group's query heads are the 16 rows of an mma tile (zero rows
// pad a group below 16; groups above 16 take ceil(GROUP / 16) passes whose re-reads hit L2), which turns
// decode into the prefill warp tile of attention_prefill.cuh: QK^T and PV on tensor cores, online softmax.
// The block's warps take the chunk's 16-key tiles round-robin; each warp streams its tiles through its own
// cp.async ring of STAGES slots (16-byte copies, no block barrier in the loop), keeps its own softmax state,
// and the warps merge through shared memory at the end.
//
// The chunks of one (sequence, kv head) meet in the kernel itself, with no second launch:
//  - a context of one chunk (up to SPLIT_TOKENS positions, or up to attn::kOneChunkTokens, which block 0
//    then takes whole): its block writes the bf16 output straight away;
//  - longer: each block writes its normalised partial output and log-sum-exp per query head (partial_out
//    [B, HEADS, num_splits, HEAD_DIM] fp32, partial_lse [B, HEADS, num_splits] fp32, log2 units) and counts
//    itself in arrivals[b * KV_HEADS + kv head]: after a block barrier, thread 0's acq_rel atomic add
//    releases the block's partials and acquires those of the blocks counted before it. The block that
//    arrives last (the count reaches the chunks the context has) sets the counter back to zero and merges
//    the group's heads: weights 2^(lse_s - max lse), warps over heads, lanes over columns and chunks,
//    reading the partials through L2 (__ldcg: an earlier block on this SM may hold older lines of them in L1).
// Blocks whose chunk starts at or past the sequence's context write nothing and exit (a context of 0: split 0
// writes zeros). The chunk index is the grid's slowest dimension, so every sequence's split 0 is dispatched
// before any split 1: at contexts shorter than the cache the working blocks take the SMs' slots first and
// the empty ones follow, instead of every other slot going to a block that only waits and exits. Folding the
// merge in saved the combine launch of every layer (session 17, bench/NOTES.md).
//
// At short contexts a block's life is a chain of latencies, not a stream of bytes (one block of each group
// works; ncu, session 25-26), so the chain is kept short: the block's chunk of K/V is asked into L2 before
// the wait for the kernel before (attn::kPrefetchL2Bytes); right after it, the query and split 0's first tile
// are asked for beside the context, not after it; and where the grid has at most one block an SM the host
// gives the block 8 warps (AttentionDecodeSpec::kFewBlocksThreads), one tile each at context 128.
// context_len[b] counts this step's token, which kv_write has already put into the cache: the query sits at
// position context_len[b] - 1 and sees positions 0 .. context_len[b] - 1, so no causal mask is needed.
#pragma once

#include "attention_prefill.cuh"

namespace minfer {

// The kernels' one argument; its host mirror (same field names and offsets, checked in every generated
// source) is in compiler/kernels/Attention.h.
struct AttentionDecodeParams {
  const bf16 *q;          // [batch, HEADS * HEAD_DIM]
  const bf16 *k_cache;    // [batch, max_seq, KV_HEADS * HEAD_DIM]
  const bf16 *v_cache;
  bf16 *out;              // [batch, HEADS * HEAD_DIM]
  float *partial_out;     // [batch, HEADS, splits, HEAD_DIM]
  float *partial_lse;     // [batch, HEADS, splits]
  unsigned *arrivals;     // [batch, KV_HEADS], zero at the start; the merging block leaves it zero
  const int *context_len; // [batch]
  int max_seq;
  float scale;
};

namespace attn {

// Keys per warp step: one 16-key tile (the mma k of PV, two n8 tiles of QK^T).
inline constexpr int kDecodeTile = 16;

// The most chunks a (sequence, kv head) has: the merging block stages their weights in shared memory, 1 KB a
// warp.
inline constexpr int kMaxSplits = 256;

// The longest context taken as one chunk whatever SPLIT_TOKENS (mirrored by AttentionDecodeSpec::kOneChunkTokens,
// which gives a cache no longer one chunk): one block then writes the output itself, with
// no partials and no merge (H200, session 17: TinyLlama's decode step at contexts 128-192, batch 1 0.917 ms
// with 128-position chunks and a combine launch, 0.874 as one chunk). Longer contexts keep SPLIT_TOKENS
// chunks: with chunks of 256 for every context, context 4000 took 1.035 ms against 0.976 (chunks of 128
// keep two tiles a warp, one trip for their loads).
inline constexpr int kOneChunkTokens = 256;

// Before its wait a block asks L2 for its chunk's K/V lines while the batch's cache of the layer (K and V of
// every context) is at most this many bytes: L2 then keeps them, and the trip after the wait is an L2 hit.
// Beyond it the prefetches evict each other and the lines the next kernels' blocks are streaming: Llama-3.2-1B
// at 16 rows of context 4000 (131 MB a layer) took 1.61 ms a step with them against 1.42 (session 25).
inline constexpr size_t kPrefetchL2Bytes = size_t(16) << 20;

// Shared memory of the merge: each warp's chunk weights.
__host__ __device__ constexpr int decodeMergeBytes(int threads) { return threads / 32 * kMaxSplits * 4; }

// cp.async ring depth of each warp: as many 16-key K+V tiles as fit a ~64 KB budget for the block, between 2
// and 4. With 4 warps that is 2 stages at head dim 128 (68 KB) and 3 at 64 (54 KB); either way 2-3 blocks
// fit an SM and keep 100+ KB of copies in flight, well past what HBM latency x bandwidth needs (~25-35 KB
// per SM on H100/H200).
__host__ __device__ constexpr int decodeStages(int headDim, int warps, int budget = 65536) {
  const int perStage = warps * 2 * kDecodeTile * smemStride(paddedHeadDim(headDim)) * 2;
  const int s = budget / perStage;
  return s < 2 ? 2 : (s > 4 ? 4 : s);
}

// Shared memory of attention_decode in bytes: the warps' rings, reused after the loop for the merge of the
// warps (per warp: 16 rows x padded head dim of O, plus m and l of 16 rows, fp32), then of the chunks.
__host__ __device__ constexpr int decodeSmemBytes(int headDim, int threads, int budget = 65536) {
  const int warps = threads / 32;
  const int ring = warps * decodeStages(headDim, warps, budget) * 2 * kDecodeTile * smemStride(paddedHeadDim(headDim)) * 2;
  const int warpsMerge = warps * 16 * (paddedHeadDim(headDim) + 2) * 4;
  const int most = ring > warpsMerge ? ring : warpsMerge;
  return most > decodeMergeBytes(threads) ? most : decodeMergeBytes(threads);
}

// The end of a chunk's block when its context has several (the file's head): counts the block in; the last
// one in merges every chunk of the group's heads into outGroup. The whole block calls it, after writing its
// partials; `smem` is the block's dynamic shared memory, free again.
template <int HEADS, int KV_HEADS, int HEAD_DIM, int THREADS>
__device__ __forceinline__ void mergeChunks(const AttentionDecodeParams &p, int b, int kvHead, int numSplits, int chunks,
                                            bf16 *outGroup, unsigned char *smem) {
  constexpr int GROUP = HEADS / KV_HEADS, NW = THREADS / kWarpSize;
  constexpr int VECS = HEAD_DIM / 4;      // float4 columns of a head's row (2..32)
  constexpr int LANES = kWarpSize / VECS; // chunks a warp reads side by side
  __shared__ int lastIn;
  blockSync(); // every thread's partials are written
  if (threadIdx.x == 0) {
    unsigned *arrived = p.arrivals + b * KV_HEADS + kvHead;
    const bool last = fetchAddAcqRelGpu(arrived, 1u) == static_cast<unsigned>(chunks) - 1;
    if (last) atomicExch(arrived, 0u); // every chunk has counted itself: zero for the next launch (or layer)
    lastIn = last;
  }
  blockSync(); // thread 0's acquire is ordered before every thread's reads below
  if (!lastIn) return;

  // Each warp merges heads warp, warp + NW, ...: for all of them it first asks for the first 32 chunks'
  // log-sum-exps (a lane each) and each lane group's first U chunks of partials, so one trip to L2 brings
  // what short contexts need; the sums, then the weighted partials, and further chunks after.
  constexpr int HPW = (GROUP + NW - 1) / NW; // heads a warp merges
  // Chunks a lane group holds a head: 8 while a warp has at most 2 heads (TinyLlama: a group of 8 on 4 warps,
  // 2 lane groups at head dim 64, so up to 16 chunks of each head in the first trip: context 2048 at chunks
  // of 128), 8 float4 in all for larger groups (more would cost an MQA kernel its fourth block an SM).
  constexpr int U = HPW <= 2 ? 8 : HPW >= 8 ? 1 : 2;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int vec = lane % VECS, grp = lane / VECS;
  float *weight = reinterpret_cast<float *>(smem) + warp * kMaxSplits; // this warp's, one per chunk
  auto baseOf = [&](int h) { return ((size_t)b * HEADS + kvHead * GROUP + h) * numSplits; };
  auto partial = [&](size_t base, int s) {
    return __ldcg(reinterpret_cast<const float4 *>(p.partial_out + (base + s) * HEAD_DIM) + vec);
  };
  float firstLse[HPW];
  float4 held[HPW][U];
#pragma unroll
  for (int j = 0; j < HPW; ++j) {
    const int h = warp + j * NW;
    const size_t base = baseOf(min(h, GROUP - 1));
    firstLse[j] = h < GROUP && lane < chunks ? __ldcg(p.partial_lse + base + lane) : negInf();
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int s = grp + u * LANES;
      held[j][u] = h < GROUP && grp < LANES && s < chunks ? partial(base, s) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  }
#pragma unroll
  for (int j = 0; j < HPW; ++j) {
    const int h = warp + j * NW;
    if (h >= GROUP) break;
    const size_t base = baseOf(h);
    float mx = firstLse[j];
    for (int s = lane + kWarpSize; s < chunks; s += kWarpSize) mx = fmaxf(mx, __ldcg(p.partial_lse + base + s));
    mx = warpMax(mx);
    float sum = 0.f;
    if (lane < chunks) {
      weight[lane] = exp2f(firstLse[j] - mx);
      sum = weight[lane];
    }
    for (int s = lane + kWarpSize; s < chunks; s += kWarpSize) {
      weight[s] = exp2f(__ldcg(p.partial_lse + base + s) - mx);
      sum += weight[s];
    }
    sum = warpSum(sum); // >= 1: the largest chunk weighs 2^0
    __syncwarp();       // every lane's weights are in
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    auto add = [&](const float4 &o, float w) {
      acc.x += w * o.x;
      acc.y += w * o.y;
      acc.z += w * o.z;
      acc.w += w * o.w;
    };
    if (grp < LANES) {
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (grp + u * LANES < chunks) add(held[j][u], weight[grp + u * LANES]);
#pragma unroll 8
      for (int s = grp + U * LANES; s < chunks; s += LANES) add(partial(base, s), weight[s]);
    }
#pragma unroll
    for (int g = 1; g < LANES; ++g) { // the lane groups' sums meet in group 0
      const int from = lane + g * VECS;
      const float x = __shfl_sync(0xffffffffu, acc.x, from), y = __shfl_sync(0xffffffffu, acc.y, from);
      const float z = __shfl_sync(0xffffffffu, acc.z, from), w = __shfl_sync(0xffffffffu, acc.w, from);
      if (grp == 0) add(make_float4(x, y, z, w), 1.f);
    }
    if (grp == 0) {
      const float inv = 1.f / sum;
      __nv_bfloat162 *dst = reinterpret_cast<__nv_bfloat162 *>(outGroup + h * HEAD_DIM + vec * 4);
      dst[0] = __floats2bfloat162_rn(acc.x * inv, acc.y * inv);
      dst[1] = __floats2bfloat162_rn(acc.z * inv, acc.w * inv);
    }
    __syncwarp(); // the weights are read before the warp's next head writes them
  }
}

} // namespace attn

// q:            [B, HEADS * HEAD_DIM] bf16, this step's query of each sequence
// k_cache:      [B, max_seq, KV_HEADS * HEAD_DIM] bf16; positions < context_len[b] are valid
// v_cache:      [B, max_seq, KV_HEADS * HEAD_DIM] bf16, likewise
// out:          [B, HEADS * HEAD_DIM] bf16
// partial_out:  [B, HEADS, num_splits, HEAD_DIM] fp32 workspace (num_splits = gridDim.x)
// partial_lse:  [B, HEADS, num_splits] fp32 workspace
// arrivals:     [B, KV_HEADS] u32 workspace, zero at the start and at the end
// context_len:  [B] int, including this step's token
// Grid (KV_HEADS, B, ceil(max_seq / SPLIT_TOKENS)), block THREADS, dynamic shared memory
// attn::decodeSmemBytes(HEAD_DIM, THREADS) (the kernel traps when given less).
// The step's query is read through the read-only path (loadProduced): with the pointers in a struct,
// __restrict__ no longer lets the compiler prove it (griddepcontrol.wait clobbers memory). context_len is read
// with strong loads, once before the wait (a hint for the L2 prefetch) and once after.
// The body: the block at `tile`, waiting through `wait`.
template <int HEADS, int KV_HEADS, int HEAD_DIM, int SPLIT_TOKENS, int THREADS, int SMEM_BUDGET, class Wait>
__device__ __forceinline__ void attentionDecodeTile(const AttentionDecodeParams &p, const Tile &tile, const Wait &wait) {
  const bf16 *__restrict__ q = p.q;
  const bf16 *__restrict__ k_cache = p.k_cache;
  const bf16 *__restrict__ v_cache = p.v_cache;
  bf16 *__restrict__ out = p.out;
  float *__restrict__ partial_out = p.partial_out;
  float *__restrict__ partial_lse = p.partial_lse;
  const int *__restrict__ context_len = p.context_len;
  const int max_seq = p.max_seq;
  const float scale = p.scale;
  static_assert(HEADS > 0 && KV_HEADS > 0 && HEADS % KV_HEADS == 0, "HEADS must be a multiple of KV_HEADS (GQA)");
  static_assert(HEAD_DIM % 8 == 0 && HEAD_DIM >= 8, "HEAD_DIM must be a multiple of 8 (16-byte rows)");
  static_assert(HEAD_DIM <= 128, "HEAD_DIM above 128: the fp32 output tile (HEAD_DIM/2 registers a thread) would spill");
  static_assert(THREADS % kWarpSize == 0 && THREADS >= 32 && THREADS <= 512, "THREADS: 1 to 16 whole warps");
  static_assert(SPLIT_TOKENS % attn::kDecodeTile == 0 && SPLIT_TOKENS > 0, "SPLIT_TOKENS must be a multiple of 16");

  constexpr int NW = THREADS / kWarpSize;
  constexpr int TILE = attn::kDecodeTile;
  constexpr int HDP = attn::paddedHeadDim(HEAD_DIM);
  constexpr int LDS = attn::smemStride(HDP);
  constexpr int STAGES = attn::decodeStages(HEAD_DIM, NW, SMEM_BUDGET);
  constexpr int GROUP = HEADS / KV_HEADS;
  constexpr int PASSES = (GROUP + 15) / 16;
  constexpr int Q_DIM = HEADS * HEAD_DIM, KV_DIM = KV_HEADS * HEAD_DIM;
  constexpr int CHUNKS = HEAD_DIM / 8; // 16-byte chunks in one head's row
  constexpr float kLog2e = 1.4426950408889634f;

  extern __shared__ __align__(16) unsigned char smemRaw[];
  requireDynamicShared(attn::decodeSmemBytes(HEAD_DIM, THREADS, SMEM_BUDGET));

  // Everything up to the wait depends on the launch alone, so it overlaps the kernel before (programmatic
  // dependent launch): at short contexts the block's whole life is a chain of latencies (the wait, the context,
  // one trip for K/V and Q, two tiles a warp, the merge), and every instruction on it counts.
  const int kvHead = tile.x, b = tile.y, split = tile.z;
  const int numSplits = tile.nz;
  const int tid = threadIdx.x, warp = tid / kWarpSize, lane = tid % kWarpSize;
  const int g = lane / 4, t = lane % 4;
  const size_t seqBase = (size_t)b * max_seq * KV_DIM + kvHead * HEAD_DIM;
  const bf16 *kSeq = k_cache + seqBase, *vSeq = v_cache + seqBase;
  bf16 *outGroup = out + (size_t)b * Q_DIM + kvHead * GROUP * HEAD_DIM; // the group's heads, one after another

  // Warp w's ring: [STAGES][K, V][TILE][LDS].
  bf16 *ring = reinterpret_cast<bf16 *>(smemRaw) + warp * STAGES * 2 * TILE * LDS;
  constexpr unsigned kSlotBytes = 2 * TILE * LDS * sizeof(bf16);
  // After the loop the same bytes hold the merge: O [NW][16][HDP], then m [NW][16], then l [NW][16].
  float *mergeO = reinterpret_cast<float *>(smemRaw);
  float *mergeM = mergeO + NW * 16 * HDP;
  float *mergeL = mergeM + NW * 16;

  // A lane's copies of one tile (2 * TILE * CHUNKS 16-byte chunks, CHUNKS a lane). Where a row's chunks divide
  // the warp and a matrix's chunks fill it (head dims 16, 32, 64, 128) the lane keeps one column and steps down
  // the rows by a constant, so a copy is one add and one compare; other head dims take the general index
  // arithmetic.
  constexpr bool kLaneColumn = kWarpSize % CHUNKS == 0 && TILE * CHUNKS >= kWarpSize;
  constexpr int kRowStep = kLaneColumn ? kWarpSize / CHUNKS : 1; // rows between a lane's copies
  constexpr int kPerMatrix = kLaneColumn ? TILE / kRowStep : 1;   // a lane's copies of K (and of V) per tile
  const int laneRow = kLaneColumn ? lane / CHUNKS : 0;
  const int laneCol = kLaneColumn ? lane % CHUNKS : 0;
  const size_t laneOffset = (size_t)laneRow * KV_DIM + laneCol * 8;
  const bf16 *kLane = kSeq + laneOffset, *vLane = vSeq + laneOffset;
  const unsigned ringLane = smemAddress(ring) + (laneRow * LDS + laneCol * 8) * sizeof(bf16);

  // Query rows g and g + 8 of the tile (query heads kvHead*GROUP + pass*16 + row), from this lane's column.
  const bf16 *qGroup = q + (size_t)b * Q_DIM + kvHead * GROUP * HEAD_DIM + g * HEAD_DIM + 2 * t;
  // A context of up to attn::kOneChunkTokens positions is one chunk (block 0's), so it needs no merge.
  constexpr int kOneChunk = attn::kOneChunkTokens > SPLIT_TOKENS ? attn::kOneChunkTokens : SPLIT_TOKENS;
  auto spanOf = [](int context) { return context <= attn::kOneChunkTokens ? kOneChunk : SPLIT_TOKENS; };
  // The sequence's context, with a strong load: before the wait a hint (the kernel before may still advance
  // it); after it the value, which the read-only path might answer with the hint's (session 24's bug).
  auto readContext = [&] {
    return min(int(loadRelaxedGpu(reinterpret_cast<const unsigned *>(context_len + b))), max_seq);
  };

  // One tile (16 keys of K and of V) of the chunk from s0 into slot `slot`; keys at or past `end` are
  // zero-filled, never read (end: the chunk's s1; max_seq for the early tile below, which keeps the copies in
  // the cache while the context is not yet known).
  auto loadTile = [&](int i, int slot, int s0, int end) {
    const int first = s0 + (warp + i * NW) * TILE;
    if constexpr (kLaneColumn) {
      const unsigned dst = ringLane + slot * kSlotBytes;
      const size_t firstOff = (size_t)first * KV_DIM;
#pragma unroll
      for (int which = 0; which < 2; ++which) { // 0: K, 1: V
        const bf16 *src = (which ? vLane : kLane) + firstOff;
#pragma unroll
        for (int k = 0; k < kPerMatrix; ++k) {
          const int r = k * kRowStep; // rows below the lane's first, laneRow
          const bool valid = first + laneRow + r < end;
          cpAsync16(dst + ((which * TILE + r) * LDS) * sizeof(bf16), valid ? src + r * KV_DIM : kSeq, valid);
        }
      }
    } else {
      bf16 *dst = ring + slot * 2 * TILE * LDS;
      for (int c = lane; c < 2 * TILE * CHUNKS; c += kWarpSize) {
        const int which = c / (TILE * CHUNKS); // 0: K, 1: V
        const int r = (c / CHUNKS) % TILE, ch = c % CHUNKS, pos = first + r;
        const bool valid = pos < end;
        const bf16 *src = which ? vSeq : kSeq;
        cpAsync16(dst + (which * TILE + r) * LDS + ch * 8, valid ? src + (size_t)pos * KV_DIM + ch * 8 : src, valid);
      }
    }
  };
  // The Q fragments of pass `pass`, straight from global memory: row r of the tile is query head
  // kvHead*GROUP + pass*16 + r; rows past the group and columns past HEAD_DIM are zero.
  auto loadQuery = [&](unsigned (&qf)[HDP / 16][4], int pass) {
    const bool rowLo = pass * 16 + g < GROUP, rowHi = pass * 16 + g + 8 < GROUP;
#pragma unroll
    for (int ks = 0; ks < HDP / 16; ++ks) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = (e & 1) * 8, col = ks * 16 + (e >> 1) * 8; // from qGroup's row g and column 2t
        unsigned v = 0;
        if ((e & 1 ? rowHi : rowLo) && col < HEAD_DIM)
          v = loadProduced(reinterpret_cast<const unsigned *>(qGroup + (pass * 16 + r) * HEAD_DIM + col));
        qf[ks][e] = v;
      }
    }
  };

  // The chunk's K/V lines into L2 before the wait (attn::kPrefetchL2Bytes). The context read here may be a step
  // or more behind (a kernel starts once the one before has *started*): a relaxed load, a hint only, never used
  // after the wait. A prefetch is no risk whatever it reads: L2 is the point of coherence, so a line brought
  // in before the kernel before writes it is updated there.
  {
    const int hint = readContext();
    if ((size_t)tile.ny * max(hint, 0) * KV_DIM * 2 * sizeof(bf16) <= attn::kPrefetchL2Bytes) {
      const int e0 = split * spanOf(hint), rows = min(e0 + spanOf(hint), hint) - e0;
      // A head's row is HEAD_DIM * 2 bytes: its lines at 128-byte steps, and its last byte's (a row that is not
      // 128-byte aligned ends on one line more).
      constexpr int ROW_BYTES = HEAD_DIM * 2, LINES = (ROW_BYTES + 127) / 128 + (ROW_BYTES % 128 ? 1 : 0);
      for (int i = tid; i < rows * 2 * LINES; i += THREADS) {
        const int line = i % LINES, which = (i / LINES) % 2, r = e0 + i / (2 * LINES);
        const char *row = reinterpret_cast<const char *>((which ? vSeq : kSeq) + (size_t)r * KV_DIM);
        prefetchL2(row + min(line * 128, ROW_BYTES - 1));
      }
    }
  }
  wait();

  // Right after the wait, what does not depend on the context, so that its trip to L2 overlaps theirs instead
  // of coming first: pass 0's query fragments and, in split 0 (the chunk every context starts with; the lane
  // column path), each warp's first tile of K/V. That tile's rows at or past the context are copied too, from
  // wherever the cache holds: their scores are masked below, and their V rows zeroed before the PV product
  // reads them (0 * NaN would not vanish).
  const bool earlyTile = kLaneColumn && split == 0;
  unsigned qf[HDP / 16][4];
  loadQuery(qf, 0);
  if (earlyTile) loadTile(0, 0, 0, max_seq);

  const int ctx = readContext();
  const int span = spanOf(ctx);
  const int s0 = split * span;
  if (s0 >= ctx) { // past this sequence's context: no chunk's merge reads this one
    if (ctx <= 0 && split == 0)
      for (int i = threadIdx.x; i < GROUP * HEAD_DIM; i += THREADS) outGroup[i] = toBf16(0.f);
    if (earlyTile) { // no copy outlives the block
      cpAsyncCommit();
      cpAsyncWait<0>();
    }
    return;
  }
  const int s1 = min(s0 + span, ctx);
  const int chunks = (ctx + span - 1) / span; // the chunks this context has: the ones that write
  const int numTiles = (s1 - s0 + TILE - 1) / TILE;
  // Tiles warp, warp + NW, ... of the chunk.
  const int myTiles = warp < numTiles ? (numTiles - 1 - warp) / NW + 1 : 0;

  const float scaleLog2 = scale * kLog2e;
  for (int pass = 0; pass < PASSES; ++pass) {
    if constexpr (HEAD_DIM < HDP) { // zero the padding columns (the previous merge may have overwritten them)
      bf16 *all = reinterpret_cast<bf16 *>(smemRaw);
      attn::zeroColumns<THREADS>(all, NW * STAGES * 2 * TILE, LDS, HEAD_DIM, HDP);
    }
    blockSync(); // padding zeroed; the previous pass's merge is done reading the shared bytes

    // Prologue: the first STAGES-1 tiles in flight before anything else (the early tile, issued before the
    // context was known, joins the first group), then the queries of a pass after the first.
    const bool early = earlyTile && pass == 0;
#pragma unroll
    for (int i = 0; i < STAGES - 1; ++i) {
      if (i < myTiles && !(early && i == 0)) loadTile(i, i, s0, s1);
      cpAsyncCommit();
    }
    if (pass > 0) loadQuery(qf, pass);

    attn::RowState<HDP> st;
    st.init();
    for (int i = 0; i < myTiles; ++i) {
      if (i + STAGES - 1 < myTiles) loadTile(i + STAGES - 1, (i + STAGES - 1) % STAGES, s0, s1);
      cpAsyncCommit(); // possibly empty: one group per iteration keeps the wait count exact
      cpAsyncWait<STAGES - 1>(); // this lane's copies of tile i have landed
      if constexpr (kLaneColumn) {
        // The early tile reaches past the context: its V rows there (this lane's copies) become zeros.
        if (early && i == 0 && (warp + 1) * TILE > s1) {
#pragma unroll
          for (int k = 0; k < kPerMatrix; ++k) {
            const int r = laneRow + k * kRowStep;
            if (warp * TILE + r >= s1)
              *reinterpret_cast<uint4 *>(ring + (TILE + r) * LDS + laneCol * 8) = make_uint4(0u, 0u, 0u, 0u);
          }
        }
      }
      __syncwarp(); // ... and the other lanes' (the ring is private to the warp)
      const bf16 *sK = ring + (i % STAGES) * 2 * TILE * LDS, *sV = sK + TILE * LDS;
      float s[TILE / 8][4];
      attn::scoreTile<HDP, TILE>(s, qf, sK);
      const int first = s0 + (warp + i * NW) * TILE;
      const bool tail = first + TILE > s1; // only the chunk's last tile can hold keys past its end
#pragma unroll
      for (int j = 0; j < TILE / 8; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int pos = first + j * 8 + 2 * t + (e & 1);
          s[j][e] = (tail && pos >= s1) ? attn::negInf() : s[j][e] * scaleLog2;
        }
      }
      st.template softmaxUpdate<TILE>(s);
      st.template accumulatePV<TILE>(s, sV);
      __syncwarp(); // the slot is read out before iteration i+1 refills it
    }
    cpAsyncWait<0>();
    st.finishSums();

    // Merge the warps. A warp with no tiles holds m = -inf, l = 0, O = 0 and gets weight 0 below.
    blockSync(); // every warp is out of its ring
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = g + r * 8;
#pragma unroll
      for (int j = 0; j < HDP / 8; ++j) {
        float2 *to = reinterpret_cast<float2 *>(mergeO + (warp * 16 + row) * HDP + j * 8 + 2 * t);
        *to = make_float2(st.o[j][2 * r], st.o[j][2 * r + 1]);
      }
      if (t == 0) {
        mergeM[warp * 16 + row] = st.m[r];
        mergeL[warp * 16 + row] = st.l[r];
      }
    }
    blockSync();
    // A thread takes 4 columns of one row: the row's warp weights once, then float4s of every warp's O.
    constexpr int V4 = HEAD_DIM / 4;
    const int rowsInPass = min(16, GROUP - pass * 16);
    for (int i = tid; i < rowsInPass * V4; i += THREADS) {
      const int r = i / V4, d = (i % V4) * 4;
      float mx = attn::negInf();
#pragma unroll
      for (int w = 0; w < NW; ++w) mx = fmaxf(mx, mergeM[w * 16 + r]);
      // The chunk is not empty, so its first key reached warp 0 and mx is finite.
      float sum = 0.f;
      float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
      for (int w = 0; w < NW; ++w) {
        const float wt = attn::exp2Ftz(mergeM[w * 16 + r] - mx);
        const float4 o = *reinterpret_cast<const float4 *>(mergeO + (w * 16 + r) * HDP + d);
        sum += wt * mergeL[w * 16 + r];
        acc.x += wt * o.x;
        acc.y += wt * o.y;
        acc.z += wt * o.z;
        acc.w += wt * o.w;
      }
      const float inv = __frcp_rn(sum); // the same value as 1.f / sum, in fewer instructions
      acc = make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
      if (chunks == 1) { // the whole context: the output itself
        __nv_bfloat162 *dst = reinterpret_cast<__nv_bfloat162 *>(outGroup + (pass * 16 + r) * HEAD_DIM + d);
        dst[0] = __floats2bfloat162_rn(acc.x, acc.y);
        dst[1] = __floats2bfloat162_rn(acc.z, acc.w);
        continue;
      }
      const size_t slot = ((size_t)b * HEADS + kvHead * GROUP + pass * 16 + r) * numSplits + split;
      *reinterpret_cast<float4 *>(partial_out + slot * HEAD_DIM + d) = acc;
      if (d == 0) partial_lse[slot] = mx + log2f(sum);
    }
  }
  if (chunks > 1) attn::mergeChunks<HEADS, KV_HEADS, HEAD_DIM, THREADS>(p, b, kvHead, numSplits, chunks, outGroup, smemRaw);
}

// The kernels, and the same bodies as tasks of the persistent decode kernel (persistent.cuh).
template <int HEADS, int KV_HEADS, int HEAD_DIM, int SPLIT_TOKENS, int THREADS>
__global__ void __launch_bounds__(THREADS) attention_decode(const AttentionDecodeParams p) {
  attentionDecodeTile<HEADS, KV_HEADS, HEAD_DIM, SPLIT_TOKENS, THREADS, 65536>(p, launchTile(), GridWait{});
}
// As a task, the rings take at most SMEM_BUDGET bytes (fewer stages): the persistent kernel's blocks all
// reserve the shared memory of its largest task, and that limits the blocks an SM.
template <int HEADS, int KV_HEADS, int HEAD_DIM, int SPLIT_TOKENS, int THREADS, int SMEM_BUDGET> struct AttentionDecodeTask {
  using Params = AttentionDecodeParams;
  static constexpr int kThreads = THREADS;
  template <class Wait> __device__ __forceinline__ static void run(const Params &p, const Tile &t, const Wait &w) {
    attentionDecodeTile<HEADS, KV_HEADS, HEAD_DIM, SPLIT_TOKENS, THREADS, SMEM_BUDGET>(p, t, w);
  }
  __device__ __forceinline__ static void prefetch(const Params &, const Tile &) {} // no weights to stream
};

} // namespace minfer
