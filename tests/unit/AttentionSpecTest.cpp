// tests/unit/AttentionSpecTest.cpp — the attention specs on the CPU: names, launch geometry, shared memory,
// decode workspace and split choice; and every template instantiation of a sweep (head dims 8..128, GQA
// ratios 1, 4, 7, 8, MQA) compiled by NVRTC for sm_80, sm_89 and sm_90. No GPU needed.
#include "jit/Nvrtc.h"
#include "compiler/kernels/Attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <optional>
#include <string>
#include <vector>

namespace minfer {
namespace {

TEST(AttentionSpec, NamesAndEntriesSpellEveryTemplateArgument) {
  AttentionPrefillSpec p(32, 4, 64);
  EXPECT_EQ(p.name(), "attention_prefill_bf16_h32_kv4_d64_m64n64_w4");
  EXPECT_EQ(p.entry(), "minfer::attention_prefill<32, 4, 64, 64, 64, 4>");
  EXPECT_EQ(p.header(), "attention_prefill.cuh");

  AttentionDecodeSpec d(32, 4, 64, 256, 4096);
  EXPECT_EQ(d.name(), "attention_decode_bf16_h32_kv4_d64_s256_t128");
  EXPECT_EQ(d.entry(), "minfer::attention_decode<32, 4, 64, 256, 128>");
  EXPECT_EQ(d.header(), "attention_decode.cuh");
  // max_seq sizes the grid only: it changes neither the source nor the name.
  EXPECT_EQ(AttentionDecodeSpec(32, 4, 64, 256, 100).source(), d.source());

  // One launch: the chunks merge in it, counted in per (sequence, kv head) arrival counters.
  EXPECT_EQ(d.arrivalsBytes(3), size_t(3) * 4 * 4);
  EXPECT_EQ(d.params().bytes, sizeof(AttentionDecodeParams));
}

TEST(AttentionSpec, PrefillLaunchCoversRowsByBlockMAndHeads) {
  AttentionPrefillSpec p(32, 32, 128);
  EXPECT_EQ(p.name(), "attention_prefill_bf16_h32_kv32_d128_m64n32_w4"); // 32-key tiles above head dim 64
  LaunchDims l = p.launch(2048);
  EXPECT_EQ(l.grid, (std::array<unsigned, 3>{32, 32, 1}));
  EXPECT_EQ(l.block, (std::array<unsigned, 3>{128, 1, 1}));
  // (64 Q rows + 2 stages x 32 keys x (K, V)) x (128 + 8) bf16 = 52224 bytes.
  EXPECT_EQ(l.sharedBytes, 52224u);
  EXPECT_EQ(AttentionPrefillSpec(32, 32, 128, 64, 64, 4).sharedBytes(), 87040u);
  // The autotuner's candidates: the default first, four distinct tiles.
  auto tiles = AttentionPrefillSpec::candidates(32, 32, 128);
  ASSERT_EQ(tiles.size(), 4u);
  EXPECT_EQ(tiles[0].name(), p.name());
  EXPECT_EQ(tiles[1].name(), "attention_prefill_bf16_h32_kv32_d128_m64n64_w4");
  // Heads first, then the row tiles (heads fastest: every head's longest row tile starts first).
  EXPECT_EQ(p.launch(1).grid[1], 1u);
  EXPECT_EQ(p.launch(65).grid[1], 2u);
  EXPECT_EQ(p.launch(65).grid[0], 32u);
  // Head dim 8 is padded to 16 columns (+8 against bank conflicts): (128 + 4 * 32) * 24 * 2.
  AttentionPrefillSpec small(8, 8, 8, 128, 32, 8);
  EXPECT_EQ(small.launch(200).grid, (std::array<unsigned, 3>{8, 2, 1}));
  EXPECT_EQ(small.launch(200).block[0], 256u);
  EXPECT_EQ(small.sharedBytes(), 12288u);
}

// The Hopper kernel: its name, entry and header, geometry, tensor maps, and where the plan picks it.
TEST(AttentionSpec, WgmmaPrefillTileIsNamedLaunchedAndChosenOnSm90a) {
  auto sm90a = parseTarget("sm_90a"), sm90 = parseTarget("sm_90"), sm89 = parseTarget("sm_89");
  ASSERT_TRUE(sm90a && sm90 && sm89);
  AttentionPrefillSpec w = AttentionPrefillSpec::hopper(32, 32, 128, 128, 128, 2);
  EXPECT_EQ(w.name(), "attention_prefill_bf16_h32_kv32_d128_wgmma_m128n128_s2");
  EXPECT_EQ(w.entry(), "minfer::attentionPrefillWgmma<32, 32, 128, 2, 128, 2>");
  EXPECT_EQ(w.header(), "attention_prefill_wgmma.cuh");
  EXPECT_EQ(w.tuningKey(), AttentionPrefillSpec(32, 32, 128).tuningKey()); // one key: the tuner picks the kind
  LaunchDims l = w.launch(2048);
  EXPECT_EQ(l.grid, (std::array<unsigned, 3>{32, 16, 1}));
  EXPECT_EQ(l.block, (std::array<unsigned, 3>{384, 1, 1})); // a producer and two consumer warpgroups
  // Q 128 rows + 2 slots x (K, V) x 128 keys, each in two 128-byte boxes; 9 barriers; 1 KB of alignment.
  EXPECT_EQ(l.sharedBytes, 2u * 128 * (128 + 4 * 128) + 9 * 8 + 1024);
  EXPECT_EQ(w.launch(129).grid[1], 2u);
  // Head dim 80 is padded to two boxes; 64 needs one.
  EXPECT_EQ(AttentionPrefillSpec::hopper(8, 8, 80, 64, 64, 2).sharedBytes(), 2u * 128 * (64 + 4 * 64) + 9 * 8 + 1024);
  EXPECT_EQ(AttentionPrefillSpec::hopper(8, 8, 64, 64, 64, 2).sharedBytes(), 1u * 128 * (64 + 4 * 64) + 9 * 8 + 1024);

  // Tensor maps: q by block rows, the caches by key tiles, their rows start_pos + rows.
  std::vector<TensorMapArg> maps = w.tensorMaps(300);
  ASSERT_EQ(maps.size(), 3u);
  EXPECT_STREQ(maps[0].pointer, "q");
  EXPECT_EQ(maps[0].inner, 32 * 128);
  EXPECT_EQ(maps[0].outer, 300);
  EXPECT_EQ(maps[0].boxOuter, 128);
  EXPECT_EQ(maps[0].outerPlus, nullptr);
  for (size_t i : {1, 2}) {
    EXPECT_STREQ(maps[i].pointer, i == 1 ? "k_cache" : "v_cache");
    EXPECT_EQ(maps[i].inner, 32 * 128);
    EXPECT_EQ(maps[i].outer, 300);
    EXPECT_EQ(maps[i].boxInner, 64);
    EXPECT_EQ(maps[i].boxOuter, 128);
    EXPECT_STREQ(maps[i].outerPlus, "start_pos");
  }
  EXPECT_TRUE(AttentionPrefillSpec(32, 32, 128).tensorMaps(300).empty());
  EXPECT_EQ(w.tensorMaps(0)[0].outer, 1); // a map is never empty

  // The default per target: wgmma on sm_90a for head dims 64..128 in steps of 16, else mma.sync.
  EXPECT_EQ(AttentionPrefillSpec::forTarget(32, 4, 64, *sm90a).tileName(), "wgmma_m128n128_s2");
  EXPECT_EQ(AttentionPrefillSpec::forTarget(8, 8, 96, *sm90a).tileName(), "wgmma_m128n128_s2");
  EXPECT_EQ(AttentionPrefillSpec::forTarget(32, 4, 64, *sm90).tileName(), "m64n64_w4");
  EXPECT_EQ(AttentionPrefillSpec::forTarget(32, 4, 64, *sm89).tileName(), "m64n64_w4");
  EXPECT_EQ(AttentionPrefillSpec::forTarget(4, 1, 32, *sm90a).tileName(), "m64n64_w4");
  EXPECT_EQ(AttentionPrefillSpec::forTarget(8, 8, 72, *sm90a).tileName(), "m64n32_w4");

  // The tuner's candidates on sm_90a: the wgmma default first, the mma.sync tiles, the wgmma tiles that fit
  // (head dim 128: a third slot of 128 keys still fits the 227 KB); on sm_89 only the mma.sync tiles.
  std::vector<std::string> names;
  for (const AttentionPrefillSpec &c : AttentionPrefillSpec::candidates(32, 32, 128, &*sm90a)) names.push_back(c.tileName());
  EXPECT_EQ(names, (std::vector<std::string>{"wgmma_m128n128_s2", "m64n32_w4", "m64n64_w4", "m128n64_w8", "m128n32_w8",
                                             "wgmma_m128n128_s3", "wgmma_m128n64_s4", "wgmma_m64n128_s2"}));
  for (const AttentionPrefillSpec &c : AttentionPrefillSpec::candidates(32, 32, 128, &*sm89)) EXPECT_FALSE(c.wgmma);
  // At head dim 64 also the 192-row tiles (three consumer warpgroups).
  names.clear();
  for (const AttentionPrefillSpec &c : AttentionPrefillSpec::candidates(32, 4, 64, &*sm90a)) names.push_back(c.tileName());
  EXPECT_EQ(names, (std::vector<std::string>{"wgmma_m128n128_s2", "m64n64_w4", "m64n32_w4", "m128n64_w8", "m128n32_w8",
                                             "wgmma_m128n128_s3", "wgmma_m128n64_s4", "wgmma_m64n128_s2",
                                             "wgmma_m192n128_s2", "wgmma_m192n64_s3"}));
  EXPECT_FALSE(w.withTile("wgmma_m192n128_s2", *sm90a)); // head dim 128: not a tile it takes
  // A tile name round-trips through withTile, and a tile the target cannot run does not.
  auto back = w.withTile("wgmma_m128n64_s4", *sm90a);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->name(), "attention_prefill_bf16_h32_kv32_d128_wgmma_m128n64_s4");
  EXPECT_FALSE(w.withTile("wgmma_m128n64_s4", *sm89));
  EXPECT_FALSE(w.withTile("wgmma_m128n128_s4", *sm90a)); // 295 KB of shared memory
  EXPECT_TRUE(w.withTile("m64n64_w4", *sm89));

  llvm::json::Object j = w.toJSON();
  EXPECT_EQ(j.getString("kind"), llvm::Optional<llvm::StringRef>("wgmma"));
  EXPECT_EQ(j.getInteger("stages"), llvm::Optional<int64_t>(2));
}

// The chunk index is the slowest dimension: every (sequence, kv head)'s first chunk is dispatched first.
TEST(AttentionSpec, DecodeLaunchIsKvHeadsByBatchBySplits) {
  AttentionDecodeSpec d(32, 4, 64, 64, 4096);
  LaunchDims l = d.launch(16);
  EXPECT_EQ(l.grid, (std::array<unsigned, 3>{4, 16, 64}));
  EXPECT_EQ(l.block, (std::array<unsigned, 3>{128, 1, 1}));
  // Head dim 64: 4 warps x 3 stages x (K, V) x 16 keys x 72 bf16 = 55296 bytes (over the 4 x 16 x 66 fp32
  // merge area).
  EXPECT_EQ(l.sharedBytes, 55296u);
  // Head dim 128: 2 stages (68 KB); head dim 8: 4 stages of 16 + 8 columns.
  EXPECT_EQ(AttentionDecodeSpec(32, 32, 128, 352, 4096).sharedBytes(), 69632u);
  EXPECT_EQ(AttentionDecodeSpec(8, 8, 8, 64, 4096).sharedBytes(), 24576u);
  // A max_seq that is not a multiple of the split gets a last, shorter split.
  EXPECT_EQ(AttentionDecodeSpec(32, 4, 64, 64, 4097).launch(1).grid[2], 65u);
}

TEST(AttentionSpec, DecodeWorkspaceHoldsPartialOutputsThenLogSumExps) {
  AttentionDecodeSpec d(32, 4, 64, 64, 4096);
  // 16 sequences x 32 heads x 64 splits x 64 fp32, then 16 x 32 x 64 fp32.
  EXPECT_EQ(d.partialLseOffset(16, 4096), size_t(16) * 32 * 64 * 64 * 4);
  EXPECT_EQ(d.workspaceBytes(16, 4096), size_t(16) * 32 * 64 * 65 * 4);
  EXPECT_EQ(d.workspaceBytes(1, 100), size_t(1) * 32 * 2 * 65 * 4);
  EXPECT_EQ(AttentionDecodeSpec(14, 2, 8, 16, 4096).partialLseOffset(3, 4096) % 16, 0u); // lse 16-byte aligned
}

TEST(AttentionSpec, SplitTokensFillTheGpuInOneWave) {
  // Resident blocks an SM: 3 at head dim 128 (68 KB of shared memory, ~160 registers), 4 at 64 (54 KB).
  EXPECT_EQ(AttentionDecodeSpec::residentBlocksPerSm(128), 3);
  EXPECT_EQ(AttentionDecodeSpec::residentBlocksPerSm(64), 4);
  // One wave on 132 SMs: Llama-2-7B (32 kv heads) at batch 1 wants 396 / 32 = 12 chunks of 4096: 342,
  // rounded up to 352 (still 12 chunks); TinyLlama (4 kv heads) 528 / 4 = 132 chunks at batch 1 (32
  // positions, raised to the 128 minimum) and 528 / 64 = 8 at batch 16 (512 positions).
  EXPECT_EQ(AttentionDecodeSpec::chooseSplitTokens(32, 128, 4096, 1), 352);
  EXPECT_EQ(AttentionDecodeSpec::chooseSplitTokens(4, 64, 4096, 1), 128);
  EXPECT_EQ(AttentionDecodeSpec::chooseSplitTokens(4, 64, 4096, 16), 512);
  // Llama-2-7B at batch 16 has 512 (sequence, kv head) pairs for 396 slots: ~4 waves' worth, 4 chunks.
  EXPECT_EQ(AttentionDecodeSpec::chooseSplitTokens(32, 128, 4096, 16), 1024);
  // A short session gets the shortest chunk; a long one never more than kMaxSplits chunks.
  EXPECT_EQ(AttentionDecodeSpec::chooseSplitTokens(4, 64, 100, 1), AttentionDecodeSpec::kMinSplitTokens);
  int s = AttentionDecodeSpec::chooseSplitTokens(1, 16, 100000, 1);
  EXPECT_EQ(s % 16, 0);
  EXPECT_LE(llvm::divideCeil(100000, s), uint64_t(AttentionDecodeSpec::kMaxSplits));

  AttentionDecodeSpec d = AttentionDecodeSpec::forSession(32, 32, 128, 4096);
  EXPECT_EQ(d.splitTokens, 352);
  EXPECT_EQ(d.maxSeq, 4096);
  EXPECT_EQ(d.numSplits(), 12);
  EXPECT_EQ(d.threads, 128); // 384 blocks for 132 SMs
  EXPECT_FALSE(bool(d.validate()));
}

// Eight warps exactly where the grid has at most one block an SM.
TEST(AttentionSpec, ForSessionGivesAFewBlocksGridEightWarps) {
  // TinyLlama at one sequence, 2048 positions: 16 chunks of 128 for 4 kv heads, 64 blocks.
  AttentionDecodeSpec tiny = AttentionDecodeSpec::forSession(32, 4, 64, 2048, 1, 132);
  EXPECT_EQ(tiny.numSplits() * 4, 64);
  EXPECT_EQ(tiny.threads, AttentionDecodeSpec::kFewBlocksThreads);
  EXPECT_FALSE(bool(tiny.validate()));
  // GPT-2 (12 heads, no grouping) at 1024 positions: 8 chunks of 128, 96 blocks.
  EXPECT_EQ(AttentionDecodeSpec::forSession(12, 12, 64, 1024, 1, 132).threads, 256);
  // 132 blocks is still one an SM; one more is not (the same session on 131 SMs).
  AttentionDecodeSpec one = AttentionDecodeSpec::forSession(4, 1, 64, 132 * 128, 1, 132);
  ASSERT_EQ(one.numSplits(), 132);
  EXPECT_EQ(one.threads, 256);
  AttentionDecodeSpec fewerSms = AttentionDecodeSpec::forSession(4, 1, 64, 132 * 128, 1, 131);
  EXPECT_GT(fewerSms.numSplits(), 131);
  EXPECT_EQ(fewerSms.threads, 128);
  // Sixteen sequences of TinyLlama, and Llama-3.2-1B (8 kv heads) at one: more blocks than SMs.
  EXPECT_EQ(AttentionDecodeSpec::forSession(32, 4, 64, 2048, 16, 132).threads, 128);
  EXPECT_EQ(AttentionDecodeSpec::forSession(32, 8, 64, 4096, 1, 132).threads, 128);
  // The shared memory follows the warps: 2 stages of 8 warps' 16-key K and V tiles at head dim 64.
  EXPECT_GT(tiny.sharedBytes(), AttentionDecodeSpec(32, 4, 64, 128, 2048).sharedBytes());
}

// One chunk of 2 warps exactly where every context is one chunk and that alone fits all the pairs in one wave.
TEST(AttentionSpec, ForSessionFitsManyShortPairsInOneWaveWithTwoWarps) {
  // 2-warp blocks at head dim 128: 3 stages of 2 warps' K and V tiles, 52 KB: 4 an SM against 3 of 4 warps.
  EXPECT_EQ(AttentionDecodeSpec(32, 32, 128, 128, 193, AttentionDecodeSpec::kManyPairsThreads).sharedBytes(), 52224u);
  EXPECT_EQ(AttentionDecodeSpec::residentBlocksPerSm(128, AttentionDecodeSpec::kManyPairsThreads), 4);
  // Llama-2-7B at 16 sequences of the e2e bench's cache of 193: 512 pairs for 396 slots of 4 warps, 528 of 2.
  AttentionDecodeSpec many = AttentionDecodeSpec::forSession(32, 32, 128, 193, 16, 132);
  EXPECT_EQ(many.threads, AttentionDecodeSpec::kManyPairsThreads);
  EXPECT_EQ(many.splitTokens, 208);
  EXPECT_EQ(many.numSplits(), 1);
  EXPECT_FALSE(bool(many.validate()));
  // The longest such cache; one position more has contexts of two chunks, so 4 warps and the usual split.
  EXPECT_EQ(AttentionDecodeSpec::forSession(32, 32, 128, AttentionDecodeSpec::kOneChunkTokens, 16, 132).threads, 64);
  const int64_t past = AttentionDecodeSpec::kOneChunkTokens + 1;
  AttentionDecodeSpec longer = AttentionDecodeSpec::forSession(32, 32, 128, past, 16, 132);
  EXPECT_EQ(longer.threads, 128);
  EXPECT_EQ(longer.splitTokens, AttentionDecodeSpec::chooseSplitTokens(32, 128, past, 16, 132));
  // 12 sequences (384 pairs) fit the 4-warp slots; 17 (544) overfill the 2-warp ones too: 4 warps both.
  EXPECT_EQ(AttentionDecodeSpec::forSession(32, 32, 128, 193, 12, 132).threads, 128);
  EXPECT_EQ(AttentionDecodeSpec::forSession(32, 32, 128, 193, 17, 132).threads, 128);
  // A short cache still gets a whole chunk of at least kMinSplitTokens; a cache of no positions is refused for
  // what it is.
  EXPECT_EQ(AttentionDecodeSpec::forSession(32, 32, 128, 100, 16, 132).splitTokens,
            AttentionDecodeSpec::kMinSplitTokens);
  llvm::Error none = AttentionDecodeSpec::forSession(32, 32, 128, 0, 16, 132).validate();
  ASSERT_TRUE(bool(none));
  EXPECT_NE(llvm::toString(std::move(none)).find("max_seq must be positive"), std::string::npos);
  // Where the grid fits the SMs the empty chunks' blocks stay (TinyLlama at one sequence: 8 blocks, 4 empty).
  AttentionDecodeSpec tiny = AttentionDecodeSpec::forSession(32, 4, 64, 193, 1, 132);
  EXPECT_EQ(tiny.numSplits(), 2);
  EXPECT_EQ(tiny.threads, AttentionDecodeSpec::kFewBlocksThreads);
}

// Decode attention's warps are a tile where every context is one chunk: "t" and the block's threads, 2 to 16
// warps within the target's shared memory. The key names forSession's own choice and the short-context regime,
// and withTile leaves it (and the split, the grid, the workspace) alone.
TEST(AttentionSpec, DecodeWarpsAreATileWhereEveryContextIsOneChunk) {
  auto sm90a = parseTarget("sm_90a");
  ASSERT_TRUE(bool(sm90a));
  // TinyLlama at one sequence of the decode buckets' 256 positions: 8 warps planned (a few-block grid).
  AttentionDecodeSpec tiny = AttentionDecodeSpec::forSession(32, 4, 64, 256, 1, 132);
  ASSERT_EQ(tiny.threads, AttentionDecodeSpec::kFewBlocksThreads);
  EXPECT_EQ(tiny.tuningKey(), "attention_decode_bf16_h32_kv4_d64_ctx256_t256");
  EXPECT_EQ(tiny.tileName(), "t256");
  auto sixteen = tiny.withTile("t512", *sm90a);
  ASSERT_NE(sixteen, nullptr);
  const auto &s = static_cast<const AttentionDecodeSpec &>(*sixteen);
  EXPECT_EQ(s.threads, 512);
  EXPECT_EQ(s.name(), "attention_decode_bf16_h32_kv4_d64_s128_t512");
  EXPECT_EQ(s.tuningKey(), tiny.tuningKey());
  EXPECT_EQ(s.splitTokens, tiny.splitTokens);
  EXPECT_EQ(s.workspaceBytes(1, 256), tiny.workspaceBytes(1, 256));
  EXPECT_EQ(s.launch(1).grid[2], tiny.launch(1).grid[2]);
  EXPECT_EQ(s.launch(1).block[0], 512u);
  EXPECT_GT(s.sharedBytes(), tiny.sharedBytes());
  for (const char *bad : {"t1024", "t96", "t32", "t", "t128x", "s128", "m1_r4_w8", ""})
    EXPECT_EQ(tiny.withTile(bad, *sm90a), nullptr) << bad;
  // Every warp count fits at head dim 64; the default among them, and the others its step neighbours.
  std::vector<std::string> tiles;
  for (const auto &c : tiny.tuningCandidates(*sm90a, 1)) tiles.push_back(c->tileName());
  EXPECT_EQ(tiles, (std::vector<std::string>{"t64", "t128", "t256", "t512"}));
  std::vector<std::string> neighbours;
  for (const auto &n : tiny.stepNeighbours(*sm90a)) neighbours.push_back(n->tileName());
  EXPECT_EQ(neighbours, (std::vector<std::string>{"t64", "t128", "t512"}));

  // Llama-2-7B at 16 sequences plans 2 warps; at one sequence 8: two keys. 16 warps of head dim 128 need 278 KB
  // (2 stages of 16 warps' K and V tiles), more than a block may have: not a candidate.
  AttentionDecodeSpec many = AttentionDecodeSpec::forSession(32, 32, 128, 256, 16, 132);
  EXPECT_EQ(many.tuningKey(), "attention_decode_bf16_h32_kv32_d128_ctx256_t64");
  EXPECT_EQ(AttentionDecodeSpec::forSession(32, 32, 128, 256, 1, 132).tuningKey(),
            "attention_decode_bf16_h32_kv32_d128_ctx256_t256");
  EXPECT_EQ(many.withTile("t512", *sm90a), nullptr);
  auto big = std::static_pointer_cast<AttentionDecodeSpec>(many.withTile("t256", *sm90a));
  ASSERT_NE(big, nullptr);
  big->threads = 512;
  llvm::Error tooBig = big->validate(*sm90a);
  ASSERT_TRUE(bool(tooBig));
  EXPECT_NE(llvm::toString(std::move(tooBig)).find("bytes of shared memory exceed"), std::string::npos);
  tiles.clear();
  for (const auto &c : many.tuningCandidates(*sm90a, 16)) tiles.push_back(c->tileName());
  EXPECT_EQ(tiles, (std::vector<std::string>{"t64", "t128", "t256"}));

  // A cache longer than one chunk keeps forSession's warps: nothing to tune.
  AttentionDecodeSpec longer = AttentionDecodeSpec::forSession(32, 4, 64, AttentionDecodeSpec::kOneChunkTokens + 1, 1, 132);
  EXPECT_EQ(longer.tuningKey(), "");
  EXPECT_TRUE(longer.tuningCandidates(*sm90a, 1).empty());
  EXPECT_TRUE(longer.stepNeighbours(*sm90a).empty());
}

TEST(AttentionSpec, ValidateRejectsWhatTheTemplatesWouldNotCompile) {
  auto rejects = [](llvm::Error e, const std::string &needle) {
    ASSERT_TRUE(bool(e)) << "expected an error mentioning " << needle;
    std::string msg = llvm::toString(std::move(e));
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  };
  EXPECT_FALSE(bool(AttentionPrefillSpec(32, 4, 64).validate()));
  EXPECT_FALSE(bool(AttentionDecodeSpec(32, 4, 64, 64, 4096).validate()));
  rejects(AttentionPrefillSpec(6, 4, 64).validate(), "not a multiple of kv_heads");
  rejects(AttentionPrefillSpec(8, 8, 12).validate(), "head_dim 12");
  rejects(AttentionPrefillSpec(8, 8, 256).validate(), "head_dim 256");
  rejects(AttentionPrefillSpec(8, 8, 64, 64, 64, 8).validate(), "block_m");
  rejects(AttentionPrefillSpec(8, 8, 64, 64, 24, 4).validate(), "block_n");
  auto sm90a = parseTarget("sm_90a"), sm89 = parseTarget("sm_89");
  ASSERT_TRUE(sm90a && sm89);
  EXPECT_FALSE(bool(AttentionPrefillSpec::hopper(32, 4, 64, 128, 128, 2).validate(*sm90a)));
  rejects(AttentionPrefillSpec::hopper(32, 4, 64, 128, 128, 2).validate(*sm89), "need an sm_90a target, not sm_89");
  rejects(AttentionPrefillSpec::hopper(8, 8, 72, 128, 128, 2).validate(), "head dims 64..128 in steps of 16");
  rejects(AttentionPrefillSpec::hopper(8, 8, 32, 128, 128, 2).validate(), "head dims 64..128 in steps of 16");
  EXPECT_FALSE(bool(AttentionPrefillSpec::hopper(8, 8, 64, 192, 128, 2).validate(*sm90a)));
  EXPECT_EQ(AttentionPrefillSpec::hopper(8, 8, 64, 192, 128, 2).warps, 16); // three consumers and the producer
  rejects(AttentionPrefillSpec::hopper(8, 8, 80, 192, 128, 2).validate(), "block_m 192 takes head dim 64 only");
  rejects(AttentionPrefillSpec::hopper(8, 8, 64, 256, 128, 2).validate(), "block_m must be 64, 128 or 192");
  rejects(AttentionPrefillSpec::hopper(8, 8, 64, 128, 32, 2).validate(), "block_n must be 64 or 128");
  rejects(AttentionPrefillSpec::hopper(8, 8, 64, 128, 128, 1).validate(), "stages");
  rejects(AttentionPrefillSpec::hopper(8, 8, 128, 128, 128, 4).validate(*sm90a), "bytes of shared memory exceed");
  rejects(AttentionDecodeSpec(8, 8, 64, 24, 4096).validate(), "split_tokens");
  rejects(AttentionDecodeSpec(8, 8, 64, 64, 0).validate(), "max_seq");
  rejects(AttentionDecodeSpec(8, 8, 64, 16, 4097).validate(), "257 splits");
  rejects(AttentionDecodeSpec(8, 8, 64, 64, 4096, 100).validate(), "threads");
}

TEST(AttentionSpec, JsonNamesTheFamilyAndEveryField) {
  llvm::json::Object j = AttentionDecodeSpec(32, 4, 64, 64, 4096).toJSON();
  EXPECT_EQ(j.getString("family"), llvm::Optional<llvm::StringRef>("attention_decode"));
  EXPECT_EQ(j.getInteger("num_splits"), llvm::Optional<int64_t>(64));
  EXPECT_EQ(j.getInteger("max_seq"), llvm::Optional<int64_t>(4096));
  llvm::json::Object p = AttentionPrefillSpec(32, 4, 64).toJSON();
  EXPECT_EQ(p.getInteger("block_n"), llvm::Optional<int64_t>(64));
  EXPECT_EQ(p.getInteger("shared_bytes"), llvm::Optional<int64_t>(AttentionPrefillSpec(32, 4, 64).sharedBytes()));
}

// ---- NVRTC ----------------------------------------------------------------------------------------------

struct Heads {
  int heads, kvHeads, headDim;
};

// Head dims 8..128; GQA ratios 1, 4, 7, 8 and MQA; the test fixtures' shapes (4/2/16, 4/1/32, 8/8/8) and the
// real models' (Llama-2-7B 32/32/128, TinyLlama 32/4/64, Qwen2.5-0.5B 14/2/64, Llama-3 32/8/128). 32/1/64
// has a group of 32 query heads: decode takes two 16-row passes.
// Head dims 24 and 96 (GPT-2 with 2 heads of 48 features; Phi-3) do not divide a warp's 32 lanes into whole
// float4 rows (the merge of the chunks; they once failed to compile in the combine kernel it replaced).
const Heads kSweep[] = {{8, 8, 8},    {4, 2, 16},  {16, 4, 16}, {2, 2, 24},   {4, 1, 32},  {32, 4, 64},
                        {14, 2, 64},  {32, 1, 64}, {32, 32, 96}, {32, 32, 128}, {32, 8, 128}};

// The spec's source, plus static_asserts that the template's shared-memory formula agrees with the host's.
KernelSource withSmemCheck(const KernelSpec &spec, const std::string &check) {
  KernelSource s = kernelSource(spec);
  s.text += check;
  return s;
}

// The sweep's sources. `full`: every head config with its default tiles, plus every candidate prefill tile
// for the first config of each head dim; otherwise only the first config of each head dim, default tiles.
// (~70 NVRTC compiles in all, about 0.5 s each: the whole test stays well under a minute on two cores.)
std::vector<KernelSource> sweepSources(bool full) {
  std::vector<KernelSource> out;
  std::vector<int> seenDims;
  for (const Heads &h : kSweep) {
    const bool firstOfDim = std::find(seenDims.begin(), seenDims.end(), h.headDim) == seenDims.end();
    seenDims.push_back(h.headDim);
    if (!full && !firstOfDim) continue;
    std::vector<AttentionPrefillSpec> prefills = {AttentionPrefillSpec(h.heads, h.kvHeads, h.headDim)};
    if (full && firstOfDim) prefills = AttentionPrefillSpec::candidates(h.heads, h.kvHeads, h.headDim);
    for (const AttentionPrefillSpec &p : prefills)
      out.push_back(withSmemCheck(p, "static_assert(minfer::attn::prefillSmemBytes(" + std::to_string(p.headDim) + ", " +
                                         std::to_string(p.blockM) + ", " + std::to_string(p.blockN) +
                                         ") == " + std::to_string(p.sharedBytes()) + ", \"host/template smem\");\n"));
    AttentionDecodeSpec d = AttentionDecodeSpec::forSession(h.heads, h.kvHeads, h.headDim, 4096);
    out.push_back(withSmemCheck(d, "static_assert(minfer::attn::decodeSmemBytes(" + std::to_string(d.headDim) + ", " +
                                       std::to_string(d.threads) + ") == " + std::to_string(d.sharedBytes()) +
                                       ", \"host/template smem\");\n"));
  }
  return out;
}

// Compiles every source for `targetName` on two threads (the CI machine has two cores); returns the failures.
std::vector<std::string> compileAll(const std::vector<KernelSource> &sources, const std::string &targetName) {
  auto target = parseTarget(targetName);
  if (!target) return {llvm::toString(target.takeError())};
  std::vector<std::string> failures;
  for (size_t i = 0; i < sources.size(); i += 2) {
    std::vector<std::future<std::string>> jobs;
    for (size_t j = i; j < std::min(i + 2, sources.size()); ++j)
      jobs.push_back(std::async(std::launch::async, [&, j]() -> std::string {
        auto compiled = compileKernel(sources[j], *target);
        if (!compiled) return llvm::toString(compiled.takeError());
        if (compiled->loweredName.empty() || compiled->cubin.empty()) return sources[j].name + ": no entry or cubin";
        return "";
      }));
    for (auto &job : jobs)
      if (std::string e = job.get(); !e.empty()) failures.push_back(e);
  }
  return failures;
}

// sm_90 (H100/H200, where the benchmarks run) gets the whole sweep and every prefill tile the autotuner
// may pick.
TEST(AttentionSpec, EveryTemplateCompilesUnderNvrtcForSm90) {
  for (const std::string &f : compileAll(sweepSources(/*full=*/true), "sm_90")) ADD_FAILURE() << f;
}

// sm_90a: every wgmma prefill tile for head dims 64 (GQA 8) and 128, and the default tile for the padded
// head dims 80 and 96, with the template's shared-memory formula checked against the host's. ptxas's "wgmma serialized" warning fails
// the compile (jit/Nvrtc.cpp), so this also checks that the wgmmas stay asynchronous.
TEST(AttentionSpec, EveryWgmmaPrefillTileCompilesUnderNvrtcForSm90a) {
  auto sm90a = parseTarget("sm_90a");
  ASSERT_TRUE(bool(sm90a));
  std::vector<KernelSource> sources;
  for (const Heads &h : std::vector<Heads>{{32, 4, 64}, {8, 8, 80}, {32, 32, 96}, {32, 32, 128}})
    for (const AttentionPrefillSpec &p : AttentionPrefillSpec::candidates(h.heads, h.kvHeads, h.headDim, &*sm90a)) {
      if (!p.wgmma || (h.headDim % 64 != 0 && p.name() != AttentionPrefillSpec::forTarget(h.heads, h.kvHeads, h.headDim, *sm90a).name()))
        continue;
      sources.push_back(withSmemCheck(p, "static_assert(minfer::attn::prefillWgmmaSmemBytes(" + std::to_string(p.headDim) +
                                             ", " + std::to_string(p.blockM) + ", " + std::to_string(p.blockN) + ", " +
                                             std::to_string(p.stages) + ") == " + std::to_string(p.sharedBytes()) +
                                             ", \"host/template smem\");\n"));
    }
  // 4 tiles at head dims 64 and 128 (a third 128-key slot fits both), the two 192-row tiles at 64, 1 at 80 and 96
  EXPECT_EQ(sources.size(), 12u);
  for (const std::string &f : compileAll(sources, "sm_90a")) ADD_FAILURE() << f;
}

// residentBlocksPerSm plans the waves of decode attention (chooseSplitTokens, the 2-warp rule) from registers
// it assumes, not from the kernel: a template change that took more would leave the host planning blocks the
// SM cannot hold. So NVRTC's registers for the shapes it plans (head dims 128 and 64, 2, 4 and 8 warps),
// allocated in 8-register steps, must allow at least as many blocks as it counts on. The same sources check
// that the template agrees with the host's mirrors: the shared memory of each warp count, and the longest
// one-chunk context (the 2-warp rule's kOneChunkTokens).
TEST(AttentionSpec, DecodeRegistersAllowTheBlocksTheHostPlansFor) {
  auto sm90a = parseTarget("sm_90a");
  ASSERT_TRUE(bool(sm90a));
  for (int headDim : {128, 64})
    for (int threads : {AttentionDecodeSpec::kManyPairsThreads, 128, AttentionDecodeSpec::kFewBlocksThreads}) {
      AttentionDecodeSpec spec(32, headDim == 128 ? 32 : 4, headDim, 128, 193, threads);
      SCOPED_TRACE(spec.name());
      auto compiled = compileKernel(
          withSmemCheck(spec, "static_assert(minfer::attn::decodeSmemBytes(" + std::to_string(headDim) + ", " +
                                  std::to_string(threads) + ") == " + std::to_string(spec.sharedBytes()) +
                                  ", \"host/template smem\");\nstatic_assert(minfer::attn::kOneChunkTokens == " +
                                  std::to_string(AttentionDecodeSpec::kOneChunkTokens) + ", \"host/template chunk\");\n"),
          *sm90a);
      ASSERT_TRUE(bool(compiled)) << llvm::toString(compiled.takeError());
      std::optional<int> regs = cubinRegisters(compiled->cubin);
      ASSERT_TRUE(regs.has_value());
      const int perWarp = (*regs + 7) / 8 * 8 * 32;
      EXPECT_GE(65536 / (perWarp * (threads / 32)), AttentionDecodeSpec::residentBlocksPerSm(headDim, threads))
          << *regs << " registers a thread";
    }
}

// sm_80 and sm_89 (Ampere, Ada: the same mma.sync / ldmatrix / cp.async code) get one config per head dim.
TEST(AttentionSpec, EveryTemplateCompilesUnderNvrtcForSm80AndSm89) {
  for (const char *arch : {"sm_80", "sm_89"})
    for (const std::string &f : compileAll(sweepSources(/*full=*/false), arch)) ADD_FAILURE() << arch << ": " << f;
}

} // namespace
} // namespace minfer
