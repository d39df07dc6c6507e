// compiler/kernels/Attention.cpp — names, launch geometry, shared memory and workspace of the attention
// kernels. The shared-memory formulas mirror attn::prefillSmemBytes / attn::decodeSmemBytes in the
// templates (AttentionSpecTest has NVRTC check that both sides agree); the kernels trap when given less.
#include "compiler/kernels/Attention.h"

#include <cstdio>

#include "llvm/ADT/Twine.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <array>

namespace minfer {
namespace {

llvm::Error specError(const std::string &spec, const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), spec + ": " + msg);
}

// The mma k-dimension is 16: shared rows hold the head dim rounded up to 16, plus 8 bf16 against bank
// conflicts (templates: attn::paddedHeadDim, attn::smemStride).
int smemStride(int headDim) { return int(llvm::alignTo(headDim, 16)) + 8; }

// Rules shared by every attention kernel (the templates static_assert the same).
llvm::Error validateHeads(const std::string &spec, int heads, int kvHeads, int headDim) {
  if (heads <= 0 || kvHeads <= 0) return specError(spec, "heads and kv_heads must be positive");
  if (heads % kvHeads != 0)
    return specError(spec, "heads " + llvm::Twine(heads) + " is not a multiple of kv_heads " + llvm::Twine(kvHeads));
  if (headDim < 8 || headDim > 128 || headDim % 8 != 0)
    return specError(spec, "head_dim " + llvm::Twine(headDim) + " is not a multiple of 8 in 8..128");
  return llvm::Error::success();
}

} // namespace

// ---- prefill -----------------------------------------------------------------------------------------------

AttentionPrefillSpec AttentionPrefillSpec::hopper(int heads, int kvHeads, int headDim, int blockM, int blockN,
                                                 int stages) {
  AttentionPrefillSpec s(heads, kvHeads, headDim, blockM, blockN, 4 * (blockM / 64 + 1));
  s.wgmma = true;
  s.stages = stages;
  return s;
}

AttentionPrefillSpec AttentionPrefillSpec::forTarget(int heads, int kvHeads, int headDim, const Target &target) {
  if (target.hasWgmma() && wgmmaHeadDim(headDim)) return hopper(heads, kvHeads, headDim, 128, 128, 2);
  return {heads, kvHeads, headDim};
}

std::vector<AttentionPrefillSpec> AttentionPrefillSpec::candidates(int heads, int kvHeads, int headDim,
                                                                   const Target *target) {
  std::vector<AttentionPrefillSpec> out;
  auto add = [&](const AttentionPrefillSpec &s) {
    for (const AttentionPrefillSpec &o : out)
      if (o.name() == s.name()) return;
    if (target) {
      if (llvm::Error e = s.validate(*target)) return llvm::consumeError(std::move(e));
    }
    out.push_back(s);
  };
  if (target) add(forTarget(heads, kvHeads, headDim, *target));
  // mma.sync (blockM, blockN, warps): the default, then the others of 64 / 128 rows x 32 / 64 keys: a taller
  // tile reuses K/V for twice the rows, a shorter key tile needs fewer registers and less shared memory.
  add({heads, kvHeads, headDim});
  for (auto [m, n, w] : {std::array<int, 3>{64, 64, 4}, {64, 32, 4}, {128, 64, 8}, {128, 32, 8}})
    add({heads, kvHeads, headDim, m, n, w});
  // wgmma (blockM, blockN, stages), where the target has it: 128 or 64 rows x 128 or 64 keys; a third
  // slot where it fits the shared memory; at head dim 64, 192 rows (three consumer warpgroups).
  if (target && target->hasWgmma() && wgmmaHeadDim(headDim))
    for (auto [m, n, st] : {std::array<int, 3>{128, 128, 2}, {128, 128, 3}, {128, 64, 4}, {64, 128, 2}, {192, 128, 2},
                            {192, 64, 3}})
      add(hopper(heads, kvHeads, headDim, m, n, st));
  return out;
}

llvm::Error AttentionPrefillSpec::validate() const {
  if (auto e = validateHeads(name(), heads, kvHeads, headDim)) return e;
  if (wgmma) {
    if (!wgmmaHeadDim(headDim)) return specError(name(), "the wgmma kernel takes head dims 64..128 in steps of 16");
    if (blockM != 64 && blockM != 128 && blockM != 192)
      return specError(name(), "block_m must be 64, 128 or 192 (one to three consumer warpgroups)");
    // Three consumers share 64K registers with the producer at 160 a thread (the kernel compiles to 128):
    // enough for a 64-column head, not for more (ptxas spills at head dim 80 and above).
    if (blockM == 192 && headDim > 64) return specError(name(), "block_m 192 takes head dim 64 only (registers)");
    if (blockN != 64 && blockN != 128) return specError(name(), "block_n must be 64 or 128 (a wgmma's N)");
    if (warps != 4 * (blockM / 64 + 1)) return specError(name(), "warps must be 4 per warpgroup, the producer's included");
    if (stages < 2) return specError(name(), "stages must be at least 2");
    return llvm::Error::success();
  }
  if (warps < 1 || warps > 16) return specError(name(), "warps must be 1..16");
  if (blockM != 16 * warps) return specError(name(), "block_m must be 16 * warps (16 query rows a warp)");
  if (blockN < 16 || blockN > 128 || blockN % 16 != 0) return specError(name(), "block_n must be a multiple of 16 in 16..128");
  return llvm::Error::success();
}

llvm::Error AttentionPrefillSpec::validate(const Target &target) const {
  if (auto e = validate()) return e;
  if (wgmma && !target.hasWgmma()) return specError(name(), "wgmma tiles need an sm_90a target, not " + target.name);
  if (sharedBytes() > unsigned(target.maxSharedBytesPerBlock()))
    return specError(name(), llvm::Twine(sharedBytes()) + " bytes of shared memory exceed the " +
                                 llvm::Twine(target.maxSharedBytesPerBlock()) + " a block may use on " + target.name);
  return llvm::Error::success();
}

unsigned AttentionPrefillSpec::sharedBytes() const {
  if (wgmma) // Q, then `stages` K and V tiles as 64-column boxes; 1 + 4 * stages barriers; 1 KB of alignment
    return static_cast<unsigned>((headDim + 63) / 64 * 128 * (blockM + 2 * stages * blockN) + (1 + 4 * stages) * 8 + 1024);
  // Q tile + two stages of K and V tiles, bf16.
  return static_cast<unsigned>((blockM + 4 * blockN) * smemStride(headDim) * 2);
}

std::string AttentionPrefillSpec::name() const {
  return "attention_prefill_bf16_h" + std::to_string(heads) + "_kv" + std::to_string(kvHeads) + "_d" +
         std::to_string(headDim) + "_" + tileName();
}

std::string AttentionPrefillSpec::entry() const {
  if (wgmma)
    return "minfer::attentionPrefillWgmma<" + std::to_string(heads) + ", " + std::to_string(kvHeads) + ", " +
           std::to_string(headDim) + ", " + std::to_string(blockM / 64) + ", " + std::to_string(blockN) + ", " +
           std::to_string(stages) + ">";
  return "minfer::attention_prefill<" + std::to_string(heads) + ", " + std::to_string(kvHeads) + ", " +
         std::to_string(headDim) + ", " + std::to_string(blockM) + ", " + std::to_string(blockN) + ", " +
         std::to_string(warps) + ">";
}

std::string AttentionPrefillSpec::tuningKey() const {
  return "attention_prefill_bf16_h" + std::to_string(heads) + "_kv" + std::to_string(kvHeads) + "_d" +
         std::to_string(headDim);
}

std::string AttentionPrefillSpec::tileName() const {
  if (wgmma) return "wgmma_m" + std::to_string(blockM) + "n" + std::to_string(blockN) + "_s" + std::to_string(stages);
  return "m" + std::to_string(blockM) + "n" + std::to_string(blockN) + "_w" + std::to_string(warps);
}

std::shared_ptr<KernelSpec> AttentionPrefillSpec::withTile(llvm::StringRef tile, const Target &target) const {
  int m = 0, n = 0, w = 0;
  std::shared_ptr<AttentionPrefillSpec> spec;
  if (std::sscanf(tile.str().c_str(), "wgmma_m%dn%d_s%d", &m, &n, &w) == 3)
    spec = std::make_shared<AttentionPrefillSpec>(hopper(heads, kvHeads, headDim, m, n, w));
  else if (std::sscanf(tile.str().c_str(), "m%dn%d_w%d", &m, &n, &w) == 3)
    spec = std::make_shared<AttentionPrefillSpec>(heads, kvHeads, headDim, m, n, w);
  if (!spec || spec->tileName() != tile) return nullptr;
  if (llvm::Error e = spec->validate(target)) {
    llvm::consumeError(std::move(e));
    return nullptr;
  }
  return spec;
}

std::vector<std::shared_ptr<KernelSpec>> AttentionPrefillSpec::tuningCandidates(const Target &target, int64_t) const {
  std::vector<std::shared_ptr<KernelSpec>> out;
  for (const AttentionPrefillSpec &c : candidates(heads, kvHeads, headDim, &target))
    out.push_back(std::make_shared<AttentionPrefillSpec>(c));
  return out;
}

std::vector<TensorMapArg> AttentionPrefillSpec::tensorMaps(int64_t rows) const {
  if (!wgmma) return {};
  // At least one row: a map cannot be empty. The cache maps end at this launch's last row, start_pos + rows.
  const int64_t r = std::max<int64_t>(rows, 1);
  TensorMapArg k{"k_cache", int64_t(kvHeads) * headDim, r, 64, blockN, "start_pos"};
  TensorMapArg v = k;
  v.pointer = "v_cache";
  return {TensorMapArg{"q", int64_t(heads) * headDim, r, 64, blockM}, k, v};
}

LaunchDims AttentionPrefillSpec::launch(int64_t rows) const {
  LaunchDims d;
  // Heads fastest: the blocks start longest row tile first over the whole grid (the templates' m0).
  d.grid = {static_cast<unsigned>(heads), static_cast<unsigned>(llvm::divideCeil(std::max<int64_t>(rows, 0), blockM)),
            1};
  d.block = {static_cast<unsigned>(32 * warps), 1, 1};
  d.sharedBytes = sharedBytes();
  return d;
}

llvm::json::Object AttentionPrefillSpec::toJSON() const {
  llvm::json::Object o{{"family", "attention_prefill"}, {"heads", heads},   {"kv_heads", kvHeads},
                       {"head_dim", headDim},           {"block_m", blockM}, {"block_n", blockN},
                       {"warps", warps},                {"shared_bytes", sharedBytes()}};
  if (wgmma) {
    o["kind"] = "wgmma";
    o["stages"] = stages;
  }
  return o;
}

// ---- decode ------------------------------------------------------------------------------------------------

int AttentionDecodeSpec::residentBlocksPerSm(int headDim, int threads) {
  // 228 KB of shared memory an SM, 1 KB reserved per block; 64K registers, ~164 a thread at head dim 128 and
  // ~120 at 64 and below (3 and 4 blocks of 128 threads).
  const int bySmem = (228 * 1024) / (int(AttentionDecodeSpec(1, 1, headDim, 16, 16, threads).sharedBytes()) + 1024);
  const int byRegs = 65536 / ((headDim > 64 ? 164 : 120) * std::max(threads, 32));
  return std::max(1, std::min(bySmem, byRegs));
}

int AttentionDecodeSpec::chooseSplitTokens(int kvHeads, int headDim, int64_t maxSeq, int64_t batch, int smCount) {
  const int64_t slots = int64_t(std::max(smCount, 1)) * residentBlocksPerSm(headDim);
  const int64_t pairs = int64_t(std::max(kvHeads, 1)) * std::max<int64_t>(batch, 1); // blocks per chunk index
  // One wave when the pairs leave room; otherwise ~4 waves' worth of blocks.
  const int64_t splits =
      std::clamp<int64_t>(pairs <= slots ? slots / pairs : int64_t(llvm::divideCeil(4 * slots, pairs)), 1, kMaxSplits);
  const int64_t seq = std::max<int64_t>(maxSeq, 1);
  const uint64_t perSplit = llvm::divideCeil(seq, splits); // at most `splits` chunks
  return static_cast<int>(std::max<uint64_t>(llvm::alignTo(perSplit, 16), kMinSplitTokens)); // whole 16-key tiles
}

AttentionDecodeSpec AttentionDecodeSpec::forSession(int heads, int kvHeads, int headDim, int64_t maxSeq,
                                                    int64_t batch, int smCount) {
  AttentionDecodeSpec spec(heads, kvHeads, headDim, chooseSplitTokens(kvHeads, headDim, maxSeq, batch, smCount), maxSeq);
  const int64_t sms = std::max(smCount, 1), pairs = int64_t(std::max(kvHeads, 1)) * std::max<int64_t>(batch, 1);
  if (pairs * spec.numSplits() <= sms) {
    spec.threads = kFewBlocksThreads;
  } else if (maxSeq <= kOneChunkTokens && pairs > sms * residentBlocksPerSm(headDim) &&
             pairs <= sms * residentBlocksPerSm(headDim, kManyPairsThreads)) {
    // Every context is one chunk and the pairs overfill the slots of 4-warp blocks but fit those of 2-warp
    // ones: one chunk (no blocks that only exit) of 2 warps, so that every pair runs in the first wave.
    const uint64_t whole = llvm::alignTo(std::max<int64_t>(maxSeq, 0), 16);
    spec.splitTokens = static_cast<int>(std::max<uint64_t>(whole, kMinSplitTokens));
    spec.threads = kManyPairsThreads;
  }
  spec.plannedThreads = spec.threads;
  return spec;
}

size_t AttentionDecodeSpec::partialLseOffset(int64_t batch, int64_t maxSeq) const {
  return size_t(batch) * heads * numSplits(maxSeq) * headDim * sizeof(float);
}

size_t AttentionDecodeSpec::workspaceBytes(int64_t batch, int64_t maxSeq) const {
  return partialLseOffset(batch, maxSeq) + size_t(batch) * heads * numSplits(maxSeq) * sizeof(float);
}

llvm::Error AttentionDecodeSpec::validate() const {
  if (auto e = validateHeads(name(), heads, kvHeads, headDim)) return e;
  if (splitTokens <= 0 || splitTokens % 16 != 0) return specError(name(), "split_tokens must be a positive multiple of 16");
  if (threads < 32 || threads > 512 || threads % 32 != 0) return specError(name(), "threads must be 1..16 whole warps");
  if (maxSeq <= 0) return specError(name(), "max_seq must be positive (set it at plan time)");
  if (numSplits() > kMaxSplits)
    return specError(name(), "max_seq " + llvm::Twine(maxSeq) + " makes " + llvm::Twine(numSplits()) +
                                 " splits, more than the merge's " + llvm::Twine(kMaxSplits) + "; use longer splits");
  return llvm::Error::success();
}

llvm::Error AttentionDecodeSpec::validate(const Target &target) const {
  if (auto e = validate()) return e;
  if (sharedBytes() > unsigned(target.maxSharedBytesPerBlock()))
    return specError(name(), llvm::Twine(sharedBytes()) + " bytes of shared memory exceed the " +
                                 llvm::Twine(target.maxSharedBytesPerBlock()) + " a block may use on " + target.name);
  return llvm::Error::success();
}

unsigned AttentionDecodeSpec::sharedBytes() const {
  // Per warp a ring of `stages` 16-key K and V tiles (2..4 stages within ~64 KB for the block), reused after
  // the loop for the merge of the warps (16 rows of fp32 O plus m and l per warp), then of the chunks (a
  // weight per chunk per warp). Mirrors attn::decodeStages/SmemBytes.
  const int warps = threads / 32, stride = smemStride(headDim);
  const int perStage = warps * 2 * 16 * stride * 2;
  const int stages = std::clamp(smemBudget / perStage, 2, 4);
  const int ring = perStage * stages;
  const int merge = warps * 16 * (int(llvm::alignTo(headDim, 16)) + 2) * 4;
  const int chunkWeights = warps * kMaxSplits * 4; // the merge of the chunks: each warp's weights
  return static_cast<unsigned>(std::max({ring, merge, chunkWeights}));
}

std::string AttentionDecodeSpec::name() const {
  return "attention_decode_bf16_h" + std::to_string(heads) + "_kv" + std::to_string(kvHeads) + "_d" +
         std::to_string(headDim) + "_s" + std::to_string(splitTokens) + "_t" + std::to_string(threads);
}

std::string AttentionDecodeSpec::entry() const {
  return "minfer::attention_decode<" + std::to_string(heads) + ", " + std::to_string(kvHeads) + ", " +
         std::to_string(headDim) + ", " + std::to_string(splitTokens) + ", " + std::to_string(threads) + ">";
}

LaunchDims AttentionDecodeSpec::launch(int64_t rows) const {
  LaunchDims d;
  d.grid = {static_cast<unsigned>(kvHeads), static_cast<unsigned>(rows), static_cast<unsigned>(numSplits())};
  d.block = {static_cast<unsigned>(threads), 1, 1};
  d.sharedBytes = sharedBytes();
  return d;
}

llvm::json::Object AttentionDecodeSpec::toJSON() const {
  return llvm::json::Object{{"family", "attention_decode"},
                            {"heads", heads},
                            {"kv_heads", kvHeads},
                            {"head_dim", headDim},
                            {"split_tokens", splitTokens},
                            {"threads", threads},
                            {"max_seq", maxSeq},
                            {"num_splits", numSplits()},
                            {"shared_bytes", sharedBytes()}};
}

std::string AttentionDecodeSpec::tuningKey() const {
  if (maxSeq > kOneChunkTokens) return "";
  return "attention_decode_bf16_h" + std::to_string(heads) + "_kv" + std::to_string(kvHeads) + "_d" +
         std::to_string(headDim) + "_ctx" + std::to_string(kOneChunkTokens) + "_t" + std::to_string(plannedThreads);
}

std::string AttentionDecodeSpec::tileName() const { return "t" + std::to_string(threads); }

std::shared_ptr<KernelSpec> AttentionDecodeSpec::withTile(llvm::StringRef tile, const Target &target) const {
  int t = 0;
  if (!tile.consume_front("t") || tile.getAsInteger(10, t) ||
      std::find(std::begin(kTunedThreads), std::end(kTunedThreads), t) == std::end(kTunedThreads))
    return nullptr;
  auto spec = std::make_shared<AttentionDecodeSpec>(*this);
  spec->threads = t;
  if (llvm::Error e = spec->validate(target)) {
    llvm::consumeError(std::move(e));
    return nullptr;
  }
  return spec;
}

std::vector<std::shared_ptr<KernelSpec>> AttentionDecodeSpec::tuningCandidates(const Target &target, int64_t) const {
  std::vector<std::shared_ptr<KernelSpec>> out;
  if (tuningKey().empty()) return out;
  for (int t : kTunedThreads)
    if (auto spec = withTile("t" + std::to_string(t), target)) out.push_back(std::move(spec));
  return out;
}

std::vector<std::shared_ptr<KernelSpec>> AttentionDecodeSpec::stepNeighbours(const Target &target) const {
  std::vector<std::shared_ptr<KernelSpec>> out = tuningCandidates(target, 0);
  out.erase(std::remove_if(out.begin(), out.end(), [&](const auto &s) { return s->tileName() == tileName(); }), out.end());
  return out;
}

std::shared_ptr<KernelSpec> AttentionDecodeSpec::asTask(int t, int /*grid*/) const {
  auto task = std::make_shared<AttentionDecodeSpec>(*this);
  task->threads = t;
  task->smemBudget = kTaskSmemBudget;
  if (auto e = task->validate()) {
    llvm::consumeError(std::move(e));
    return nullptr;
  }
  return task;
}

std::string AttentionDecodeSpec::taskType() const {
  return "minfer::AttentionDecodeTask<" + std::to_string(heads) + ", " + std::to_string(kvHeads) + ", " +
         std::to_string(headDim) + ", " + std::to_string(splitTokens) + ", " + std::to_string(threads) + ", " +
         std::to_string(smemBudget) + ">";
}

MINFER_PARAMS_LAYOUT(AttentionPrefillParams,
                     MINFER_FIELD(q, Ptr), MINFER_FIELD(k_cache, Ptr), MINFER_FIELD(v_cache, Ptr),
                     MINFER_FIELD(out, Ptr), MINFER_FIELD(rows, I32), MINFER_FIELD(start_pos, I32),
                     MINFER_FIELD(scale, F32))

MINFER_PARAMS_LAYOUT(AttentionDecodeParams,
                     MINFER_FIELD(q, Ptr), MINFER_FIELD(k_cache, Ptr), MINFER_FIELD(v_cache, Ptr),
                     MINFER_FIELD(out, Ptr), MINFER_FIELD(partial_out, Ptr), MINFER_FIELD(partial_lse, Ptr),
                     MINFER_FIELD(arrivals, Ptr), MINFER_FIELD(context_len, Ptr), MINFER_FIELD(max_seq, I32),
                     MINFER_FIELD(scale, F32))

} // namespace minfer
