// tests/unit/GemmSpecTest.cpp — the matmul kernel specs (gemm, gemv) and their epilogues, on the CPU:
// readable unique names, the exact template-ids, launch geometry and shared memory, which tiles are valid
// on which target, the heuristic defaults, and that the templates compile under NVRTC (sm_90 for a sweep
// of shapes, tiles and epilogues; sm_80 and sm_89 for the defaults). NVRTC needs no GPU; a compile takes
// 0.1-0.8 s here; the ~60 compiles take ~30 s of CPU.
#include "jit/Nvrtc.h"
#include "compiler/kernels/Gemm.h"
#include "compiler/kernels/Gemv.h"
#include "compiler/Tuning.h"

#include <gtest/gtest.h>

#include <set>
#include <utility>

using namespace minfer;

namespace {

Target target(llvm::StringRef name) {
  auto t = parseTarget(name);
  EXPECT_TRUE(bool(t)) << llvm::toString(t.takeError());
  return t ? *t : Target{};
}

int64_t intField(const llvm::json::Object &o, llvm::StringRef key) { return o.getInteger(key).getValueOr(-1); }

std::string errorOf(llvm::Error e) { return e ? llvm::toString(std::move(e)) : std::string("(success)"); }

// Compiles `spec` for `t`; a failure names the spec and carries NVRTC's log.
void expectCompiles(const KernelSpec &spec, const Target &t) {
  auto compiled = compileKernel(kernelSource(spec), t);
  ASSERT_TRUE(bool(compiled)) << spec.name() << " for " << t.name << ":\n" << llvm::toString(compiled.takeError());
  EXPECT_FALSE(compiled->cubin.empty()) << spec.name();
  EXPECT_FALSE(compiled->loweredName.empty()) << spec.name();
  EXPECT_EQ(cubinSmVersion(compiled->cubin), t.smVersion()) << spec.name();
}

// A tensor map reads `pointer` (a pointer field of the spec's Params) as `outer` rows of `inner` elements,
// in boxInner x boxOuter boxes.
void expectMap(const KernelSpec &spec, const TensorMapArg &m, llvm::StringRef pointer, int64_t inner, int64_t outer,
               int boxInner, int boxOuter) {
  EXPECT_EQ(llvm::StringRef(m.pointer), pointer);
  EXPECT_EQ(m.inner, inner) << pointer.str();
  EXPECT_EQ(m.outer, outer) << pointer.str();
  EXPECT_EQ(m.boxInner, boxInner) << pointer.str();
  EXPECT_EQ(m.boxOuter, boxOuter) << pointer.str();
  int f = spec.params().find(m.pointer);
  ASSERT_GE(f, 0) << m.pointer;
  EXPECT_EQ(spec.params().fields[f].type, ParamType::Ptr) << m.pointer;
}

// The projections of the models in examples/ (N, K), plus the odd and tiny shapes the GPU tests use.
const std::pair<int64_t, int64_t> kShapes[] = {
    {2048, 2048}, {256, 2048}, {5632, 2048}, {2048, 5632}, {32000, 2048}, // TinyLlama-1.1B
    {4096, 4096}, {11008, 4096}, {4096, 11008},                            // Llama-2-7B
    {2304, 768},  {50257, 768},                                            // GPT-2: c_attn, lm_head
    {64, 64},     {321, 64},     {136, 96},                                // test fixtures
};

// ---- epilogues ------------------------------------------------------------------------------------------

// Every epilogue the plan can name: the pointwise ones, a gated one per activation, qkv in each rope style.
std::vector<Epilogue> everyEpilogue() {
  std::vector<Epilogue> all = allPointwiseEpilogues();
  all.push_back(Epilogue::pointwise(true, Activation::Silu, true, true));
  for (Activation a : {Activation::GeluTanh, Activation::GeluErf, Activation::Silu, Activation::Relu})
    all.push_back(Epilogue::gated(a));
  for (QkvRope r : {QkvRope::None, QkvRope::Half, QkvRope::Interleaved})
    for (bool bias : {false, true}) all.push_back(Epilogue::qkv(32, 4, 64, r, bias));
  return all;
}

TEST(Epilogue, EveryEpilogueHasItsOwnSuffixAndPolicy) {
  std::set<std::string> suffixes, policies;
  std::vector<Epilogue> all = everyEpilogue();
  for (const Epilogue &e : all) {
    EXPECT_TRUE(llvm::StringRef(e.policy()).startswith("minfer::Epi")) << e.policy();
    suffixes.insert(e.suffix());
    policies.insert(e.policy());
  }
  EXPECT_EQ(allPointwiseEpilogues().size(), 20u);
  EXPECT_EQ(suffixes.size(), all.size());
  EXPECT_EQ(policies.size(), all.size());
}

TEST(Epilogue, NamesSpellWhatTheKernelDoes) {
  EXPECT_EQ(Epilogue::None.policy(), "minfer::EpiPointwise<false, minfer::ActNone, false, false>");
  EXPECT_EQ(Epilogue::None.suffix(), "none");
  EXPECT_EQ(Epilogue::BiasGeluTanh.suffix(), "bias_gelu_tanh");
  EXPECT_EQ(Epilogue::pointwise(true, Activation::Silu, true, true).suffix(), "bias_silu_scale_residual");
  EXPECT_EQ(Epilogue::BiasResidual.policy(), "minfer::EpiPointwise<true, minfer::ActNone, false, true>");
  Epilogue gated = Epilogue::gated(Activation::Silu);
  EXPECT_EQ(gated.suffix(), "gated_silu");
  EXPECT_EQ(gated.policy(), "minfer::EpiGated<minfer::ActSilu>");
  EXPECT_EQ(gated.outCols(11264), 5632);
  Epilogue qkv = Epilogue::qkv(32, 4, 64, QkvRope::Half, false);
  EXPECT_EQ(qkv.suffix(), "qkv_h32_kv4_d64_half");
  EXPECT_EQ(qkv.policy(), "minfer::EpiQkv<32, 4, 64, 1, false>");
  EXPECT_EQ(qkv.outCols(2560), 2048);
  EXPECT_EQ(Epilogue::qkv(12, 12, 64, QkvRope::None, true).suffix(), "qkv_h12_kv12_d64_norope_bias");
}

TEST(Epilogue, ShapesThePolicyCannotTakeAreErrors) {
  EXPECT_EQ(errorOf(Epilogue::qkv(32, 4, 64, QkvRope::Half, false).validate(2560)), "(success)");
  std::string msg = errorOf(Epilogue::qkv(32, 4, 64, QkvRope::Half, false).validate(2048));
  EXPECT_NE(msg.find("N = (heads + 2 kv_heads) * head_dim = 2560, got 2048"), std::string::npos) << msg;
  msg = errorOf(Epilogue::gated(Activation::Silu).validate(321));
  EXPECT_NE(msg.find("needs an even N"), std::string::npos) << msg;
  msg = errorOf(GemvSpec(320, 64, Epilogue::gated(Activation::Silu), GemvTile{1, 1, 4}).validate());
  EXPECT_NE(msg.find("even rowsPerWarp"), std::string::npos) << msg;
}

TEST(Epilogue, TheArgmaxEpilogueIsThePlainProductInTheFmaAndWgmmaGemvs) {
  Epilogue argmax = Epilogue::None;
  argmax.argmax = true;
  EXPECT_EQ(argmax.suffix(), "none_argmax");
  EXPECT_EQ(argmax.policy(), "minfer::EpiArgmax");
  EXPECT_EQ(errorOf(argmax.validate(32000)), "(success)");
  Epilogue withBias = Epilogue::Bias;
  withBias.argmax = true;
  EXPECT_NE(errorOf(withBias.validate(32000)).find("nothing else may be fused"), std::string::npos);
  Target h100 = target("sm_90");
  GemvSpec fma(32000, 2048, argmax, GemvTile{1, 8, 2});
  EXPECT_EQ(errorOf(fma.validate()), "(success)");
  // Tuned like the plain product: the same tuning key.
  EXPECT_EQ(fma.tuningKey(), GemvSpec(32000, 2048, Epilogue::None, GemvTile{1, 8, 2}).tuningKey());
  EXPECT_NE(errorOf(GemvSpec(32000, 2048, argmax, GemvTile{1, 1, 4, true}).validate()).find("not the mma.sync kernel"),
            std::string::npos);
  EXPECT_NE(errorOf(GemmSpec(32000, 2048, argmax, GemmTile{}).validate(h100)).find("gemv only"), std::string::npos);
  for (const auto &c : fma.tuningCandidates(h100, 1)) EXPECT_EQ(c->name().find("_mma_"), std::string::npos) << c->name();
  // The wgmma gemv folds it too (sm_90a), with or without the norm prologue; its candidates keep every wgmma
  // tile and drop the mma.sync ones.
  const Target hopper = target("sm_90a");
  GemvSpec wgmma(32000, 2048, argmax, GemvTile::hopper(16, 128, 4, 1), Prologue{Prologue::Kind::Rms, ir::DType::BF16});
  EXPECT_EQ(errorOf(wgmma.validate(&hopper)), "(success)");
  EXPECT_EQ(wgmma.name(), "gemv_bf16_n32000_k2048_m16_wgmma_k128_s4_split1_epi_none_argmax_pro_rms_bf16");
  // Its block's best key per row (16 rows of 8 bytes) follows gamma's share (2048 bf16 and a barrier).
  EXPECT_EQ(wgmma.sharedBytes(), wgmma.tile.sharedBytes() + 2048 * 2 + 16 + 16 * 8);
  EXPECT_EQ(GemvSpec(32000, 2048, argmax, GemvTile::hopper(8, 128, 4, 1)).sharedBytes(),
            GemvTile::hopper(8, 128, 4, 1).sharedBytes() + 8 * 8);
  int wgmmaTiles = 0;
  for (const auto &c : wgmma.tuningCandidates(hopper, 16)) {
    EXPECT_EQ(c->name().find("_mma_"), std::string::npos) << c->name();
    wgmmaTiles += c->name().find("_wgmma_") != std::string::npos;
  }
  EXPECT_GT(wgmmaTiles, 0);
}

// A wgmma gemv's step neighbours are its tile with one slot fewer and one more, then with one block fewer and
// one more in the cluster that splits K, among its candidates; fewer than two slots, a ring past the block's
// shared memory, a split that leaves a block without K, and the FMA and mma.sync tiles have none.
TEST(GemvSpec, StepNeighboursAreTheWgmmaTileWithASlotOrASplitBlockMoreOrLess) {
  const Target hopper = target("sm_90a");
  const Epilogue gated = Epilogue::gated(Activation::Silu);
  auto tilesOf = [](const std::vector<std::shared_ptr<KernelSpec>> &specs) {
    std::vector<std::string> out;
    for (const auto &s : specs) out.push_back(s->tileName());
    return out;
  };
  GemvSpec gateUp(11264, 2048, gated, GemvTile::hopper(1, 128, 4, 1));
  const std::vector<std::string> gateUpNeighbours = {"m1_wgmma_k128_s3_split1", "m1_wgmma_k128_s5_split1",
                                                     "m1_wgmma_k128_s4_split2"};
  EXPECT_EQ(tilesOf(gateUp.stepNeighbours(hopper)), gateUpNeighbours);
  std::vector<std::string> candidates = tilesOf(gateUp.tuningCandidates(hopper, 1));
  for (const std::string &t : gateUpNeighbours) EXPECT_EQ(std::count(candidates.begin(), candidates.end(), t), 1) << t;
  // A split of 3: one block fewer and one more.
  EXPECT_EQ(tilesOf(GemvSpec(2048, 5632, Epilogue::None, GemvTile::hopper(16, 128, 8, 3)).stepNeighbours(hopper)),
            (std::vector<std::string>{"m16_wgmma_k128_s7_split3", "m16_wgmma_k128_s9_split3", "m16_wgmma_k128_s8_split2",
                                      "m16_wgmma_k128_s8_split4"}));
  // Two slots: not one fewer.
  EXPECT_EQ(tilesOf(GemvSpec(2048, 2048, Epilogue::None, GemvTile::hopper(16, 256, 2, 1)).stepNeighbours(hopper)),
            (std::vector<std::string>{"m16_wgmma_k256_s3_split1", "m16_wgmma_k256_s2_split2"}));
  // 11 slots of 128 (16 rows) is the most a block's 227 KB hold: not one more.
  GemvTile full = GemvTile::hopper(16, 128, 11, 1);
  ASSERT_LE(full.sharedBytes(), 227 * 1024);
  ASSERT_GT(GemvTile::hopper(16, 128, 12, 1).sharedBytes(), 227 * 1024);
  EXPECT_EQ(tilesOf(GemvSpec(2048, 2048, Epilogue::None, full).stepNeighbours(hopper)),
            (std::vector<std::string>{"m16_wgmma_k128_s10_split1", "m16_wgmma_k128_s11_split2"}));
  // K = 256 is two 128-wide slices: a split of 3 would leave a block without any.
  EXPECT_EQ(tilesOf(GemvSpec(2048, 256, Epilogue::None, GemvTile::hopper(1, 128, 4, 2)).stepNeighbours(hopper)),
            (std::vector<std::string>{"m1_wgmma_k128_s3_split2", "m1_wgmma_k128_s5_split2", "m1_wgmma_k128_s4_split1"}));
  // A 3-slot tile's neighbours, 2 and 4, are also the stock candidates: listed once.
  std::vector<std::string> three = tilesOf(GemvSpec(11264, 2048, gated, GemvTile::hopper(1, 128, 3, 1)).tuningCandidates(hopper, 1));
  for (const char *t : {"m1_wgmma_k128_s2_split1", "m1_wgmma_k128_s4_split1"})
    EXPECT_EQ(std::count(three.begin(), three.end(), t), 1) << t;
  EXPECT_TRUE(GemvSpec(2048, 2048, Epilogue::None, GemvTile{1, 1, 8}).stepNeighbours(hopper).empty());
  EXPECT_TRUE(GemvSpec(2048, 2048, Epilogue::None, GemvTile{16, 1, 4, true}).stepNeighbours(hopper).empty());
  // A split of 0 (one block fewer than 1, or a hand-edited database) is an error, also where the block's shared
  // memory holds gamma's share (K / split): validated before that sum.
  GemvSpec withNorm(2048, 2048, Epilogue::None, GemvTile::hopper(1, 128, 4, 0), Prologue{Prologue::Kind::Rms, ir::DType::BF16});
  EXPECT_NE(errorOf(withNorm.validate(&hopper)).find("the split must be 1..8"), std::string::npos);
  EXPECT_EQ(withNorm.withTile("m1_wgmma_k128_s4_split0", hopper), nullptr);
}

// An entry lacks the step neighbours of the default and of its own winner that it lists nowhere: minferc
// autotune times such an entry again (one from a minfer whose tuner kept fewer of them).
TEST(GemvSpec, AnEntryWithoutItsStepNeighboursIsTimedAgain) {
  const Target hopper = target("sm_90a");
  GemvSpec gateUp(11264, 2048, Epilogue::gated(Activation::Silu), GemvTile::hopper(16, 128, 4, 1));
  TuningEntry e;
  e.defaultTile = gateUp.tileName();
  e.tile = "m16_wgmma_k128_s8_split2";
  const std::vector<std::string> all = {"m16_wgmma_k128_s3_split1", "m16_wgmma_k128_s5_split1", "m16_wgmma_k128_s4_split2",
                                        "m16_wgmma_k128_s7_split2", "m16_wgmma_k128_s9_split2", "m16_wgmma_k128_s8_split1",
                                        "m16_wgmma_k128_s8_split3"};
  EXPECT_EQ(missingStepNeighbours(e, gateUp, hopper), all);
  // Session 29's entries: the default's slot neighbours only.
  e.runnersUp = {{"m16_wgmma_k128_s3_split1", 20}, {"m16_wgmma_k128_s5_split1", 19}};
  EXPECT_EQ(missingStepNeighbours(e, gateUp, hopper), std::vector<std::string>(all.begin() + 2, all.end()));
  // A neighbour whose timing failed counts as tried: it is not timed again on every run.
  e.failedTiles = {all[2]};
  EXPECT_EQ(missingStepNeighbours(e, gateUp, hopper), std::vector<std::string>(all.begin() + 3, all.end()));
  e.failedTiles.clear();
  for (size_t i = 2; i < all.size(); ++i) e.runnersUp.push_back({all[i], 18});
  EXPECT_TRUE(missingStepNeighbours(e, gateUp, hopper).empty());
  // After the in-step pass moved it to a neighbour: the tile its own timing picked keeps its neighbours, and
  // the one it left is a runner-up.
  e.kernelTile = e.tile;
  e.tile = "m16_wgmma_k128_s5_split1";
  std::erase_if(e.runnersUp, [&](const TuningEntry::Timed &t) { return t.tile == e.tile; });
  EXPECT_TRUE(missingStepNeighbours(e, gateUp, hopper).empty());
  // An FMA winner has none: the default's alone.
  TuningEntry fma;
  fma.defaultTile = gateUp.tileName();
  fma.tile = "m16_r2_w4";
  EXPECT_EQ(missingStepNeighbours(fma, gateUp, hopper), std::vector<std::string>(all.begin(), all.begin() + 3));
}

TEST(Epilogue, PrologueNamesTheNormAndItsWeights) {
  Prologue none;
  EXPECT_EQ(none.suffix(), "");
  EXPECT_EQ(none.policy(), "minfer::ProNone");
  Prologue layer{Prologue::Kind::Layer, ir::DType::F32};
  EXPECT_EQ(layer.suffix(), "_pro_layer_f32");
  EXPECT_EQ(layer.policy(), "minfer::ProNorm<true, float>");
  GemvSpec spec(2560, 2048, Epilogue::qkv(32, 4, 64, QkvRope::Half, false), GemvTile{1, 2, 4},
                Prologue{Prologue::Kind::Rms, ir::DType::BF16});
  EXPECT_EQ(spec.name(), "gemv_bf16_n2560_k2048_m1_r2_w4_epi_qkv_h32_kv4_d64_half_pro_rms_bf16");
  EXPECT_EQ(spec.entry(), "minfer::gemv<2560, 2048, 1, 2, 4, minfer::EpiQkv<32, 4, 64, 1, false>, "
                          "minfer::ProNorm<false, __nv_bfloat16>>");
}

// ---- gemm spec ------------------------------------------------------------------------------------------

TEST(GemmSpec, NameAndEntrySpellEveryConstant) {
  GemmSpec spec(5632, 2048, Epilogue::Bias, GemmTile{128, 128, 32, 4, 2, 4});
  EXPECT_EQ(spec.name(), "gemm_bf16_n5632_k2048_m128n128k32_s4_w2x4_epi_bias");
  EXPECT_EQ(spec.entry(), "minfer::gemm<5632, 2048, 128, 128, 32, 4, 2, 4, minfer::EpiPointwise<true, minfer::ActNone, false, false>>");
  EXPECT_EQ(spec.header(), "gemm.cuh");
  EXPECT_NE(spec.source().find("#include \"gemm.cuh\""), std::string::npos);
  GemmSpec odd(50257, 768, Epilogue::BiasGeluTanh, GemmTile{64, 64, 64, 3, 2, 2});
  EXPECT_EQ(odd.name(), "gemm_bf16_n50257_k768_m64n64k64_s3_w2x2_epi_bias_gelu_tanh");
  EXPECT_EQ(odd.entry(),
            "minfer::gemm<50257, 768, 64, 64, 64, 3, 2, 2, minfer::EpiPointwise<true, minfer::ActGeluTanh, false, false>>");
}

TEST(GemmSpec, NamesAreUniquePerConfiguration) {
  std::set<std::string> names, entries;
  size_t count = 0;
  for (auto [n, k] : {std::pair<int64_t, int64_t>{2048, 2048}, {2048, 5632}, {321, 64}})
    for (const GemmTile &t : gemmTileCandidates(target("sm_90"), 4096, n, k))
      for (const Epilogue &e : allPointwiseEpilogues()) {
        GemmSpec spec(n, k, e, t);
        names.insert(spec.name());
        entries.insert(spec.entry());
        ++count;
      }
  EXPECT_GT(count, 300u);
  EXPECT_EQ(names.size(), count) << "two configurations share a name";
  EXPECT_EQ(entries.size(), count);
}

TEST(GemmSpec, LaunchCoversEveryRowAndColumn) {
  GemmSpec spec(321, 64, Epilogue::None, GemmTile{64, 64, 32, 4, 2, 2});
  LaunchDims d = spec.launch(130);
  EXPECT_EQ(d.grid, (std::array<unsigned, 3>{6, 3, 1})); // ceil(321 / 64), ceil(130 / 64)
  EXPECT_EQ(d.block, (std::array<unsigned, 3>{128, 1, 1}));
  EXPECT_EQ(d.sharedBytes, 4u * (64 + 64) * 32 * 2);
  EXPECT_EQ(spec.launch(1).grid[1], 1u);
  EXPECT_EQ(spec.launch(64).grid[1], 1u);
  EXPECT_EQ(spec.launch(65).grid[1], 2u);
  EXPECT_EQ(spec.launch(0).grid[1], 1u) << "M = 0 still launches one harmless block row";

  GemmSpec big(32000, 2048, Epilogue::None, GemmTile{128, 256, 32, 4, 2, 4});
  d = big.launch(2048);
  EXPECT_EQ(d.grid, (std::array<unsigned, 3>{125, 16, 1}));
  EXPECT_EQ(d.block[0], 256u);
  EXPECT_EQ(d.sharedBytes, 98304u); // 4 stages x (128 + 256) rows x 32 bf16
}

TEST(GemmSpec, JSONHoldsTheFields) {
  GemmSpec spec(2048, 5632, Epilogue::Residual, GemmTile{128, 128, 64, 3, 2, 2});
  llvm::json::Object o = spec.toJSON();
  EXPECT_EQ(o.getString("family"), llvm::StringRef("gemm"));
  EXPECT_EQ(intField(o, "n"), 2048);
  EXPECT_EQ(intField(o, "k"), 5632);
  EXPECT_EQ(o.getString("epilogue"), llvm::StringRef("residual"));
  EXPECT_EQ(intField(o, "shared_bytes"), 3 * 256 * 64 * 2);
  const llvm::json::Object *tile = o.getObject("tile");
  ASSERT_NE(tile, nullptr);
  EXPECT_EQ(intField(*tile, "bk"), 64);
  EXPECT_EQ(intField(*tile, "warps_n"), 2);
}

TEST(GemmTileCheck, RejectsWhatTheTemplateWouldRefuse) {
  const Target h100 = target("sm_90"), l4 = target("sm_89");
  EXPECT_EQ(errorOf(checkGemmTile(GemmTile{128, 128, 32, 4, 2, 2}, 2048, h100)), "(success)");
  struct Case {
    GemmTile tile;
    int64_t k;
    Target target;
    const char *message;
  };
  const Case cases[] = {
      {{128, 128, 32, 4, 2, 2}, 100, h100, "multiple of 8"},
      {{128, 128, 16, 4, 2, 2}, 2048, h100, "BK must be 32, 64 or 128"},
      {{96, 128, 32, 4, 4, 2}, 2048, h100, "BM must be a multiple of 16 * WARPS_M"},
      {{128, 40, 32, 4, 2, 2}, 2048, h100, "BN must be a multiple of 16 * WARPS_N"},
      {{128, 128, 32, 1, 2, 2}, 2048, h100, "STAGES must be at least 2"},
      {{256, 256, 32, 3, 1, 1}, 2048, h100, "warp tile above 128x64"},
      {{128, 256, 128, 3, 2, 4}, 2048, h100, "exceed the 232448"},
      {{128, 128, 64, 4, 2, 2}, 2048, l4, "exceed the 101376 a block may use on sm_89"},
  };
  EXPECT_NE(errorOf(GemmSpec(0, 64, Epilogue::None, GemmTile{}).validate(h100)).find("N = 0"), std::string::npos);
  EXPECT_EQ(errorOf(GemmSpec(321, 64, Epilogue::None, GemmTile{}).validate(h100)), "(success)");
  for (const Case &c : cases) {
    std::string msg = errorOf(checkGemmTile(c.tile, c.k, c.target));
    EXPECT_NE(msg.find(c.message), std::string::npos) << c.tile.str() << ": " << msg;
    EXPECT_NE(msg.find(c.tile.str()), std::string::npos) << "the message names the tile: " << msg;
  }
}

TEST(GemmTileCandidates, AreValidDistinctAndFitEveryTarget) {
  for (llvm::StringRef name : {"sm_80", "sm_86", "sm_89", "sm_90", "sm_120"}) {
    const Target t = target(name);
    for (int64_t m : {1, 17, 130, 2048}) {
      std::vector<GemmTile> tiles = gemmTileCandidates(t, m, 5632, 2048);
      EXPECT_GE(tiles.size(), 8u) << name.str() << " M=" << m;
      std::set<std::string> seen;
      for (const GemmTile &tile : tiles) {
        EXPECT_EQ(errorOf(checkGemmTile(tile, 2048, t)), "(success)") << name.str();
        EXPECT_LE(tile.sharedBytes(), t.maxSharedBytesPerBlock()) << tile.str();
        EXPECT_TRUE(seen.insert(tile.str()).second) << "duplicate " << tile.str();
        if (m <= 32) {
          EXPECT_LE(tile.bm, 32) << "M=" << m << " gets a " << tile.bm << "-row tile";
        }
      }
    }
  }
}

TEST(GemmDefaultTile, FitsTheShapeAndTheTarget) {
  const Target h100 = target("sm_90");
  // Large problems: 128x256 on sm_90 unless its fewer blocks cost a wave, else the 128x128 tile sized for
  // two blocks per SM.
  EXPECT_EQ(defaultGemmTile(h100, 2048, 2048, 2048), (GemmTile{128, 256, 64, 3, 2, 4}));
  EXPECT_EQ(defaultGemmTile(h100, 2048, 32000, 2048), (GemmTile{128, 256, 64, 3, 2, 4}));
  EXPECT_EQ(defaultGemmTile(h100, 2048, 11008, 4096, 132), (GemmTile{128, 128, 64, 3, 2, 2}));
  EXPECT_EQ(defaultGemmTile(target("sm_80"), 2048, 4096, 4096), (GemmTile{128, 128, 32, 4, 2, 2}));
  EXPECT_EQ(defaultGemmTile(target("sm_89"), 2048, 4096, 4096), (GemmTile{128, 128, 32, 3, 2, 2}));
  // Narrow N (TinyLlama's k/v projections): smaller tiles so 132 SMs have work.
  GemmTile kv = defaultGemmTile(h100, 2048, 256, 2048);
  EXPECT_EQ(kv.bm * kv.bn, 64 * 64) << kv.str();
  // Few rows: short tiles.
  EXPECT_EQ(defaultGemmTile(h100, 17, 2048, 2048).bm, 32);
  // Always valid, on every target, for every model shape and row count.
  for (llvm::StringRef name : {"sm_80", "sm_86", "sm_89", "sm_90", "sm_120"})
    for (auto [n, k] : kShapes)
      for (int64_t m : {1, 9, 64, 130, 2048, 8192}) {
        GemmTile tile = defaultGemmTile(target(name), m, n, k);
        EXPECT_EQ(errorOf(checkGemmTile(tile, k, target(name))), "(success)") << name.str() << " n" << n << " k" << k;
      }
}

// ---- the wgmma kernel (gemm_wgmma.cuh, sm_90a) -----------------------------------------------------------

TEST(GemmWgmmaSpec, NameEntryAndHeaderSpellEveryConstant) {
  GemmSpec s(5632, 2048, Epilogue::Bias, GemmTile::hopper(128, 256, 4));
  EXPECT_EQ(s.name(), "gemm_bf16_n5632_k2048_wgmma_m128n256_s4_epi_bias");
  EXPECT_EQ(s.entry(), "minfer::gemmWgmma<5632, 2048, 256, 2, 4, " + Epilogue(Epilogue::Bias).policy() + ">");
  EXPECT_EQ(s.header(), "gemm_wgmma.cuh");
  EXPECT_EQ(GemmSpec(64, 64, Epilogue::None, GemmTile{}).header(), "gemm.cuh");
  // A ping-pong tile says so in its name and as the entry's last argument.
  GemmSpec pp(5632, 2048, Epilogue::Bias, GemmTile::hopperPingpong(128, 4));
  EXPECT_EQ(pp.name(), "gemm_bf16_n5632_k2048_wgmma_m128n128_s4_pp_epi_bias");
  EXPECT_EQ(pp.entry(), "minfer::gemmWgmma<5632, 2048, 128, 2, 4, " + Epilogue(Epilogue::Bias).policy() + ", true>");
  EXPECT_EQ(pp.launch(2048).block[0], 384u);
  // The tile string round-trips, and each kind's parser refuses the other's near misses.
  for (GemmTile t : {GemmTile::hopper(64, 64, 2), GemmTile::hopper(128, 256, 4), GemmTile::hopperPingpong(64, 8),
                     GemmTile{128, 128, 32, 4, 2, 2}})
    EXPECT_EQ(parseGemmTile(t.str()), t) << t.str();
  for (llvm::StringRef bad : {"wgmma_m128n256", "wgmma_m128n256_s4x", "wgmma_m0128n256_s4", "wgmma_", "wgmma_m128n128_s4_p",
                              "wgmma_m128n128_s4_pp_pp"})
    EXPECT_FALSE(parseGemmTile(bad)) << bad.str();
  // A pair of blocks (a cluster of two sharing W) is another kernel, and says so in its name.
  GemmSpec pair(2560, 2048, Epilogue::None, GemmTile::hopperPingpong(80, 8).paired());
  EXPECT_EQ(pair.name(), "gemm_bf16_n2560_k2048_wgmma_m128n80_s8_pp_c2_epi_none");
  EXPECT_EQ(pair.entry(), "minfer::gemmWgmmaPair<2560, 2048, 80, 2, 8, " + Epilogue(Epilogue::None).policy() + ", true>");
  for (GemmTile t : {GemmTile::hopper(64, 128, 8).paired(), GemmTile::hopperPingpong(80, 8).paired()})
    EXPECT_EQ(parseGemmTile(t.str()), t) << t.str();
  for (llvm::StringRef bad : {"wgmma_m64n128_s8_c3", "wgmma_m64n128_s8_c2_pp", "wgmma_m64n128_s8_c2_c2"})
    EXPECT_FALSE(parseGemmTile(bad)) << bad.str();
  // The tuner's withTile keeps the persistent grid's size.
  s.smCount = 114;
  auto other = s.withTile("wgmma_m64n128_s8", target("sm_90a"));
  ASSERT_TRUE(other);
  EXPECT_EQ(static_cast<GemmSpec &>(*other).smCount, 114);
  EXPECT_EQ(s.withTile("wgmma_m64n128_s8", target("sm_90")), nullptr) << "wgmma needs sm_90a";
}

TEST(GemmWgmmaSpec, LaunchIsPersistentAndTheTensorMapsCoverTheTrueExtents) {
  GemmSpec s(5632, 2048, Epilogue::None, GemmTile::hopper(128, 256, 4));
  s.smCount = 132;
  // 2048 rows: 16 x 22 = 352 tiles on 132 blocks; 130 rows: 2 x 22 = 44 tiles, 44 blocks; 0 rows: 1 block.
  EXPECT_EQ(s.launch(2048).grid, (std::array<unsigned, 3>{132, 1, 1}));
  EXPECT_EQ(s.launch(130).grid, (std::array<unsigned, 3>{44, 1, 1}));
  EXPECT_EQ(s.launch(0).grid, (std::array<unsigned, 3>{1, 1, 1}));
  EXPECT_EQ(s.launch(2048).block, (std::array<unsigned, 3>{384, 1, 1}));
  // Four slots of (128 + 256) rows x 128 bytes, two 8-byte barriers each, 1 KB of alignment.
  EXPECT_EQ(s.launch(2048).sharedBytes, 4u * 384 * 128 + 4 * 16 + 1024);
  EXPECT_EQ(GemmSpec(64, 64, Epilogue::None, GemmTile::hopper(64, 64, 2)).launch(1).block[0], 256u);
  // Each map reads a pointer of the Params the plan binds.
  std::vector<TensorMapArg> maps = s.tensorMaps(130);
  ASSERT_EQ(maps.size(), 2u);
  expectMap(s, maps[0], "A", 2048, 130, 64, 128);
  expectMap(s, maps[1], "W", 2048, 5632, 64, 256);
  EXPECT_EQ(s.tensorMaps(0)[0].outer, 1) << "a map cannot be empty";
  EXPECT_TRUE(GemmSpec(64, 64, Epilogue::None, GemmTile{}).tensorMaps(64).empty());
  llvm::json::Object j = s.toJSON();
  const llvm::json::Object *tile = j.getObject("tile");
  ASSERT_TRUE(tile);
  EXPECT_EQ(tile->getString("kind"), llvm::Optional<llvm::StringRef>("wgmma"));
  EXPECT_EQ(intField(*tile, "consumer_warpgroups"), 2);
  EXPECT_EQ(intField(j, "persistent_blocks"), 132);
  EXPECT_EQ(intField(*tile, "cluster"), 1);

  // Pairs: units of two vertically adjacent tiles, an even grid of at most one block an SM, and W's boxes
  // half as tall (each block of a pair loads half and multicasts it). 512 rows of 128x80 tiles: 4 x 32 =
  // 128 tiles, 2 x 32 = 64 units, 128 blocks; 130 rows (2 tile rows): 32 units; 1000 rows (8 tile rows):
  // 4 x 32 = 128 units on 66 pairs of 132 SMs, 132 blocks; 131 SMs still gives an even grid (130).
  GemmSpec pair(2560, 2048, Epilogue::None, GemmTile::hopper(128, 80, 8).paired());
  pair.smCount = 132;
  EXPECT_EQ(pair.launch(512).grid, (std::array<unsigned, 3>{128, 1, 1}));
  EXPECT_EQ(pair.launch(130).grid, (std::array<unsigned, 3>{64, 1, 1}));
  EXPECT_EQ(pair.launch(1000).grid, (std::array<unsigned, 3>{132, 1, 1}));
  EXPECT_EQ(pair.launch(0).grid, (std::array<unsigned, 3>{2, 1, 1}));
  pair.smCount = 131;
  EXPECT_EQ(pair.launch(1000).grid, (std::array<unsigned, 3>{130, 1, 1}));
  maps = pair.tensorMaps(512);
  ASSERT_EQ(maps.size(), 2u);
  expectMap(pair, maps[0], "A", 2048, 512, 64, 128);
  expectMap(pair, maps[1], "W", 2048, 2560, 64, 40);
  const llvm::json::Object *pairTile = pair.toJSON().getObject("tile");
  ASSERT_TRUE(pairTile);
  EXPECT_EQ(intField(*pairTile, "cluster"), 2);
}

TEST(GemmWgmmaSpec, TilesAreCheckedAgainstTheTargetAndTheTemplate) {
  const Target hopper = target("sm_90a");
  EXPECT_EQ(errorOf(checkGemmTile(GemmTile::hopper(128, 256, 4), 2048, hopper)), "(success)");
  EXPECT_NE(errorOf(checkGemmTile(GemmTile::hopper(128, 256, 4), 2048, target("sm_90"))).find("need an sm_90a target"),
            std::string::npos);
  EXPECT_NE(errorOf(checkGemmTile(GemmTile::hopper(128, 256, 5), 2048, hopper)).find("shared memory"), std::string::npos);
  EXPECT_NE(errorOf(checkGemmTile(GemmTile::hopper(192, 128, 4), 2048, hopper)).find("BM must be 64 or 128"),
            std::string::npos);
  EXPECT_EQ(errorOf(checkGemmTile(GemmTile::hopper(128, 96, 4), 2048, hopper)), "(success)"); // any multiple of 16
  EXPECT_EQ(errorOf(checkGemmTile(GemmTile::hopper(64, 16, 4), 2048, hopper)), "(success)");
  for (int bn : {72, 8, 0, 272})
    EXPECT_NE(errorOf(checkGemmTile(GemmTile::hopper(128, bn, 4), 2048, hopper)).find("BN must be a multiple of 16"),
              std::string::npos)
        << bn;
  EXPECT_NE(errorOf(checkGemmTile(GemmTile::hopper(128, 128, 1), 2048, hopper)).find("at least 2"), std::string::npos);
  EXPECT_NE(errorOf(checkGemmTile(GemmTile::hopper(128, 128, 4), 100, hopper)).find("multiple of 8"), std::string::npos);
  // Ping-pong: one consumer holds a whole 128-row tile, so BN is at most 176; and it is a wgmma schedule.
  EXPECT_EQ(errorOf(checkGemmTile(GemmTile::hopperPingpong(128, 7), 2048, hopper)), "(success)");
  EXPECT_EQ(errorOf(checkGemmTile(GemmTile::hopperPingpong(176, 5), 2048, hopper)), "(success)");
  EXPECT_EQ(errorOf(checkGemmTile(GemmTile::hopper(128, 80, 8).paired(), 2048, hopper)), "(success)");
  GemmTile three = GemmTile::hopper(128, 80, 8);
  three.cluster = 3;
  EXPECT_NE(errorOf(checkGemmTile(three, 2048, hopper)).find("clusters of 1 or 2"), std::string::npos);
  EXPECT_NE(errorOf(checkGemmTile(GemmTile{128, 128, 32, 4, 2, 2}.paired(), 2048, hopper)).find("schedule of the wgmma"),
            std::string::npos);
  for (int bn : {192, 256})
    EXPECT_NE(errorOf(checkGemmTile(GemmTile::hopperPingpong(bn, 4), 2048, hopper)).find("ping-pong tile is 128 rows"),
              std::string::npos)
        << bn;
  GemmTile half = GemmTile::hopperPingpong(128, 4);
  half.bm = 64;
  EXPECT_NE(errorOf(checkGemmTile(half, 2048, hopper)).find("ping-pong tile is 128 rows"), std::string::npos);
  GemmTile sync = {128, 128, 32, 4, 2, 2};
  sync.pingpong = true;
  EXPECT_NE(errorOf(checkGemmTile(sync, 2048, hopper)).find("schedule of the wgmma kernel"), std::string::npos);
}

TEST(GemmWgmmaSpec, Sm90aPrefillDefaultsToWgmmaAndDecodeKeepsMmaSync) {
  const Target hopper = target("sm_90a");
  // The widest tile when its tiles fill the SMs (or never take a second wave), narrower ones when M or N
  // is small; the ring as deep as shared memory allows.
  EXPECT_EQ(defaultGemmTile(hopper, 2048, 32000, 2048, 132), GemmTile::hopper(128, 256, 4));
  EXPECT_EQ(defaultGemmTile(hopper, 2048, 2048, 2048, 132), GemmTile::hopper(128, 256, 4)); // 128 tiles
  EXPECT_EQ(defaultGemmTile(hopper, 2048, 11008, 4096, 132), GemmTile::hopper(128, 256, 4));
  EXPECT_EQ(defaultGemmTile(hopper, 512, 2048, 2048, 132), GemmTile::hopper(64, 128, 8));
  EXPECT_EQ(defaultGemmTile(hopper, 512, 256, 2048, 132), GemmTile::hopper(64, 128, 8));
  EXPECT_EQ(defaultGemmTile(hopper, 512, 11008, 4096, 132), GemmTile::hopper(64, 256, 5));
  EXPECT_EQ(defaultGemmTile(hopper, 16, 4096, 4096, 132), defaultGemmTile(target("sm_90"), 16, 4096, 4096, 132));
  EXPECT_FALSE(defaultGemmTile(hopper, 127, 4096, 4096, 132).wgmma);
  // The tuner tries the wgmma tiles on sm_90a only, and none taller than the rows.
  auto count = [](const std::vector<GemmTile> &tiles) {
    return std::count_if(tiles.begin(), tiles.end(), [](const GemmTile &t) { return t.wgmma; });
  };
  EXPECT_EQ(count(gemmTileCandidates(target("sm_90"), 2048, 5632, 2048)), 0);
  // bm 64, 128 x bn 64, 128, 256 x {4, most} (128x256 fits only 4), 128x64, 128x128 as ping-pong x {4, most},
  // and two widths fitted to the SMs per bm
  // (here 128x240, 128x176, 64x240 and 64x176), the fitted 128-row ones up to 176 wide as ping-pong (one),
  // and as pairs of blocks: the five fitted ones, 64x128 and the ping-pong 128x128 at the most slots
  EXPECT_EQ(count(gemmTileCandidates(hopper, 2048, 5632, 2048)), 19 + 1 + 5 + 2);
  EXPECT_EQ(count(gemmTileCandidates(hopper, 40, 5632, 2048)), 6 + 1); // bm 64 only (rows round up to 64)
  for (const GemmTile &t : gemmTileCandidates(hopper, 2048, 5632, 2048))
    EXPECT_EQ(errorOf(checkGemmTile(t, 2048, hopper)), "(success)") << t.str();
}

TEST(GemmWgmmaSpec, FittedTilesMakeWavesThatFillTheSms) {
  const Target hopper = target("sm_90a");
  auto shapes = [](const std::vector<GemmTile> &tiles) { // the cooperative ones
    std::vector<std::pair<int, int>> out;
    for (const GemmTile &t : tiles)
      if (!t.pingpong) out.push_back({t.bm, t.bn});
    return out;
  };
  using Shapes = std::vector<std::pair<int, int>>;
  // TinyLlama's qkv at 512 rows (N 2560): 128x80 makes 4 x 32 = 128 tiles, one wave of 132 SMs, at less work
  // per SM than 128x96's 108; 64x160 (8 x 16 = 128) and 64x176 (120) likewise for 64 rows.
  EXPECT_EQ(shapes(fittedWgmmaTiles(hopper, 512, 2560, 132)), (Shapes{{128, 80}, {128, 96}, {64, 160}, {64, 176}}));
  // Its gate/up at 512 rows (N 11264): 128x176 (4 x 64 = 256 tiles, two waves) and 128x192 (236).
  EXPECT_EQ(shapes(fittedWgmmaTiles(hopper, 512, 11264, 132)).front(), (std::pair<int, int>{128, 176}));
  EXPECT_EQ(shapes(fittedWgmmaTiles(hopper, 512, 11264, 132))[1], (std::pair<int, int>{128, 192}));
  // Its qkv at 2048 rows: 128x160 (16 x 16 = 256 tiles, two waves).
  EXPECT_EQ(shapes(fittedWgmmaTiles(hopper, 2048, 2560, 132)).front(), (std::pair<int, int>{128, 160}));
  // The 128-row widths up to 176 also as ping-pong, with the same ring.
  const std::vector<GemmTile> fitted = fittedWgmmaTiles(hopper, 512, 2560, 132);
  ASSERT_EQ(fitted.size(), 6u);
  EXPECT_EQ(fitted[1], GemmTile::hopperPingpong(80, fitted[0].stages));
  EXPECT_EQ(fitted[3], GemmTile::hopperPingpong(96, fitted[2].stages));
  for (const GemmTile &t : fittedWgmmaTiles(hopper, 512, 11264, 132))
    EXPECT_TRUE(!t.pingpong || t.bn <= 176) << t.str();
  for (const GemmTile &t : fitted) {
    EXPECT_EQ(errorOf(checkGemmTile(t, 2048, hopper)), "(success)") << t.str();
    GemmTile deeper = t;
    ++deeper.stages;
    EXPECT_TRUE(deeper.stages > 8 || errorOf(checkGemmTile(deeper, 2048, hopper)) != "(success)")
        << t.str() << ": the ring is as deep as shared memory allows";
    EXPECT_EQ(parseGemmTile(t.str()), t) << t.str();
  }
  EXPECT_TRUE(fittedWgmmaTiles(target("sm_90"), 512, 2560, 132).empty());
  EXPECT_TRUE(fittedWgmmaTiles(hopper, 32, 2560, 132).empty()); // decode rows: no wgmma GEMM
  EXPECT_EQ(shapes(fittedWgmmaTiles(hopper, 100, 2560, 132)).size(), 2u); // 64-row tiles only
}

// ---- gemv spec ------------------------------------------------------------------------------------------

TEST(GemvSpec, NameAndEntrySpellEveryConstant) {
  GemvSpec spec(2048, 2048, Epilogue::None, GemvTile{4, 2, 4});
  EXPECT_EQ(spec.name(), "gemv_bf16_n2048_k2048_m4_r2_w4_epi_none");
  EXPECT_EQ(spec.entry(), "minfer::gemv<2048, 2048, 4, 2, 4, minfer::EpiPointwise<false, minfer::ActNone, false, false>, minfer::ProNone>");
  EXPECT_EQ(spec.header(), "gemv.cuh");
  GemvSpec mma(2048, 2048, Epilogue::BiasResidual, GemvTile{8, 1, 8, true});
  EXPECT_EQ(mma.name(), "gemv_bf16_n2048_k2048_m8_mma_w8_epi_bias_residual");
  EXPECT_EQ(mma.entry(), "minfer::gemvMma<2048, 2048, 8, 8, minfer::EpiPointwise<true, minfer::ActNone, false, true>, minfer::ProNone>");
  std::set<std::string> names;
  size_t count = 0;
  for (const GemvTile &t : gemvTileCandidates(target("sm_90"), 4, 321, 64))
    for (const Epilogue &e : allPointwiseEpilogues()) {
      names.insert(GemvSpec(321, 64, e, t).name());
      ++count;
    }
  EXPECT_EQ(names.size(), count);
}

TEST(GemvSpec, LaunchGivesEachWarpItsRows) {
  GemvSpec spec(321, 64, Epilogue::None, GemvTile{8, 2, 4}); // 8 rows per block
  LaunchDims d = spec.launch(5);
  EXPECT_EQ(d.grid, (std::array<unsigned, 3>{41, 1, 1})); // ceil(321 / 8)
  EXPECT_EQ(d.block, (std::array<unsigned, 3>{128, 1, 1}));
  EXPECT_EQ(d.sharedBytes, 0u);
  EXPECT_EQ(spec.launch(1).grid, d.grid) << "rows of A do not change the grid";
  GemvSpec mma(321, 64, Epilogue::None, GemvTile{8, 1, 8, true}); // 16 rows per block, whatever the warps
  d = mma.launch(5);
  EXPECT_EQ(d.grid, (std::array<unsigned, 3>{21, 1, 1})); // ceil(321 / 16)
  EXPECT_EQ(d.block, (std::array<unsigned, 3>{256, 1, 1}));
  EXPECT_EQ(d.sharedBytes, 0u);
}

TEST(GemvDefaultTile, PicksTheKernelByMAndSizesItForTheSMs) {
  const Target h100 = target("sm_90");
  // M <= 2: the FMA kernel, more rows per warp for larger M unless N is too small to keep 8 warps an SM.
  EXPECT_EQ(defaultGemvTile(h100, 1, 2048, 2048), (GemvTile{1, 1, 4, false}));
  EXPECT_EQ(defaultGemvTile(h100, 2, 32000, 2048), (GemvTile{2, 2, 4, false}));
  EXPECT_EQ(defaultGemvTile(h100, 2, 64, 64), (GemvTile{2, 1, 4, false}));
  // M >= 3: tensor cores, with as many warps as keep every 16-row block in one wave.
  EXPECT_EQ(defaultGemvTile(h100, 3, 32000, 2048), (GemvTile{4, 1, 4, true}));
  EXPECT_EQ(defaultGemvTile(h100, 5, 5632, 2048), (GemvTile{8, 1, 4, true}));
  EXPECT_EQ(defaultGemvTile(h100, 4, 4096, 4096), (GemvTile{4, 1, 8, true}));
  EXPECT_EQ(defaultGemvTile(h100, 8, 2048, 2048), (GemvTile{8, 1, 16, true}));
  for (auto [n, k] : kShapes)
    for (int64_t m = 1; m <= kGemvMaxRows; ++m) {
      GemvTile t = defaultGemvTile(h100, m, n, k);
      EXPECT_GE(t.maxM, m);
      EXPECT_EQ(errorOf(checkGemvTile(t, k)), "(success)");
    }
  EXPECT_NE(errorOf(checkGemvTile(GemvTile{1, 1, 4}, 100)).find("multiple of 8"), std::string::npos);
  EXPECT_NE(errorOf(GemvSpec(64, 100, Epilogue::None, GemvTile{}).validate()).find("multiple of 8"), std::string::npos);
  EXPECT_NE(errorOf(checkGemvTile(GemvTile{32, 1, 4}, 64)).find("maxM"), std::string::npos);
  EXPECT_EQ(errorOf(checkGemvTile(GemvTile{16, 1, 4, true}, 64)), "(success)") << "two n8 operands";
  EXPECT_NE(errorOf(checkGemvTile(GemvTile{32, 1, 4, true}, 64)).find("maxM must be 1..16"), std::string::npos);
  EXPECT_EQ(defaultGemvTile(h100, 12, 2048, 2048).maxM, 16);
  EXPECT_NE(errorOf(checkGemvTile(GemvTile{8, 2, 4, true}, 64)).find("rowsPerWarp does not apply"), std::string::npos);
}

// ---- the wgmma gemv (gemv_wgmma.cuh, sm_90a) -------------------------------------------------------------

TEST(GemvWgmmaSpec, NameEntryHeaderAndTileStringSpellEveryConstant) {
  GemvSpec s(4096, 4096, Epilogue::Residual, GemvTile::hopper(16, 128, 8, 4));
  EXPECT_EQ(s.name(), "gemv_bf16_n4096_k4096_m16_wgmma_k128_s8_split4_epi_residual");
  EXPECT_EQ(s.entry(),
            "minfer::gemvWgmma<4096, 4096, 16, 128, 8, 4, " + Epilogue(Epilogue::Residual).policy() + ", minfer::ProNone>");
  EXPECT_EQ(s.header(), "gemv_wgmma.cuh");
  EXPECT_EQ(s.taskType(), "") << "no task form of its own";
  auto task = s.asTask(256, 132);
  ASSERT_TRUE(task) << "as a task: the mma.sync body";
  EXPECT_EQ(task->taskType(), "minfer::GemvMmaTask<4096, 4096, 16, 8, " + Epilogue(Epilogue::Residual).policy() +
                                  ", minfer::ProNone, " + std::to_string(GemvSpec::kTaskLoads) + ">");
  EXPECT_EQ(s.tuningKey(), GemvSpec(4096, 4096, Epilogue::Residual, GemvTile{16, 1, 4, true}).tuningKey())
      << "timed against the other gemv kernels";
  for (GemvTile t : {GemvTile::hopper(16, 128, 8, 4), GemvTile::hopper(4, 64, 2, 1), GemvTile{8, 1, 8, true}, GemvTile{2, 4, 4}})
    EXPECT_EQ(parseGemvTile(t.str()), t) << t.str();
  // The default at 1 and 2 rows on sm_90a: wgmma (128 of K a slot; a split of 3 and 8 slots with at most a
  // quarter as many 64-row tiles as SMs, of 2 with fewer than the SMs, none and 4 slots otherwise) with an
  // RMS norm in the prologue or from 4M weights; the FMA kernel on smaller plain products and with a LayerNorm
  // in the prologue (at one row, 4 rows a warp from 4M weights, where the SMs still get 8 warps each).
  const Target hopper = target("sm_90a");
  EXPECT_EQ(defaultGemvTile(hopper, 2, 2048, 2048, 0, Prologue::Kind::Rms), GemvTile::hopper(2, 128, 8, 3)) << "32 tiles";
  EXPECT_EQ(defaultGemvTile(hopper, 2, 2560, 2048, 0, Prologue::Kind::Rms), GemvTile::hopper(2, 128, 8, 2)) << "40 tiles";
  EXPECT_EQ(defaultGemvTile(hopper, 16, 2048, 2048, 264), GemvTile::hopper(16, 128, 8, 3)) << "64 tiles, 264 SMs";
  EXPECT_EQ(defaultGemvTile(hopper, 16, 2048, 256), GemvTile::hopper(16, 128, 8, 2)) << "2 slices of K: no split of 3";
  EXPECT_EQ(defaultGemvTile(hopper, 2, 32000, 2048, 0, Prologue::Kind::Rms), GemvTile::hopper(2, 128, 4, 1));
  EXPECT_EQ(defaultGemvTile(hopper, 2, 4096, 4096), GemvTile::hopper(2, 128, 8, 2)) << "16M weights";
  EXPECT_EQ(defaultGemvTile(hopper, 2, 2048, 5632), GemvTile::hopper(2, 128, 8, 3)) << "11.5M weights, 32 tiles";
  EXPECT_EQ(defaultGemvTile(hopper, 2, 2048, 2048), GemvTile::hopper(2, 128, 8, 3)) << "4M weights";
  EXPECT_EQ(defaultGemvTile(hopper, 2, 3072, 768), (GemvTile{2, 2, 4, false})) << "2.4M weights (GPT-2's up)";
  EXPECT_EQ(defaultGemvTile(hopper, 2, 32000, 2048, 0, Prologue::Kind::Layer), (GemvTile{2, 2, 4, false}))
      << "4 rows a warp at one row only (at two the plan keeps a LayerNorm off such a W)";
  EXPECT_EQ(defaultGemvTile(hopper, 1, 32000, 2048, 0, Prologue::Kind::Rms), GemvTile::hopper(1, 128, 4, 1));
  EXPECT_EQ(defaultGemvTile(hopper, 1, 2048, 2048), GemvTile::hopper(1, 128, 8, 3)) << "4M weights";
  EXPECT_EQ(defaultGemvTile(hopper, 1, 768, 3072), (GemvTile{1, 1, 4, false})) << "2.4M weights";
  EXPECT_EQ(defaultGemvTile(hopper, 1, 50257, 768, 0, Prologue::Kind::Layer), (GemvTile{1, 4, 4, false}))
      << "GPT-2's head with its LayerNorm: 3,142 blocks, not 12,565";
  EXPECT_EQ(defaultGemvTile(target("sm_89"), 1, 50257, 768, 0, Prologue::Kind::Layer), (GemvTile{1, 1, 4, false}))
      << "unchanged where it was not measured";
  EXPECT_EQ(defaultGemvTile(hopper, 1, 1024, 4096, 0, Prologue::Kind::Layer), (GemvTile{1, 1, 4, false}))
      << "4M weights but 1024 rows: 4 rows a warp would leave the SMs under 8 warps each";
  auto one = GemvSpec(2048, 2048, Epilogue::Residual, GemvTile::hopper(1, 128, 8, 2)).asTask(128, 264);
  ASSERT_TRUE(one);
  EXPECT_EQ(one->taskType().rfind("minfer::GemvTask<2048, 2048, 1, ", 0), 0u)
      << "a one-row wgmma tile's task is the FMA body: " << one->taskType();
  EXPECT_EQ(defaultGemvTile(target("sm_90"), 2, 32000, 2048, 0, Prologue::Kind::Rms), (GemvTile{2, 2, 4, false}))
      << "no wgmma on sm_90";
  for (llvm::StringRef bad : {"m16_wgmma_k64_s8", "m16_wgmma_k64_s8_split", "m16_wgmma_k64_s8_split4x", "m16_wgmma_k64_s08_split4",
                              "m16_wgmma_s8_k64_split4"})
    EXPECT_FALSE(parseGemvTile(bad)) << bad.str();
  EXPECT_TRUE(s.withTile("m8_wgmma_k256_s4_split2", target("sm_90a")));
  EXPECT_EQ(s.withTile("m8_wgmma_k256_s4_split2", target("sm_90")), nullptr) << "wgmma needs sm_90a";
  EXPECT_EQ(s.withTile("m8_wgmma_k32_s4_split2", target("sm_90a")), nullptr) << "bk 64, 128 or 256";
  EXPECT_TRUE(s.withTile("m8_mma_w4", target("sm_90"))) << "the other kernels need no sm_90a";
}

TEST(GemvWgmmaSpec, LaunchCoversEveryTileTimesTheSplitAndTheMapsTheTrueExtents) {
  GemvSpec s(4097, 4096, Epilogue::None, GemvTile::hopper(16, 128, 8, 4));
  LaunchDims d = s.launch(16);
  EXPECT_EQ(d.grid, (std::array<unsigned, 3>{65 * 4, 1, 1})); // ceil(4097 / 64) tiles of 64 rows, 4 blocks each
  EXPECT_EQ(d.block, (std::array<unsigned, 3>{160, 1, 1}));   // a consumer warpgroup and a producer warp
  // 8 slots of two boxes of (64 + 16) rows x 128 bytes, two barriers each, 3 ranks' partials (128 threads x 8
  // floats), 4 ranks' sums of squares of 16 rows, 1 KB.
  EXPECT_EQ(d.sharedBytes, 8u * 2 * 80 * 128 + 8 * 16 + 3 * 128 * 8 * 4 + 4 * 16 * 4 + 1024);
  EXPECT_EQ(GemvSpec(64, 64, Epilogue::None, GemvTile::hopper(4, 64, 2, 1)).launch(3).sharedBytes,
            2u * 72 * 128 + 2 * 16 + 8 * 4 + 1024)
      << "up to 8 rows of A: wgmma's N is 8, no partials without a split";
  std::vector<TensorMapArg> maps = s.tensorMaps(11);
  ASSERT_EQ(maps.size(), 2u);
  expectMap(s, maps[0], "W", 4096, 4097, 64, 64);
  expectMap(s, maps[1], "A", 4096, 11, 64, 16);
  EXPECT_EQ(s.tensorMaps(0)[1].outer, 1) << "a map cannot be empty";
  EXPECT_EQ(GemvSpec(64, 64, Epilogue::None, GemvTile::hopper(8, 64, 2, 1)).tensorMaps(3)[1].boxOuter, 8)
      << "up to 8 rows: boxes of 8 rows of A";
  EXPECT_TRUE(GemvSpec(64, 64, Epilogue::None, GemvTile{8, 1, 4, true}).tensorMaps(8).empty());
  llvm::json::Object j = s.toJSON();
  const llvm::json::Object *tile = j.getObject("tile");
  ASSERT_TRUE(tile);
  EXPECT_EQ(tile->getString("kind"), llvm::Optional<llvm::StringRef>("wgmma"));
  EXPECT_EQ(intField(*tile, "split_k"), 4);
  EXPECT_EQ(intField(*tile, "stages"), 8);
}

TEST(GemvWgmmaSpec, TheNormPrologueIsTheRmsPolicyInTheEntry) {
  const Target hopperTarget = target("sm_90a");
  GemvSpec s(2560, 2048, Epilogue::qkv(32, 4, 64, QkvRope::Half, false), GemvTile::hopper(16, 128, 4, 2),
             Prologue{Prologue::Kind::Rms, ir::DType::BF16});
  EXPECT_EQ(s.name(), "gemv_bf16_n2560_k2048_m16_wgmma_k128_s4_split2_epi_qkv_h32_kv4_d64_half_pro_rms_bf16");
  EXPECT_EQ(s.entry(), "minfer::gemvWgmma<2560, 2048, 16, 128, 4, 2, " + s.epi.policy() +
                           ", minfer::ProNorm<false, __nv_bfloat16>>");
  auto task = s.asTask(256, 132);
  ASSERT_TRUE(task);
  EXPECT_NE(task->taskType().find("minfer::ProNorm<false, __nv_bfloat16>"), std::string::npos)
      << "the task (gemvMma's body) keeps the prologue";
  // Shared memory: the tile's, plus the block's share of gamma (16 slices of 128, 8 a rank, bf16) and its
  // barrier.
  EXPECT_EQ(s.launch(16).sharedBytes, s.tile.sharedBytes() + 8 * 128 * 2 + 16);
  GemvSpec f32(321, 200, Epilogue::None, GemvTile::hopper(8, 128, 4, 2), Prologue{Prologue::Kind::Rms, ir::DType::F32});
  EXPECT_EQ(f32.launch(8).sharedBytes, f32.tile.sharedBytes() + 128 * 4 + 16) << "one 128-wide slice a rank, f32";
  GemvSpec none(2560, 2048, Epilogue::None, GemvTile::hopper(16, 128, 4, 2));
  EXPECT_EQ(none.launch(16).sharedBytes, none.tile.sharedBytes());
  // A ring that fits alone may not with gamma: 5 slots of 256 (201 KB) and K = 16384 of f32 gamma (64 KB).
  GemvSpec big(4096, 16384, Epilogue::None, GemvTile::hopper(16, 256, 5, 1), Prologue{Prologue::Kind::Rms, ir::DType::F32});
  EXPECT_EQ(errorOf(checkGemvTile(big.tile, big.k, &hopperTarget)), "(success)");
  EXPECT_NE(errorOf(big.validate(hopperTarget)).find("with its share of gamma"), std::string::npos);
}

// An RMS norm whose gains ride in W: the gemv reads no gamma (no shared memory for it, no pointer), only the
// rows' sums of squares. The wgmma gemm takes it only with the rows' squares written by the residual gemm
// before it (row scales in the epilogue); the mma.sync gemm and the gemvs write or read no row squares.
TEST(GemvWgmmaSpec, UnitGainsNameTheirPolicyAndNeedNoGamma) {
  const Target hopperTarget = target("sm_90a");
  Prologue unit = Prologue::rmsUnitGain();
  EXPECT_EQ(unit.suffix(), "_pro_rms_unit");
  EXPECT_EQ(unit.policy(), "minfer::ProNorm<false, void>");
  EXPECT_EQ(unit.gammaBytes(), 0);
  EXPECT_EQ(Prologue{Prologue::Kind::Rms}.gammaBytes(), 2);
  EXPECT_FALSE(unit == Prologue{Prologue::Kind::Rms}) << "unit gains are a kernel of their own";
  GemvSpec s(2560, 2048, Epilogue::qkv(32, 4, 64, QkvRope::Half, false), GemvTile::hopper(16, 128, 4, 2), unit);
  EXPECT_EQ(s.name(), "gemv_bf16_n2560_k2048_m16_wgmma_k128_s4_split2_epi_qkv_h32_kv4_d64_half_pro_rms_unit");
  EXPECT_EQ(s.entry(), "minfer::gemvWgmma<2560, 2048, 16, 128, 4, 2, " + s.epi.policy() + ", minfer::ProNorm<false, void>>");
  EXPECT_EQ(s.launch(16).sharedBytes, s.tile.sharedBytes()) << "no share of gamma";
  EXPECT_EQ(errorOf(s.validate(hopperTarget)), "(success)");
  // The big ring that gamma pushed over the limit above fits with unit gains.
  GemvSpec big(4096, 16384, Epilogue::None, GemvTile::hopper(16, 256, 5, 1), unit);
  EXPECT_EQ(errorOf(big.validate(hopperTarget)), "(success)");
  Prologue layerUnit{Prologue::Kind::Layer, ir::DType::F32, true};
  EXPECT_NE(errorOf(GemvSpec(64, 64, Epilogue::None, GemvTile{1, 2, 4}, layerUnit).validate(hopperTarget))
                .find("unit gains are an RMS norm's only"),
            std::string::npos);

  // The wgmma gemm folds an RMS norm only with its rows' squares from the gemm before (Prologue::rowSquares).
  Prologue sq = Prologue::rmsRowSquares();
  EXPECT_EQ(sq.suffix(), "_pro_rms_sq");
  EXPECT_EQ(sq.policy(), "minfer::ProRowSquares");
  EXPECT_EQ(sq.gammaBytes(), 0);
  GemmSpec g(2560, 2048, Epilogue::qkv(32, 4, 64, QkvRope::Half, false), GemmTile::hopper(64, 256, 5), sq);
  EXPECT_EQ(g.name(), "gemm_bf16_n2560_k2048_wgmma_m64n256_s5_epi_qkv_h32_kv4_d64_half_pro_rms_sq");
  EXPECT_EQ(g.entry(), "minfer::gemmWgmma<2560, 2048, 256, 1, 5, " + g.epi.policy() + ", false, minfer::ProRowSquares>");
  EXPECT_EQ(g.tuningKey(), "gemm_bf16_n2560_k2048_epi_qkv_h32_kv4_d64_half_pro_rms_sq");
  EXPECT_EQ(g.launch(2048).sharedBytes, static_cast<unsigned>(g.tile.sharedBytes())) << "nothing more in shared memory";
  EXPECT_EQ(errorOf(g.validate(hopperTarget)), "(success)");
  GemmSpec pp(2048, 2048, Epilogue::Residual, GemmTile::hopperPingpong(128, 4), sq);
  EXPECT_EQ(pp.entry(), "minfer::gemmWgmma<2048, 2048, 128, 2, 4, " + pp.epi.policy() + ", true, minfer::ProRowSquares>");
  GemmSpec mma(2048, 2048, Epilogue::None, GemmTile{128, 128, 32, 4, 2, 2}, sq);
  EXPECT_NE(errorOf(mma.validate(hopperTarget)).find("wgmma kernel only"), std::string::npos);
  for (Prologue other : {unit, Prologue{Prologue::Kind::Rms}}) {
    GemmSpec inLoop(2048, 2048, Epilogue::None, GemmTile::hopper(128, 256, 4), other);
    EXPECT_NE(errorOf(inLoop.validate(hopperTarget)).find("squares from the gemm before"), std::string::npos)
        << other.suffix();
  }
  for (const auto &c : g.tuningCandidates(hopperTarget, 2048))
    EXPECT_NE(c->name().find("_wgmma_"), std::string::npos) << c->name() << ": only wgmma tiles take the prologue";
  EXPECT_FALSE(g.tuningCandidates(hopperTarget, 2048).empty());
  EXPECT_NE(errorOf(GemvSpec(64, 64, Epilogue::None, GemvTile{1, 2, 4}, sq).validate(hopperTarget)).find("wgmma gemm only"),
            std::string::npos);

  // The residual gemm before it writes the squares: a pointwise residual epilogue of even N, wgmma tiles only.
  Epilogue rs = Epilogue::Residual;
  rs.rowSquares = true;
  EXPECT_EQ(rs.suffix(), "residual_rowsq");
  EXPECT_EQ(rs.policy(), "minfer::EpiPointwise<false, minfer::ActNone, false, true, true>");
  EXPECT_EQ(Epilogue::Residual.policy(), "minfer::EpiPointwise<false, minfer::ActNone, false, true>") << "names unchanged";
  EXPECT_EQ(errorOf(GemmSpec(2048, 5632, rs, GemmTile::hopper(128, 256, 4)).validate(hopperTarget)), "(success)");
  EXPECT_NE(errorOf(GemmSpec(2048, 5632, rs, GemmTile{128, 128, 32, 4, 2, 2}).validate(hopperTarget)).find("wgmma kernel only"),
            std::string::npos);
  EXPECT_NE(errorOf(rs.validate(321)).find("even N"), std::string::npos);
  Epilogue noResidual = Epilogue::Bias;
  noResidual.rowSquares = true;
  EXPECT_NE(errorOf(noResidual.validate(2048)).find("row squares come with"), std::string::npos);
  EXPECT_NE(errorOf(GemvSpec(2048, 5632, rs, GemvTile{1, 2, 4}).validate(hopperTarget)).find("wgmma gemm only"),
            std::string::npos);
}

// Which decode plans fold a norm into their gemvs: every norm up to 2 rows; RMS norms up to 16 rows where the
// gemv is the wgmma kernel (sm_90a); never above 16 rows (gemm, no prologue).
TEST(GemvWgmmaSpec, RmsNormsFoldUpTo16RowsOnlyOnSm90a) {
  const Target hopper = target("sm_90a"), sm90 = target("sm_90"), ada = target("sm_89");
  for (const Target *t : {&hopper, &sm90, &ada})
    for (Prologue::Kind k : {Prologue::Kind::Rms, Prologue::Kind::Layer}) {
      EXPECT_TRUE(gemvFoldsNorm(*t, 1, k)) << t->name;
      EXPECT_TRUE(gemvFoldsNorm(*t, 2, k)) << t->name;
      EXPECT_FALSE(gemvFoldsNorm(*t, 17, k)) << t->name;
    }
  for (int64_t rows : {3, 8, 16}) {
    EXPECT_TRUE(gemvFoldsNorm(hopper, rows, Prologue::Kind::Rms)) << rows;
    EXPECT_FALSE(gemvFoldsNorm(hopper, rows, Prologue::Kind::Layer)) << rows;
    EXPECT_FALSE(gemvFoldsNorm(sm90, rows, Prologue::Kind::Rms)) << rows;
    EXPECT_FALSE(gemvFoldsNorm(ada, rows, Prologue::Kind::Rms)) << rows;
  }
}

TEST(GemvWgmmaSpec, TilesAreCheckedAgainstTheTargetTheTemplateAndThePrologue) {
  const Target hopper = target("sm_90a");
  EXPECT_EQ(errorOf(checkGemvTile(GemvTile::hopper(16, 128, 8, 4), 4096, &hopper)), "(success)");
  EXPECT_EQ(errorOf(checkGemvTile(GemvTile::hopper(16, 128, 8, 4), 4096)), "(success)") << "no target: the template's rules";
  const Target sm90 = target("sm_90");
  EXPECT_NE(errorOf(checkGemvTile(GemvTile::hopper(16, 128, 8, 4), 4096, &sm90)).find("needs an sm_90a target"),
            std::string::npos);
  // K = 192: three 64-wide slices; a split of 4 leaves the last block none, of 2 (2 + 1) does not. In 128-wide
  // slices there are two (the second half out of K): a split of 2 leaves none without.
  EXPECT_NE(errorOf(checkGemvTile(GemvTile::hopper(16, 64, 4, 4), 192)).find("leaves a block without any"), std::string::npos);
  EXPECT_EQ(errorOf(checkGemvTile(GemvTile::hopper(16, 64, 4, 2), 192)), "(success)");
  EXPECT_EQ(errorOf(checkGemvTile(GemvTile::hopper(16, 128, 4, 2), 192)), "(success)");
  EXPECT_NE(errorOf(checkGemvTile(GemvTile::hopper(16, 128, 4, 3), 192)).find("128-wide slices"), std::string::npos);
  EXPECT_NE(errorOf(checkGemvTile(GemvTile::hopper(16, 96, 4, 1), 192)).find("bk must be 64, 128 or 256"), std::string::npos);
  EXPECT_NE(errorOf(checkGemvTile(GemvTile::hopper(16, 64, 1, 1), 64)).find("at least 2 slots"), std::string::npos);
  EXPECT_NE(errorOf(checkGemvTile(GemvTile::hopper(16, 64, 4, 9), 4096)).find("split must be 1..8"), std::string::npos);
  EXPECT_NE(errorOf(checkGemvTile(GemvTile::hopper(17, 64, 4, 1), 64)).find("maxM must be 1..16"), std::string::npos);
  EXPECT_NE(errorOf(checkGemvTile(GemvTile::hopper(16, 256, 6, 1), 4096)).find("above the 227 KB"), std::string::npos);
  GemvTile both = GemvTile::hopper(16, 64, 4, 1);
  both.mma = true;
  EXPECT_NE(errorOf(checkGemvTile(both, 64)).find("not both"), std::string::npos);
  Prologue rms{Prologue::Kind::Rms, ir::DType::BF16}, layer{Prologue::Kind::Layer, ir::DType::F32};
  EXPECT_EQ(errorOf(GemvSpec(256, 64, Epilogue::None, GemvTile::hopper(8, 64, 4, 1), rms).validate()), "(success)");
  EXPECT_NE(errorOf(GemvSpec(256, 64, Epilogue::None, GemvTile::hopper(8, 64, 4, 1), layer).validate())
                .find("an RMS norm prologue, not a LayerNorm"),
            std::string::npos);
  Epilogue argmax = Epilogue::None;
  argmax.argmax = true;
  EXPECT_EQ(errorOf(GemvSpec(256, 64, argmax, GemvTile::hopper(8, 64, 4, 1)).validate()), "(success)")
      << "the wgmma kernel folds the lm_head's argmax";
  // The tuner tries them on sm_90a at every row count, every one valid there; never elsewhere.
  auto wgmmaTiles = [](const std::vector<GemvTile> &ts) {
    return std::count_if(ts.begin(), ts.end(), [](const GemvTile &t) { return t.wgmma; });
  };
  // splits 1, 2, 3, 4 x (bk 64: 2, 4, 8, 12 slots; 128: 2, 4, 8; 256: 2, 4)
  EXPECT_EQ(wgmmaTiles(gemvTileCandidates(hopper, 16, 4096, 4096)), 36);
  // At 1 and 2 rows a slot of 8 rows of A instead of 16 leaves room for 12 slots of 128 too (4 more).
  EXPECT_EQ(wgmmaTiles(gemvTileCandidates(hopper, 2, 4096, 4096)), 40);
  EXPECT_EQ(wgmmaTiles(gemvTileCandidates(hopper, 1, 4096, 4096)), 40);
  EXPECT_EQ(wgmmaTiles(gemvTileCandidates(target("sm_90"), 16, 4096, 4096)), 0);
  // K = 128: bk 64 takes splits 1 and 2 (3 would leave a rank without a slice), bk 128 and 256 (one slice)
  // no split.
  EXPECT_EQ(wgmmaTiles(gemvTileCandidates(hopper, 16, 4096, 128)), 8 + 3 + 2);
  for (const GemvTile &t : gemvTileCandidates(hopper, 16, 4096, 4096))
    EXPECT_EQ(errorOf(checkGemvTile(t, 4096, &hopper)), "(success)") << t.str();
}

// ---- NVRTC --------------------------------------------------------------------------------------------

// Every pointwise epilogue policy exists in epilogue.cuh and instantiates in both kernels (odd N: gemm's
// scalar store path). The paired path (even N) is the same code for every policy; two cover it. The gated
// and qkv policies (even N only) and the norm prologues compile in each kernel that can run them.
TEST(MatmulNvrtc, EveryEpilogueCompilesInBothKernels) {
  const Target h100 = target("sm_90");
  for (const Epilogue &e : allPointwiseEpilogues()) {
    expectCompiles(GemmSpec(321, 64, e, GemmTile{64, 64, 32, 4, 2, 2}), h100);
    expectCompiles(GemvSpec(321, 64, e, GemvTile{4, 2, 4}), h100);
    expectCompiles(GemvSpec(321, 64, e, GemvTile{8, 1, 4, true}), h100);
  }
  std::vector<Epilogue> paired = {Epilogue::gated(Activation::Silu), Epilogue::qkv(2, 1, 64, QkvRope::Half, true),
                                  Epilogue::qkv(2, 1, 64, QkvRope::Interleaved, false),
                                  Epilogue::qkv(2, 1, 64, QkvRope::None, false),
                                  Epilogue::pointwise(true, Activation::GeluTanh, true, true)};
  Prologue rms{Prologue::Kind::Rms, ir::DType::BF16}, layer{Prologue::Kind::Layer, ir::DType::F32};
  // The lm_head's argmax epilogue: FMA gemv only, odd N (GPT-2's vocab) and a folded norm included.
  Epilogue argmax = Epilogue::None;
  argmax.argmax = true;
  expectCompiles(GemvSpec(321, 64, argmax, GemvTile{1, 4, 2}, rms), h100);
  expectCompiles(GemvSpec(322, 64, argmax, GemvTile{2, 1, 4}), h100);
  for (const Epilogue &e : paired) {
    expectCompiles(GemmSpec(256, 64, e, GemmTile{64, 64, 32, 4, 2, 2}), h100);
    expectCompiles(GemvSpec(256, 64, e, GemvTile{2, 2, 4}, rms), h100);
    expectCompiles(GemvSpec(256, 64, e, GemvTile{8, 1, 4, true}, layer), h100);
  }
  expectCompiles(GemmSpec(2048, 96, Epilogue::BiasResidual, GemmTile{64, 64, 64, 3, 2, 2}), h100);
  expectCompiles(GemmSpec(2048, 96, Epilogue::GeluTanh, GemmTile{64, 64, 64, 3, 2, 2}), h100);
}

// Every warp layout the autotuner may try compiles (with each BK in turn), and every gemv rows-per-warp,
// on one shape with every tail: odd N, K not a multiple of BK.
TEST(MatmulNvrtc, EveryCandidateLayoutCompiles) {
  const Target h100 = target("sm_90");
  std::set<std::string> layouts;
  int bk = 32;
  for (const GemmTile &t : gemmTileCandidates(h100, 4096, 321, 200)) {
    std::string layout = std::to_string(t.bm) + "x" + std::to_string(t.bn) + "_" + std::to_string(t.warpsM) + "x" +
                         std::to_string(t.warpsN);
    if (t.bk != bk || layouts.count(layout)) continue;
    layouts.insert(layout);
    bk = bk == 32 ? 64 : 32;
    expectCompiles(GemmSpec(321, 200, Epilogue::Bias, t), h100);
  }
  EXPECT_GE(layouts.size(), 8u);
  for (GemvTile t : {GemvTile{8, 1, 2}, GemvTile{8, 2, 8}, GemvTile{8, 4, 4}, GemvTile{8, 8, 4}, GemvTile{8, 1, 2, true},
                     GemvTile{8, 1, 16, true}})
    expectCompiles(GemvSpec(321, 200, Epilogue::None, t), h100);
}

// The default kernels of the model shapes, on sm_90 at prefill and decode sizes, and on sm_80 and sm_89.
TEST(MatmulNvrtc, DefaultKernelsCompileForModelShapes) {
  const Target h100 = target("sm_90");
  for (auto [n, k] : {std::pair<int64_t, int64_t>{2048, 2048}, {256, 2048}, {4096, 11008}, {50257, 768}}) {
    expectCompiles(GemmSpec(n, k, Epilogue::None, defaultGemmTile(h100, 2048, n, k)), h100);
    expectCompiles(GemmSpec(n, k, Epilogue::Residual, defaultGemmTile(h100, 17, n, k)), h100);
    expectCompiles(GemvSpec(n, k, Epilogue::None, defaultGemvTile(h100, 1, n, k)), h100);
    expectCompiles(GemvSpec(n, k, Epilogue::BiasResidual, defaultGemvTile(h100, 8, n, k)), h100);
    expectCompiles(GemvSpec(n, k, Epilogue::None, defaultGemvTile(h100, 2, n, k)), h100);
  }
  for (llvm::StringRef name : {"sm_80", "sm_89"}) {
    const Target t = target(name);
    expectCompiles(GemmSpec(5632, 2048, Epilogue::BiasGeluTanh, defaultGemmTile(t, 2048, 5632, 2048)), t);
    expectCompiles(GemmSpec(50257, 768, Epilogue::None, defaultGemmTile(t, 17, 50257, 768)), t);
    expectCompiles(GemvSpec(50257, 768, Epilogue::Bias, defaultGemvTile(t, 4, 50257, 768)), t);
    expectCompiles(GemvSpec(50257, 768, Epilogue::None, defaultGemvTile(t, 1, 50257, 768)), t);
  }
}

// The wgmma kernel compiles for sm_90a with every epilogue and every tail: odd N (scalar stores), K not a
// multiple of 64 (TMA's zero fill), both block heights and every wgmma width.
TEST(MatmulNvrtc, WgmmaKernelCompilesWithEveryEpilogue) {
  const Target hopper = target("sm_90a");
  for (const Epilogue &e : allPointwiseEpilogues()) expectCompiles(GemmSpec(321, 200, e, GemmTile::hopper(64, 64, 4)), hopper);
  for (const Epilogue &e : {Epilogue::gated(Activation::Silu), Epilogue::qkv(2, 1, 64, QkvRope::Half, true),
                            Epilogue::qkv(2, 1, 64, QkvRope::Interleaved, false)})
    expectCompiles(GemmSpec(256, 64, e, GemmTile::hopper(128, 128, 6)), hopper);
  expectCompiles(GemmSpec(5632, 2048, Epilogue::Residual, GemmTile::hopper(128, 256, 4)), hopper);
  expectCompiles(GemmSpec(50257, 768, Epilogue::None, GemmTile::hopper(64, 256, 5)), hopper);
  // The ping-pong schedule with a pointwise, a gated and a qkv epilogue, at both widths.
  expectCompiles(GemmSpec(321, 200, Epilogue::Residual, GemmTile::hopperPingpong(64, 8)), hopper);
  expectCompiles(GemmSpec(256, 64, Epilogue::gated(Activation::Silu), GemmTile::hopperPingpong(128, 4)), hopper);
  expectCompiles(GemmSpec(256, 64, Epilogue::qkv(2, 1, 64, QkvRope::Half, true), GemmTile::hopperPingpong(128, 4)), hopper);
}

// The wgmma gemv compiles for sm_90a with every epilogue it takes and every tail (odd N, K not a multiple of
// 64, a split whose last block has fewer slices), and ptxas does not serialise its wgmmas.
TEST(MatmulNvrtc, WgmmaGemvCompilesWithEveryEpilogue) {
  const Target hopper = target("sm_90a");
  for (const Epilogue &e : allPointwiseEpilogues()) expectCompiles(GemvSpec(321, 200, e, GemvTile::hopper(16, 64, 4, 2)), hopper);
  for (const Epilogue &e : {Epilogue::gated(Activation::Silu), Epilogue::qkv(2, 1, 64, QkvRope::Half, true),
                            Epilogue::qkv(2, 1, 64, QkvRope::Interleaved, false)})
    expectCompiles(GemvSpec(256, 64, e, GemvTile::hopper(8, 64, 4, 1)), hopper);
  expectCompiles(GemvSpec(4096, 11008, Epilogue::Residual, GemvTile::hopper(16, 64, 12, 4)), hopper);
  expectCompiles(GemvSpec(321, 200, Epilogue::Bias, GemvTile::hopper(16, 256, 2, 1)), hopper); // a box past K
  // The last of two 128-wide slices half past K, with a split (the end-to-end tests' llama_gqa shapes).
  expectCompiles(GemvSpec(64, 160, Epilogue::Residual, GemvTile::hopper(8, 128, 8, 2)), hopper);
  expectCompiles(GemvSpec(64, 96, Epilogue::Residual, GemvTile::hopper(4, 256, 2, 1)), hopper); // 2 of 4 boxes past K
  expectCompiles(GemvSpec(2048, 5632, Epilogue::gated(Activation::Silu), GemvTile::hopper(16, 128, 4, 4)), hopper);
  // The RMS prologue: gamma in bf16 and f32, 8 and 16 rows, with and without a split, boxes past K.
  Prologue rms{Prologue::Kind::Rms, ir::DType::BF16}, rmsF32{Prologue::Kind::Rms, ir::DType::F32};
  expectCompiles(GemvSpec(2560, 2048, Epilogue::qkv(32, 4, 64, QkvRope::Half, false), GemvTile::hopper(16, 128, 4, 1), rms),
                 hopper);
  expectCompiles(GemvSpec(11264, 2048, Epilogue::gated(Activation::Silu), GemvTile::hopper(16, 256, 4, 2), rms), hopper);
  expectCompiles(GemvSpec(321, 200, Epilogue::None, GemvTile::hopper(8, 128, 4, 2), rmsF32), hopper);
  expectCompiles(GemvSpec(64, 160, Epilogue::Residual, GemvTile::hopper(16, 64, 2, 2), rms), hopper);
}

// A spec the template cannot take fails in NVRTC with the static_assert's words, not a wall of errors.
TEST(MatmulNvrtc, ImpossibleSpecsFailWithAReadableMessage) {
  const Target h100 = target("sm_90");
  const std::pair<std::unique_ptr<KernelSpec>, const char *> cases[] = {
      {std::make_unique<GemmSpec>(64, 100, Epilogue::None, GemmTile{64, 64, 32, 4, 2, 2}), "K must be a multiple of 8"},
      {std::make_unique<GemmSpec>(64, 64, Epilogue::None, GemmTile{64, 64, 16, 4, 2, 2}), "BK must be 32, 64 or 128"},
      {std::make_unique<GemmSpec>(64, 64, Epilogue::None, GemmTile{96, 64, 32, 4, 4, 1}),
       "BM must be a multiple of 16 * WARPS_M"},
      {std::make_unique<GemvSpec>(64, 100, Epilogue::None, GemvTile{1, 1, 4}), "K must be a multiple of 8"},
      {std::make_unique<GemvSpec>(64, 100, Epilogue::None, GemvTile{4, 1, 4, true}), "K must be a multiple of 8"},
  };
  for (const auto &[spec, words] : cases) {
    auto compiled = compileKernel(kernelSource(*spec), h100);
    ASSERT_FALSE(bool(compiled)) << spec->name() << " compiled";
    std::string msg = llvm::toString(compiled.takeError());
    EXPECT_NE(msg.find(words), std::string::npos) << spec->name() << ":\n" << msg;
  }
}

} // namespace
