// templates/attention_decode.cuh — split-K flash decoding: one new query per sequence against its KV cache.
//
// Decode attention is bound by reading the cache (2 * ctx * KV_HEADS * HEAD_DIM * 2 bytes a sequence), so
// the design goal is reading every K/V byte once, with many loads in flight on every SM:
//  - attention_decode: grid (num_splits = ceil(max_seq / SPLIT_TOKENS), KV_HEADS, B). A block takes one chunk
//    of SPLIT_TOKENS positions of one kv head of one sequence and serves *all* GROUP = HEADS / KV_HEADS
//    query heads that share it, so K/V come from HBM once per group. The group's query heads are the 16
//    rows of an mma tile (zero rows pad a group below 16; groups above 16 take ceil(GROUP / 16) passes whose
//    re-reads hit L2), which turns decode into the prefill warp tile of attention_prefill.cuh: QK^T and PV
//    on tensor cores, online softmax.
//    The block's warps take the chunk's 16-key tiles round-robin; each warp streams its tiles through its own
//    cp.async ring of kStages slots (16-byte copies, no block barrier in the loop), keeps its own softmax
//    state, and the warps merge through shared memory at the end. The block writes its normalised partial
//    output and log-sum-exp per query head: partial_out [B, HEADS, num_splits, HEAD_DIM] fp32 and
//    partial_lse [B, HEADS, num_splits] fp32 (log2 units). Blocks whose chunk starts at or past the
//    sequence's context write nothing and exit.
//  - attention_decode_combine: grid (HEADS, B). Merges the valid chunks of each (sequence, head) with
//    weights 2^(lse_s - max lse) and writes bf16 out [B, HEADS * HEAD_DIM]; the chunks are read in parallel
//    (warps over chunks, lanes over columns), not one after another.
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
  float *partial_out;     // [batch, HEADS, splits, HEAD_DIM]
  float *partial_lse;     // [batch, HEADS, splits]
  const int *context_len; // [batch]
  int max_seq;
  float scale;
};

struct AttentionCombineParams {
  const float *partial_out; // as AttentionDecodeParams
  const float *partial_lse;
  const int *context_len;   // [batch]
  bf16 *out;                // [batch, HEADS * HEAD_DIM]
  int num_splits;
  int split_tokens;
};

namespace attn {

// Keys per warp step: one 16-key tile (the mma k of PV, two n8 tiles of QK^T).
inline constexpr int kDecodeTile = 16;

// cp.async ring depth of each warp: as many 16-key K+V tiles as fit a ~64 KB budget for the block, between 2
// and 4. With 4 warps that is 2 stages at head dim 128 (68 KB) and 3 at 64 (54 KB); either way 2-3 blocks
// fit an SM and keep 100+ KB of copies in flight, well past what HBM latency x bandwidth needs (~25-35 KB
// per SM on H100/H200).
__host__ __device__ constexpr int decodeStages(int headDim, int warps, int budget = 65536) {
  const int perStage = warps * 2 * kDecodeTile * smemStride(paddedHeadDim(headDim)) * 2;
  const int s = budget / perStage;
  return s < 2 ? 2 : (s > 4 ? 4 : s);
}

// Shared memory of attention_decode in bytes: the warps' rings, reused after the loop for the merge
// (per warp: 16 rows x padded head dim of O, plus m and l of 16 rows, fp32).
__host__ __device__ constexpr int decodeSmemBytes(int headDim, int threads, int budget = 65536) {
  const int warps = threads / 32;
  const int ring = warps * decodeStages(headDim, warps, budget) * 2 * kDecodeTile * smemStride(paddedHeadDim(headDim)) * 2;
  const int merge = warps * 16 * (paddedHeadDim(headDim) + 2) * 4;
  return ring > merge ? ring : merge;
}

// attention_decode_combine: 128 threads (4 warps) per (sequence, head). The most chunks it merges: the
// log-sum-exps are staged in shared memory (1 KB).
inline constexpr int kCombineThreads = 128;
inline constexpr int kMaxSplits = 256;

} // namespace attn

// q:            [B, HEADS * HEAD_DIM] bf16, this step's query of each sequence
// k_cache:      [B, max_seq, KV_HEADS * HEAD_DIM] bf16; positions < context_len[b] are valid
// v_cache:      [B, max_seq, KV_HEADS * HEAD_DIM] bf16, likewise
// partial_out:  [B, HEADS, num_splits, HEAD_DIM] fp32 workspace (num_splits = gridDim.x)
// partial_lse:  [B, HEADS, num_splits] fp32 workspace
// context_len:  [B] int, including this step's token
// Grid (ceil(max_seq / SPLIT_TOKENS), KV_HEADS, B), block THREADS, dynamic shared memory
// attn::decodeSmemBytes(HEAD_DIM, THREADS) (the kernel traps when given less).
// The step's inputs (q, context_len) are read through the read-only path (loadProduced): with the pointers
// in a struct, __restrict__ no longer lets the compiler prove it (griddepcontrol.wait clobbers memory).
// The body: the block at `tile`, waiting through `wait`.
template <int HEADS, int KV_HEADS, int HEAD_DIM, int SPLIT_TOKENS, int THREADS, int SMEM_BUDGET, class Wait>
__device__ __forceinline__ void attentionDecodeTile(const AttentionDecodeParams &p, const Tile &tile, const Wait &wait) {
  const bf16 *__restrict__ q = p.q;
  const bf16 *__restrict__ k_cache = p.k_cache;
  const bf16 *__restrict__ v_cache = p.v_cache;
  float *__restrict__ partial_out = p.partial_out;
  float *__restrict__ partial_lse = p.partial_lse;
  const int *__restrict__ context_len = p.context_len;
  const int max_seq = p.max_seq;
  const float scale = p.scale;
  wait();
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

  const int split = tile.x, kvHead = tile.y, b = tile.z;
  const int numSplits = tile.nx;
  const int ctx = min(loadProduced(context_len + b), max_seq);
  const int s0 = split * SPLIT_TOKENS;
  if (s0 >= ctx) return; // past this sequence's context: the combine never reads this split
  const int s1 = min(s0 + SPLIT_TOKENS, ctx);
  const int numTiles = (s1 - s0 + TILE - 1) / TILE;

  const int tid = threadIdx.x, warp = tid / kWarpSize, lane = tid % kWarpSize;
  const int g = lane / 4, t = lane % 4;
  // Tiles warp, warp + NW, ... of the chunk.
  const int myTiles = warp < numTiles ? (numTiles - 1 - warp) / NW + 1 : 0;
  const size_t seqBase = (size_t)b * max_seq * KV_DIM + kvHead * HEAD_DIM;
  const bf16 *kSeq = k_cache + seqBase, *vSeq = v_cache + seqBase;

  // Warp w's ring: [STAGES][K, V][TILE][LDS].
  bf16 *ring = reinterpret_cast<bf16 *>(smemRaw) + warp * STAGES * 2 * TILE * LDS;
  // After the loop the same bytes hold the merge: O [NW][16][HDP], then m [NW][16], then l [NW][16].
  float *mergeO = reinterpret_cast<float *>(smemRaw);
  float *mergeM = mergeO + NW * 16 * HDP;
  float *mergeL = mergeM + NW * 16;

  // One tile (16 keys of K and of V) into slot `slot`; keys at or past s1 are zero-filled, never read.
  auto loadTile = [&](int i, int slot) {
    const int first = s0 + (warp + i * NW) * TILE;
    bf16 *dst = ring + slot * 2 * TILE * LDS;
    for (int c = lane; c < 2 * TILE * CHUNKS; c += kWarpSize) {
      const int which = c / (TILE * CHUNKS); // 0: K, 1: V
      const int r = (c / CHUNKS) % TILE, ch = c % CHUNKS, pos = first + r;
      const bool valid = pos < s1;
      const bf16 *src = which ? vSeq : kSeq;
      cpAsync16(dst + (which * TILE + r) * LDS + ch * 8, valid ? src + (size_t)pos * KV_DIM + ch * 8 : src, valid);
    }
  };

  const float scaleLog2 = scale * kLog2e;
  for (int pass = 0; pass < PASSES; ++pass) {
    if constexpr (HEAD_DIM < HDP) { // zero the padding columns (the previous merge may have overwritten them)
      bf16 *all = reinterpret_cast<bf16 *>(smemRaw);
      attn::zeroColumns<THREADS>(all, NW * STAGES * 2 * TILE, LDS, HEAD_DIM, HDP);
    }
    blockSync(); // padding zeroed; the previous pass's merge is done reading the shared bytes

    // Prologue: the first STAGES-1 tiles in flight before anything else, then the queries.
#pragma unroll
    for (int i = 0; i < STAGES - 1; ++i) {
      if (i < myTiles) loadTile(i, i);
      cpAsyncCommit();
    }
    // Q fragments straight from global memory: row r of the tile is query head kvHead*GROUP + pass*16 + r;
    // rows past the group and columns past HEAD_DIM are zero.
    unsigned qf[HDP / 16][4];
#pragma unroll
    for (int ks = 0; ks < HDP / 16; ++ks) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = g + (e & 1) * 8, col = ks * 16 + (e >> 1) * 8 + 2 * t;
        const int inGroup = pass * 16 + r;
        unsigned v = 0;
        if (inGroup < GROUP && col < HEAD_DIM)
          v = loadProduced(reinterpret_cast<const unsigned *>(q + (size_t)b * Q_DIM + (kvHead * GROUP + inGroup) * HEAD_DIM + col));
        qf[ks][e] = v;
      }
    }

    attn::RowState<HDP> st;
    st.init();
    for (int i = 0; i < myTiles; ++i) {
      if (i + STAGES - 1 < myTiles) loadTile(i + STAGES - 1, (i + STAGES - 1) % STAGES);
      cpAsyncCommit(); // possibly empty: one group per iteration keeps the wait count exact
      cpAsyncWait<STAGES - 1>(); // this lane's copies of tile i have landed
      __syncwarp();                    // ... and the other lanes' (the ring is private to the warp)
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
        mergeO[(warp * 16 + row) * HDP + j * 8 + 2 * t] = st.o[j][2 * r];
        mergeO[(warp * 16 + row) * HDP + j * 8 + 2 * t + 1] = st.o[j][2 * r + 1];
      }
      if (t == 0) {
        mergeM[warp * 16 + row] = st.m[r];
        mergeL[warp * 16 + row] = st.l[r];
      }
    }
    blockSync();
    const int rowsInPass = min(16, GROUP - pass * 16);
    for (int i = tid; i < rowsInPass * HEAD_DIM; i += THREADS) {
      const int r = i / HEAD_DIM, d = i % HEAD_DIM;
      float mx = attn::negInf();
#pragma unroll
      for (int w = 0; w < NW; ++w) mx = fmaxf(mx, mergeM[w * 16 + r]);
      // The chunk is not empty, so its first key reached warp 0 and mx is finite.
      float sum = 0.f, acc = 0.f;
#pragma unroll
      for (int w = 0; w < NW; ++w) {
        const float wt = exp2f(mergeM[w * 16 + r] - mx);
        sum += wt * mergeL[w * 16 + r];
        acc += wt * mergeO[(w * 16 + r) * HDP + d];
      }
      const size_t slot = ((size_t)b * HEADS + kvHead * GROUP + pass * 16 + r) * numSplits + split;
      partial_out[slot * HEAD_DIM + d] = acc / sum;
      if (d == 0) partial_lse[slot] = mx + log2f(sum);
    }
  }
}

// partial_out / partial_lse: as attention_decode wrote them; context_len: [B]; out: [B, HEADS * HEAD_DIM] bf16.
// num_splits and split_tokens are the decode launch's grid.x (at most attn::kMaxSplits) and SPLIT_TOKENS.
// Grid (HEADS, B), block THREADS (attn::kCombineThreads as a kernel of its own), no dynamic shared memory.
// The partials are read through the read-only path (loadProduced), as in attention_decode.
template <int HEADS, int HEAD_DIM, int THREADS, class Wait>
__device__ __forceinline__ void attentionCombineTile(const AttentionCombineParams &p, const Tile &tile, const Wait &wait) {
  const float *__restrict__ partial_out = p.partial_out;
  const float *__restrict__ partial_lse = p.partial_lse;
  const int *__restrict__ context_len = p.context_len;
  bf16 *__restrict__ out = p.out;
  const int num_splits = p.num_splits, split_tokens = p.split_tokens;
  wait();
  static_assert(HEAD_DIM % 8 == 0 && HEAD_DIM >= 8 && HEAD_DIM <= 128, "HEAD_DIM: a multiple of 8, at most 128");
  static_assert(THREADS % kWarpSize == 0 && THREADS >= HEAD_DIM / 4 && THREADS <= 1024,
                "combine: THREADS must be whole warps, at least one thread per float4 of a row");
  constexpr int VECS = HEAD_DIM / 4;       // float4 column groups of one row
  // Chunks merged side by side (4 at head dim 128, 64 at 8); when VECS does not divide THREADS (head dim
  // 24, 96, ...), the last THREADS % VECS threads have no lane and only take part in the barriers.
  constexpr int LANES = THREADS / VECS;
  __shared__ float weight[attn::kMaxSplits];
  __shared__ float scratch[THREADS / kWarpSize];
  __shared__ float4 part[LANES][VECS];

  const int head = tile.x, b = tile.y;
  if (num_splits > attn::kMaxSplits) __trap(); // a host/spec mismatch
  const int ctx = loadProduced(context_len + b);
  // The chunks attention_decode wrote: those starting before the context, clamped to the grid it had.
  const int valid = ctx > 0 ? min((ctx + split_tokens - 1) / split_tokens, num_splits) : 0;
  const size_t base = ((size_t)b * HEADS + head) * num_splits;

  // Weights 2^(lse_s - max) of every chunk, and their sum.
  float mx = attn::negInf();
  for (int s = threadIdx.x; s < valid; s += THREADS) {
    weight[s] = loadProduced(partial_lse + base + s);
    mx = fmaxf(mx, weight[s]);
  }
  // Block max by hand: common.cuh's blockMax spells -inf as INFINITY, which NVRTC does not define.
  mx = warpMax(mx);
  if (threadIdx.x % kWarpSize == 0) scratch[threadIdx.x / kWarpSize] = mx;
  blockSync();
  mx = scratch[0];
#pragma unroll
  for (int w = 1; w < THREADS / kWarpSize; ++w) mx = fmaxf(mx, scratch[w]);
  float sum = 0.f;
  for (int s = threadIdx.x; s < valid; s += THREADS) {
    weight[s] = exp2f(weight[s] - mx);
    sum += weight[s];
  }
  sum = blockSum<THREADS>(sum, scratch); // its barriers also publish `weight`

  // Lane group `lane` merges chunks lane, lane + LANES, ...; each thread one float4 of columns.
  const int vec = threadIdx.x % VECS, lane = threadIdx.x / VECS;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  if (THREADS % VECS == 0 || lane < LANES) {
    const float4 *src = reinterpret_cast<const float4 *>(partial_out + base * HEAD_DIM) + vec;
#pragma unroll 4
    for (int s = lane; s < valid; s += LANES) {
      const float4 o = loadProduced(src + (size_t)s * VECS);
      const float w = weight[s];
      acc.x += w * o.x;
      acc.y += w * o.y;
      acc.z += w * o.z;
      acc.w += w * o.w;
    }
    part[lane][vec] = acc;
  }
  blockSync();
  if (lane == 0) {
    for (int l = 1; l < LANES; ++l) {
      const float4 o = part[l][vec];
      acc.x += o.x;
      acc.y += o.y;
      acc.z += o.z;
      acc.w += o.w;
    }
    const float inv = valid ? 1.f / sum : 0.f; // sum >= 1: the largest chunk weighs 2^0
    __nv_bfloat162 *dst = reinterpret_cast<__nv_bfloat162 *>(out + (size_t)b * HEADS * HEAD_DIM + head * HEAD_DIM + vec * 4);
    dst[0] = __floats2bfloat162_rn(acc.x * inv, acc.y * inv);
    dst[1] = __floats2bfloat162_rn(acc.z * inv, acc.w * inv);
  }
}

// The kernels, and the same bodies as tasks of the persistent decode kernel (persistent.cuh).
template <int HEADS, int KV_HEADS, int HEAD_DIM, int SPLIT_TOKENS, int THREADS>
__global__ void __launch_bounds__(THREADS) attention_decode(const AttentionDecodeParams p) {
  attentionDecodeTile<HEADS, KV_HEADS, HEAD_DIM, SPLIT_TOKENS, THREADS, 65536>(p, launchTile(), GridWait{});
}
template <int HEADS, int HEAD_DIM>
__global__ void __launch_bounds__(attn::kCombineThreads) attention_decode_combine(const AttentionCombineParams p) {
  attentionCombineTile<HEADS, HEAD_DIM, attn::kCombineThreads>(p, launchTile(), GridWait{});
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
template <int HEADS, int HEAD_DIM, int THREADS> struct AttentionCombineTask {
  using Params = AttentionCombineParams;
  static constexpr int kThreads = THREADS;
  template <class Wait> __device__ __forceinline__ static void run(const Params &p, const Tile &t, const Wait &w) {
    attentionCombineTile<HEADS, HEAD_DIM, THREADS>(p, t, w);
  }
  __device__ __forceinline__ static void prefetch(const Params &, const Tile &) {} // no weights to stream
};

} // namespace minfer
