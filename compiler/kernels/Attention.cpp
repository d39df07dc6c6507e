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

std::vector<AttentionPrefillSpec> AttentionPrefillSpec::candidates(int heads, int kvHeads, int headDim) {
  // (blockM, blockN, warps): the default first, then the others of 64 / 128 rows x 32 / 64 keys: a taller
  // tile reuses K/V for twice the rows, a shorter key tile needs fewer registers and less shared memory.
  std::vector<AttentionPrefillSpec> out = {{heads, kvHeads, headDim}};
  for (auto [m, n, w] : {std::array<int, 3>{64, 64, 4}, {64, 32, 4}, {128, 64, 8}, {128, 32, 8}})
    if (m != out[0].blockM || n != out[0].blockN) out.push_back({heads, kvHeads, headDim, m, n, w});
  return out;
}

llvm::Error AttentionPrefillSpec::validate() const {
  if (auto e = validateHeads(name(), heads, kvHeads, headDim)) return e;
  if (warps < 1 || warps > 16) return specError(name(), "warps must be 1..16");
  if (blockM != 16 * warps) return specError(name(), "block_m must be 16 * warps (16 query rows a warp)");
  if (blockN < 16 || blockN > 128 || blockN % 16 != 0) return specError(name(), "block_n must be a multiple of 16 in 16..128");
  return llvm::Error::success();
}

unsigned AttentionPrefillSpec::sharedBytes() const {
  // Q tile + two stages of K and V tiles, bf16.
  return static_cast<unsigned>((blockM + 4 * blockN) * smemStride(headDim) * 2);
}

std::string AttentionPrefillSpec::name() const {
  return "attention_prefill_bf16_h" + std::to_string(heads) + "_kv" + std::to_string(kvHeads) + "_d" +
         std::to_string(headDim) + "_m" + std::to_string(blockM) + "n" + std::to_string(blockN) + "_w" +
         std::to_string(warps);
}

std::string AttentionPrefillSpec::entry() const {
  return "minfer::attention_prefill<" + std::to_string(heads) + ", " + std::to_string(kvHeads) + ", " +
         std::to_string(headDim) + ", " + std::to_string(blockM) + ", " + std::to_string(blockN) + ", " +
         std::to_string(warps) + ">";
}

std::string AttentionPrefillSpec::tuningKey() const {
  return "attention_prefill_bf16_h" + std::to_string(heads) + "_kv" + std::to_string(kvHeads) + "_d" +
         std::to_string(headDim);
}

std::string AttentionPrefillSpec::tileName() const {
  return "m" + std::to_string(blockM) + "n" + std::to_string(blockN) + "_w" + std::to_string(warps);
}

std::shared_ptr<KernelSpec> AttentionPrefillSpec::withTile(llvm::StringRef tile, const Target &) const {
  int m = 0, n = 0, w = 0;
  if (std::sscanf(tile.str().c_str(), "m%dn%d_w%d", &m, &n, &w) != 3) return nullptr;
  auto spec = std::make_shared<AttentionPrefillSpec>(heads, kvHeads, headDim, m, n, w);
  if (spec->tileName() != tile) return nullptr;
  if (llvm::Error e = spec->validate()) {
    llvm::consumeError(std::move(e));
    return nullptr;
  }
  return spec;
}

std::vector<std::shared_ptr<KernelSpec>> AttentionPrefillSpec::tuningCandidates(const Target &, int64_t) const {
  std::vector<std::shared_ptr<KernelSpec>> out;
  for (const AttentionPrefillSpec &c : candidates(heads, kvHeads, headDim))
    out.push_back(std::make_shared<AttentionPrefillSpec>(c));
  return out;
}

LaunchDims AttentionPrefillSpec::launch(int64_t rows) const {
  LaunchDims d;
  d.grid = {static_cast<unsigned>(llvm::divideCeil(std::max<int64_t>(rows, 0), blockM)), static_cast<unsigned>(heads),
            1};
  d.block = {static_cast<unsigned>(32 * warps), 1, 1};
  d.sharedBytes = sharedBytes();
  return d;
}

llvm::json::Object AttentionPrefillSpec::toJSON() const {
  return llvm::json::Object{{"family", "attention_prefill"}, {"heads", heads},   {"kv_heads", kvHeads},
                            {"head_dim", headDim},           {"block_m", blockM}, {"block_n", blockN},
                            {"warps", warps},                {"shared_bytes", sharedBytes()}};
}

// ---- decode ------------------------------------------------------------------------------------------------

int AttentionDecodeSpec::residentBlocksPerSm(int headDim) {
  // 228 KB of shared memory an SM, 1 KB reserved per block; registers allow 3 blocks of 128 threads at head
  // dim 128 (~160 a thread) and 4 below (~120 at 64, fewer for smaller heads).
  const int bySmem = (228 * 1024) / (int(AttentionDecodeSpec(1, 1, headDim, 16, 16).sharedBytes()) + 1024);
  const int byRegs = headDim > 64 ? 3 : 4;
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
  return {heads, kvHeads, headDim, chooseSplitTokens(kvHeads, headDim, maxSeq, batch, smCount), maxSeq};
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
                                 " splits, more than the combine's " + llvm::Twine(kMaxSplits) + "; use longer splits");
  return llvm::Error::success();
}

unsigned AttentionDecodeSpec::sharedBytes() const {
  // Per warp a ring of `stages` 16-key K and V tiles (2..4 stages within ~64 KB for the block), reused after
  // the loop for the merge (16 rows of fp32 O plus m and l per warp). Mirrors attn::decodeStages/SmemBytes.
  const int warps = threads / 32, stride = smemStride(headDim);
  const int perStage = warps * 2 * 16 * stride * 2;
  const int stages = std::clamp(smemBudget / perStage, 2, 4);
  const int ring = perStage * stages;
  const int merge = warps * 16 * (int(llvm::alignTo(headDim, 16)) + 2) * 4;
  return static_cast<unsigned>(std::max(ring, merge));
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
  d.grid = {static_cast<unsigned>(numSplits()), static_cast<unsigned>(kvHeads), static_cast<unsigned>(rows)};
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

// ---- combine -----------------------------------------------------------------------------------------------

llvm::Error AttentionCombineSpec::validate() const {
  if (heads <= 0) return specError(name(), "heads must be positive");
  if (headDim < 8 || headDim > 128 || headDim % 8 != 0)
    return specError(name(), "head_dim " + llvm::Twine(headDim) + " is not a multiple of 8 in 8..128");
  if (threads != 128) return specError(name(), "threads must be 128 (attn::kCombineThreads) as a kernel of its own");
  return llvm::Error::success();
}

std::string AttentionCombineSpec::name() const {
  return "attention_decode_combine_bf16_h" + std::to_string(heads) + "_d" + std::to_string(headDim);
}

std::string AttentionCombineSpec::entry() const {
  return "minfer::attention_decode_combine<" + std::to_string(heads) + ", " + std::to_string(headDim) + ">";
}

LaunchDims AttentionCombineSpec::launch(int64_t rows) const {
  LaunchDims d;
  d.grid = {static_cast<unsigned>(heads), static_cast<unsigned>(rows), 1};
  d.block = {static_cast<unsigned>(threads), 1, 1}; // 128 (attn::kCombineThreads): 4 warps merge chunks side by side
  return d;
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

std::shared_ptr<KernelSpec> AttentionCombineSpec::asTask(int t, int /*grid*/) const {
  if (t % 32 != 0 || t < headDim / 4 || t > 1024) return nullptr;
  auto task = std::make_shared<AttentionCombineSpec>(*this);
  task->threads = t;
  return task;
}

std::string AttentionCombineSpec::taskType() const {
  return "minfer::AttentionCombineTask<" + std::to_string(heads) + ", " + std::to_string(headDim) + ", " +
         std::to_string(threads) + ">";
}

llvm::json::Object AttentionCombineSpec::toJSON() const {
  return llvm::json::Object{{"family", "attention_decode_combine"}, {"heads", heads}, {"head_dim", headDim}};
}

MINFER_PARAMS_LAYOUT(AttentionPrefillParams,
                     MINFER_FIELD(q, Ptr), MINFER_FIELD(k_cache, Ptr), MINFER_FIELD(v_cache, Ptr),
                     MINFER_FIELD(out, Ptr), MINFER_FIELD(rows, I32), MINFER_FIELD(start_pos, I32),
                     MINFER_FIELD(scale, F32))

MINFER_PARAMS_LAYOUT(AttentionDecodeParams,
                     MINFER_FIELD(q, Ptr), MINFER_FIELD(k_cache, Ptr), MINFER_FIELD(v_cache, Ptr),
                     MINFER_FIELD(partial_out, Ptr), MINFER_FIELD(partial_lse, Ptr), MINFER_FIELD(context_len, Ptr),
                     MINFER_FIELD(max_seq, I32), MINFER_FIELD(scale, F32))

MINFER_PARAMS_LAYOUT(AttentionCombineParams,
                     MINFER_FIELD(partial_out, Ptr), MINFER_FIELD(partial_lse, Ptr), MINFER_FIELD(context_len, Ptr),
                     MINFER_FIELD(out, Ptr), MINFER_FIELD(num_splits, I32), MINFER_FIELD(split_tokens, I32))

} // namespace minfer
