// compiler/kernels/Attention.h — the specs of templates/attention_prefill.cuh and attention_decode.cuh.
//
// Prefill runs one launch per sequence (the host offsets the cache pointers to that sequence's slab):
//   attention_prefill(q [rows, heads*head_dim], k_cache, v_cache [max_seq, kv_dim], out [rows, heads*head_dim],
//                     int rows, int start_pos, float scale)
// Decode is one launch, with a workspace of workspaceBytes(batch, maxSeq) and arrivalsBytes(batch) zeroed
// bytes (the kernel leaves them zero):
//   attention_decode(q [B, heads*head_dim], k_cache, v_cache [B, max_seq, kv_dim], out [B, heads*head_dim],
//                    float *partial_out = workspace, float *partial_lse = workspace + partialLseOffset(B, maxSeq),
//                    unsigned *arrivals [B, kv_heads], const int *context_len [B], int max_seq, float scale)
// the block of a context's last chunk to finish merging the chunks (templates/attention_decode.cuh).
// context_len counts this step's token (already written to the cache by kv_write); max_seq is the cache's
// positions per sequence (its row stride).
// `scale` is 1/sqrt(head_dim) unless the IR op says otherwise; the host passes it.
#pragma once

#include "compiler/kernels/KernelSpec.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <vector>

namespace minfer {

// The kernels' arguments: host mirrors of the templates' structs (compiler/kernels/Params.h).
struct AttentionPrefillParams { // attention_prefill.cuh, launched once per sequence
  uint64_t q = 0;                    // [rows, heads * head_dim] of the sequence
  uint64_t k_cache = 0, v_cache = 0; // [max_seq, kv_heads * head_dim]: the sequence's slab
  uint64_t out = 0;                  // [rows, heads * head_dim]
  int32_t rows = 0, start_pos = 0;   // start_pos: its tokens already in the cache
  float scale = 0;
  static const ParamsLayout &layout();
};

struct AttentionDecodeParams { // attention_decode.cuh: attention_decode
  uint64_t q = 0;                        // [batch, heads * head_dim]
  uint64_t k_cache = 0, v_cache = 0;     // [batch, max_seq, kv_heads * head_dim]
  uint64_t out = 0;                      // [batch, heads * head_dim]
  uint64_t partial_out = 0;              // f32 [batch, heads, splits, head_dim]
  uint64_t partial_lse = 0;              // f32 [batch, heads, splits]
  uint64_t arrivals = 0;                 // u32 [batch, kv_heads], zero before and after
  uint64_t context_len = 0;              // i32 [batch]
  int32_t max_seq = 0;
  float scale = 0;
  static const ParamsLayout &layout();
};

// Flash-attention prefill: grid (heads, ceil(rows / blockM)). Two kernels:
//   * mma.sync (attention_prefill.cuh, every target): one warp per 16 query rows, cp.async double buffering;
//     "m64n64_w4";
//   * wgmma (attention_prefill_wgmma.cuh, sm_90a, head dims 64..128 in steps of 16): one producer warpgroup
//     loading K and V tiles by TMA into a ring of `stages` slots and blockM / 64 consumer warpgroups of 64
//     rows each, wgmma for Q K^T and P V; "wgmma_m128n128_s2". It takes the tensor maps of q, k_cache and
//     v_cache after its Params (tensorMaps).
struct AttentionPrefillSpec : KernelSpec {
  int heads = 0, kvHeads = 0, headDim = 0;
  // Default mma.sync tile: 64 query rows (4 warps) x 64 keys, or x 32 keys at head dim above 64 (fewer
  // registers for the score tile: H200, 2048 tokens, head dim 128: 198 us against 221 us with 64 keys; at
  // head dim 64 the 64-key tile is faster, 120 us against 152 us).
  int blockM = 64, blockN = 64, warps = 4;
  bool wgmma = false;
  int stages = 0; // wgmma: slots of the K / V ring

  AttentionPrefillSpec(int heads, int kvHeads, int headDim)
      : heads(heads), kvHeads(kvHeads), headDim(headDim), blockN(headDim > 64 ? 32 : 64) {}
  AttentionPrefillSpec(int heads, int kvHeads, int headDim, int blockM, int blockN, int warps)
      : heads(heads), kvHeads(kvHeads), headDim(headDim), blockM(blockM), blockN(blockN), warps(warps) {}
  // A wgmma tile: blockM 64, 128 or 192 (one to three consumer warpgroups; 192 at head dim 64 only), blockN 64
  // or 128 keys.
  static AttentionPrefillSpec hopper(int heads, int kvHeads, int headDim, int blockM, int blockN, int stages);
  // Whether the wgmma kernel takes a head dim: a multiple of 16 in 64..128 (padded to 64 or 128 columns).
  static bool wgmmaHeadDim(int headDim) { return headDim % 16 == 0 && headDim >= 64 && headDim <= 128; }
  // The default for a target: the wgmma kernel where the target and the head dim allow it (128 rows x 128
  // keys, 2 slots), else the mma.sync tile.
  static AttentionPrefillSpec forTarget(int heads, int kvHeads, int headDim, const Target &target);

  // The tiles the autotuner may try for a head dim on `target` (the default first): the mma.sync tiles,
  // and on sm_90a the wgmma tiles that fit. Without a target, the mma.sync tiles only.
  static std::vector<AttentionPrefillSpec> candidates(int heads, int kvHeads, int headDim,
                                                      const Target *target = nullptr);

  // What the templates' static_asserts would reject, as an error naming the field; with a target, also a
  // wgmma tile off sm_90a and shared memory beyond the target's.
  llvm::Error validate() const;
  llvm::Error validate(const Target &) const override;
  unsigned sharedBytes() const; // dynamic shared memory; mirrors attn::prefillSmemBytes / prefillWgmmaSmemBytes

  std::string name() const override; // attention_prefill_bf16_h32_kv4_d64_m64n64_w4 (or ..._wgmma_m128n128_s2)
  std::string header() const override { return wgmma ? "attention_prefill_wgmma.cuh" : "attention_prefill.cuh"; }
  const ParamsLayout &params() const override { return AttentionPrefillParams::layout(); }
  std::string entry() const override;
  LaunchDims launch(int64_t rows) const override; // rows: query rows of the sequence
  // wgmma: q [rows, heads * head_dim] in 64 x blockM boxes, k_cache and v_cache [start_pos + rows, kv_heads *
  // head_dim] in 64 x blockN boxes.
  std::vector<TensorMapArg> tensorMaps(int64_t rows) const override;
  llvm::json::Object toJSON() const override;
  // Tunable: the tile (blockM x blockN keys, warps, or a wgmma tile), among candidates().
  std::string tuningKey() const override; // attention_prefill_bf16_h32_kv4_d64
  std::string tileName() const override;  // m64n64_w4 or wgmma_m128n128_s2
  std::shared_ptr<KernelSpec> withTile(llvm::StringRef tile, const Target &) const override;
  std::vector<std::shared_ptr<KernelSpec>> tuningCandidates(const Target &, int64_t rows) const override;
};

// Split-K decode: grid (kvHeads, batch, numSplits()), the chunk index slowest so that every sequence's first
// chunk is dispatched before any second one; every block serves one kv head's query-head group over
// splitTokens cache positions. maxSeq (the session's cache length) fixes the grid; it is a launch parameter,
// not part of the generated source or the name.
struct AttentionDecodeSpec : KernelSpec {
  int heads = 0, kvHeads = 0, headDim = 0;
  int splitTokens = 64;
  // 4 warps: each streams its own 16-key tiles, so a block keeps 4 rings of copies in flight while staying
  // small enough (68 KB at head dim 128) for 3 blocks an SM.
  int threads = 128;
  int64_t maxSeq = 0;
  // The rings' shared memory budget (attn::decodeStages): 64 KB as a kernel of its own (not in the name);
  // a task's kTaskSmemBudget: 2 stages at head dim 64, so 4 blocks of the persistent kernel fit an SM.
  int smemBudget = 65536;
  static constexpr int kTaskSmemBudget = 40960;

  // The threads forSession plans for the session's grid; withTile keeps it and the tuning key names it, so an
  // entry tuned for one regime (one block an SM, say) never applies to a session planned for another.
  int plannedThreads = 128;

  AttentionDecodeSpec(int heads, int kvHeads, int headDim, int splitTokens, int64_t maxSeq, int threads = 128)
      : heads(heads), kvHeads(kvHeads), headDim(headDim), splitTokens(splitTokens), threads(threads), maxSeq(maxSeq),
        plannedThreads(threads) {}
  // The spec for a session of `batch` sequences of at most `maxSeq` positions: splitTokens from
  // chooseSplitTokens; kFewBlocksThreads where the grid has no more blocks than the SMs; one chunk of
  // kManyPairsThreads where that alone puts every (sequence, kv head) pair in the first wave.
  static AttentionDecodeSpec forSession(int heads, int kvHeads, int headDim, int64_t maxSeq, int64_t batch = 1,
                                        int smCount = kDefaultSmCount);
  // 8 warps for a grid of at most one block an SM (TinyLlama and GPT-2 at one sequence): no SM holds a second
  // block to hide the first's latency, and at short contexts a block's life is a chain (the wait, one trip
  // for K/V, the tiles a warp holds, the merge), so more warps sharing the chunk's tiles shorten it: a
  // one-chunk context of 128 positions is one tile a warp instead of two.
  static constexpr int kFewBlocksThreads = 256;
  // 2 warps for a cache of at most kOneChunkTokens positions whose (sequence, kv head) pairs overfill the
  // slots of 4-warp blocks but not those of 2-warp ones (4 an SM at head dim 128, 52 KB: 3 stages a warp).
  // At these contexts a block's life is an issue-bound chain (ncu, session 31: 0.26-0.30 instructions a cycle
  // a scheduler, DRAM 35%), so a second wave costs a whole chain; fewer warps a block, each with more tiles,
  // put every pair in the first. H200, Llama-2-7B at 16 rows, cache 193 (512 pairs, 396 slots of 4 warps):
  // the kernel alone 21.5-22.2 us at base clocks against 17.0-17.4; the step 3.978-3.987 ms against 3.953-3.956.
  static constexpr int kManyPairsThreads = 64;

  // 132 SMs: H100 SXM and H200 (the plan passes its target's Target::nominalSmCount()).
  static constexpr int kDefaultSmCount = 132;
  // The most chunks per (sequence, head): the merging block stages their weights in shared memory
  // (attn::kMaxSplits in the template).
  static constexpr int kMaxSplits = 256;
  // The chunk length (a multiple of 16) for a full-length context: enough chunks that batch * kvHeads *
  // numSplits blocks fill every SM's resident slots once (one wave: the blocks stream their chunks side by
  // side and finish together), or, when the batch alone has more (sequence, kv head) pairs than there are
  // slots, ~4 waves' worth so the last, partly filled wave is a small part; never shorter than
  // kMinSplitTokens, never more than kMaxSplits chunks. H200, context 4096, decode + combine: Llama-2-7B
  // batch 1 28.8 us at the chosen 352 (31.5 at 176, 29.7 at 704); TinyLlama batch 16 28.9 us at 512
  // (35.3 at 128); Llama-2-7B batch 16 273 us at 1024 (287 at 256, 305 at 4096).
  static int chooseSplitTokens(int kvHeads, int headDim, int64_t maxSeq, int64_t batch = 1,
                               int smCount = kDefaultSmCount);
  // Two 16-key tiles for each of the 4 warps: shorter chunks cost more in block start-up and merging than
  // they win in parallelism (H200, TinyLlama batch 1, context 4096: 11.4 us at 128, 13.9 at 32, 19.2 at 16).
  // Longer ones lose in the decode step: 256 made TinyLlama's step at context 4000 1.035 ms against 0.976
  // (session 17). Short contexts are one chunk in the kernel whatever the split (attn::kOneChunkTokens).
  static constexpr int kMinSplitTokens = 128;
  // The longest context the kernel takes as one chunk whatever the split (attn::kOneChunkTokens): in a
  // session whose cache is no longer, the blocks of every chunk but the first only wait and exit. Where the
  // grid fits the SMs they cost nothing (collapsing TinyLlama's 8 blocks at one sequence to 4 made its step
  // 1-4% slower, session 31); forSession drops them only with kManyPairsThreads.
  static constexpr int kOneChunkTokens = 256;
  // Blocks of `threads` threads of attention_decode resident on one SM: limited by shared memory (228 KB an SM
  // on H100/H200, 1 KB of it reserved per block) and by registers (~164 a thread at head dim 128, ~120 at 64:
  // 3 and 4 blocks of 128 threads).
  static int residentBlocksPerSm(int headDim, int threads = 128);

  int64_t numSplits() const { return numSplits(maxSeq); }
  int64_t numSplits(int64_t maxSeq) const { return llvm::divideCeil(std::max<int64_t>(maxSeq, 0), splitTokens); }
  // The chunks' partials: partial_out [batch, heads, numSplits, headDim] fp32, then partial_lse [batch,
  // heads, numSplits] fp32 at partialLseOffset.
  size_t workspaceBytes(int64_t batch, int64_t maxSeq) const;
  size_t partialLseOffset(int64_t batch, int64_t maxSeq) const;
  // The arrival counters: u32 [batch, kvHeads], zero when the kernel starts (it leaves them so).
  size_t arrivalsBytes(int64_t batch) const { return size_t(batch) * kvHeads * sizeof(uint32_t); }

  llvm::Error validate() const;
  // Also shared memory beyond the target's (16 warps at head dim 128 need 278 KB).
  llvm::Error validate(const Target &) const override;
  unsigned sharedBytes() const; // dynamic shared memory; mirrors attn::decodeSmemBytes

  std::string name() const override; // attention_decode_bf16_h32_kv4_d64_s256_t128
  std::string header() const override { return "attention_decode.cuh"; }
  const ParamsLayout &params() const override { return AttentionDecodeParams::layout(); }
  std::string entry() const override;
  LaunchDims launch(int64_t rows) const override; // rows: the batch (sequences)
  llvm::json::Object toJSON() const override;
  // Tunable where every context is one chunk (maxSeq <= kOneChunkTokens: the sessions the decode buckets plan,
  // optionsFor in runtime/Autotune.cpp): the block's warps, 2 to 16 (kTunedThreads), the split kept. How many
  // warps should share a short context's tiles depends on the kernels beside it in the step, not only on the
  // grid (H200, session 31: 16 warps made TinyLlama's step at 16 rows 1.4% and GPT-2's at one row 2.2% faster,
  // TinyLlama's at one row 2% slower), so the other warp counts are step neighbours: the in-step pass tries
  // each. A longer cache keeps forSession's choice (an empty key).
  static constexpr int kTunedThreads[] = {64, 128, 256, 512};
  std::string tuningKey() const override; // attention_decode_bf16_h32_kv4_d64_ctx256_t256 (t: plannedThreads)
  std::string tileName() const override;  // t128: the block's threads
  std::shared_ptr<KernelSpec> withTile(llvm::StringRef tile, const Target &) const override;
  std::vector<std::shared_ptr<KernelSpec>> tuningCandidates(const Target &, int64_t rows) const override;
  std::vector<std::shared_ptr<KernelSpec>> stepNeighbours(const Target &) const override;
  // The same split with `threads` threads (more warps share a chunk's tiles), up to 16 warps.
  std::shared_ptr<KernelSpec> asTask(int threads, int grid) const override;
  std::string taskType() const override; // minfer::AttentionDecodeTask<...>
};

} // namespace minfer
