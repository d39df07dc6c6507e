// tests/unit/PlanTest.cpp — lowering a module to prefill and decode launches: counts worked out by hand
// from the op list, buffers shared between the phases, and the arena layout.
#include "common/TestFiles.h"
#include "common/TestModels.h"

#include "compiler/Fuse.h"
#include "compiler/Plan.h"
#include "compiler/kernels/Epilogue.h"
#include "compiler/kernels/Gemv.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <set>

using namespace minfer;

namespace {

// The tiny test model has no max_pos dim, so the KV cache size is given: 128 tokens.
Plan planFor(const ir::Module &m, PlanOptions opts = {1, 64, 128}) {
  auto target = parseTarget("sm_90");
  EXPECT_TRUE(bool(target));
  auto plan = buildPlan(m, *target, opts);
  EXPECT_TRUE(bool(plan)) << (plan ? "" : llvm::toString(plan.takeError()));
  return plan ? std::move(*plan) : Plan();
}

// examples/tinyllama-1.1b.ir through the fusion pass (null, with a failure, when it does not parse or fuse).
std::unique_ptr<ir::Module> fusedTinyLlama() {
  auto m = test::parseVerified(test::readFile(std::string(MINFER_SOURCE_DIR) + "/examples/tinyllama-1.1b.ir"));
  if (!m) return nullptr;
  if (auto fused = fuseModule(*m); !fused) {
    ADD_FAILURE() << llvm::toString(fused.takeError());
    return nullptr;
  }
  return m;
}

TEST(Plan, LlamaLayerLaunchesOneKernelPerOpUnfused) {
  auto m = test::parseVerified(test::tinyLlamaText("schedule = default", 8));
  ASSERT_TRUE(m);
  Plan p = planFor(*m);
  // A layer: rms_norm, 3 matmuls, 2 ropes, attention (kv_write + attention), o matmul, add, rms_norm,
  // gate and up matmuls, silu, mul, down matmul, add = 17, in decode too (its attention merges its chunks in
  // the one launch).
  EXPECT_EQ(p.prefill.launchesPerLayer, 17);
  EXPECT_EQ(p.decode.launchesPerLayer, 17);
  EXPECT_EQ(p.decode.layers, 2);
  // Outside the layers: embedding, final norm, lm_head; prefill gathers the rows that produce logits first,
  // decode ends by selecting the next tokens and feeding them back.
  EXPECT_EQ(p.prefill.launches.size(), 2u * 17 + 4);
  EXPECT_EQ(p.decode.launches.size(), 2u * 17 + 5);
  EXPECT_EQ(p.prefill.launches[2 * 17 + 1].role, LaunchRole::Gather);
  EXPECT_EQ(p.decode.launches[2 * 17 + 3].role, LaunchRole::Select);
  EXPECT_EQ(p.decode.launches[2 * 17 + 4].role, LaunchRole::Advance);
  ASSERT_GE(p.sample.kernel, 0);
  EXPECT_EQ(p.kernels[p.sample.kernel]->name().rfind("sample_v", 0), 0u);
  EXPECT_EQ(p.sample.role, LaunchRole::Select);
  // The sample launch takes the session's options and the advance kernel's step counter.
  ASSERT_TRUE(p.param(p.sample, "temperature"));
  EXPECT_EQ(p.param(p.sample, "temperature")->kind, ParamValue::Temperature);
  ASSERT_TRUE(p.param(p.sample, "step_offset"));
  EXPECT_EQ(p.param(p.sample, "step_offset")->buffer, p.io.step);
  EXPECT_EQ(p.param(p.decode.launches.back(), "history")->buffer, p.io.history);
}

TEST(Plan, PrefillRunsTheOpsAfterTheLayersOverTheGatheredRowsOnly) {
  auto m = test::parseVerified(test::tinyLlamaText("schedule = default", 8));
  ASSERT_TRUE(m);
  Plan p = planFor(*m);
  size_t gather = 2 * 17 + 1;
  auto kindOfRows = [&](const PlannedLaunch &l) {
    const ParamValue *v = p.param(l, "rows");
    return v ? v->kind : ParamValue::Buffer;
  };
  for (size_t i = 0; i < p.prefill.launches.size(); ++i) {
    EXPECT_EQ(kindOfRows(p.prefill.launches[i]), i < gather ? ParamValue::Rows : ParamValue::OutRows)
        << p.prefill.launches[i].op;
    EXPECT_EQ(p.prefill.launches[i].overOutRows, i >= gather) << p.prefill.launches[i].op;
  }
  // The gather reads the layers' result [rows, hidden] and writes its own buffer that the final norm reads.
  const PlannedLaunch &g = p.prefill.launches[gather];
  EXPECT_EQ(p.param(g, "ids")->buffer, p.io.outRows);
  EXPECT_EQ(p.buffers[p.io.outRows].name, "out_rows");
  EXPECT_EQ(p.param(p.prefill.launches[gather + 1], "a")->buffer, p.param(g, "out")->buffer);
  for (const PlannedLaunch &l : p.decode.launches) {
    EXPECT_NE(kindOfRows(l), ParamValue::OutRows) << "decode has no gather: " << l.op;
    EXPECT_FALSE(l.overOutRows) << l.op;
  }
}

// On sm_90a a fused module's ops after the gather are lowered twice: for up to kGemvMaxRows output rows (one a
// sequence, the usual prefill) the lm_head is the wgmma gemv with the final norm in its prologue, as in decode;
// for more (every row's logits kept) the norm launch and the gemm. Both write the one logits buffer. Other
// targets lower them once, as the gemm.
TEST(Plan, PrefillHeadIsAGemvForAFewOutputRowsAndTheGemmForMore) {
  auto m = fusedTinyLlama();
  ASSERT_TRUE(m);
  PlanOptions po;
  po.maxSeq = 256;
  for (const char *target : {"sm_89", "sm_90"}) {
    auto p = buildPlan(*m, *parseTarget(target), po);
    ASSERT_TRUE(bool(p)) << llvm::toString(p.takeError());
    for (const PlannedLaunch &l : p->prefill.launches) EXPECT_TRUE(l.runsFor(1) && l.runsFor(2048)) << target << " " << l.op;
  }
  {
    auto p = buildPlan(*m, *parseTarget("sm_90a"), po);
    ASSERT_TRUE(bool(p)) << llvm::toString(p.takeError());
    std::vector<const PlannedLaunch *> few, many;
    for (const PlannedLaunch &l : p->prefill.launches) {
      if (l.maxOutRows) few.push_back(&l);
      if (l.minOutRows) many.push_back(&l);
      EXPECT_FALSE(l.minOutRows && l.maxOutRows) << l.op;
      EXPECT_EQ(l.runsFor(1), !l.minOutRows) << l.op;
      EXPECT_EQ(l.runsFor(kGemvMaxRows), !l.minOutRows) << l.op;
      EXPECT_EQ(l.runsFor(kGemvMaxRows + 1), !l.maxOutRows) << l.op;
      EXPECT_EQ(l.runsFor(2048), !l.maxOutRows) << l.op;
    }
    auto kernelOf = [&](const PlannedLaunch *l) { return p->kernels[l->kernel]->name(); };
    ASSERT_EQ(many.size(), 2u);
    EXPECT_EQ(many[0]->op, "%final = rms_norm");
    EXPECT_EQ(kernelOf(many[1]).rfind("gemm_", 0), 0u) << kernelOf(many[1]);
    ASSERT_EQ(few.size(), 1u); // the norm folded into the gemv
    const PlannedLaunch *head = few.back();
    EXPECT_EQ(head->op, "%logits = matmul");
    EXPECT_EQ(kernelOf(head).rfind("gemv_", 0), 0u) << kernelOf(head);
    EXPECT_EQ(kernelOf(head).find("argmax"), std::string::npos) << "a prefill keeps the logits";
    EXPECT_NE(kernelOf(head).find("_pro_rms_unit"), std::string::npos) << kernelOf(head);
    EXPECT_EQ(p->param(*head, "C")->buffer, p->prefill.logits);
    EXPECT_EQ(p->param(*many[1], "C")->buffer, p->prefill.logits);
    // Both read the gathered rows (the gemv through its folded norm).
    const PlannedLaunch &gather = *(few.front() - 1);
    EXPECT_EQ(gather.role, LaunchRole::Gather);
    EXPECT_EQ(p->param(*head, "A")->buffer, p->param(gather, "out")->buffer);
    EXPECT_EQ(p->param(*many[0], "a")->buffer, p->param(gather, "out")->buffer);
    for (const PlannedLaunch &l : p->decode.launches) EXPECT_TRUE(!l.minOutRows && !l.maxOutRows) << l.op;
  }
}

TEST(Plan, WeightsKvCachesAndConstantsAreSharedByBothPhases) {
  auto m = test::parseVerified(test::tinyLlamaText("schedule = default", 8));
  ASSERT_TRUE(m);
  Plan p = planFor(*m, PlanOptions{2, 64, 128});
  std::set<std::string> names;
  int kv = 0, weights = 0, constants = 0;
  for (const PlanBuffer &b : p.buffers) {
    if (b.kind != BufferKind::Activation && b.kind != BufferKind::Output) {
      EXPECT_TRUE(names.insert(b.name).second) << "buffer " << b.name << " appears twice";
    }
    kv += b.kind == BufferKind::KvCache;
    weights += b.kind == BufferKind::Weight;
    constants += b.kind == BufferKind::Constant;
    if (b.kind == BufferKind::KvCache) {
      EXPECT_EQ(b.fixedBytes, 2 * 128 * 16 * 2); // batch * max_seq * kv_dim * bf16
    }
  }
  EXPECT_EQ(kv, 4);           // K and V for each of 2 layers
  EXPECT_EQ(weights, 2 + 2 * 9); // embed, nf, and 9 per layer
  EXPECT_EQ(constants, 2);    // the inverse-frequency tables of the two rope ops
  // hidden 32, kv_dim 16, ffn 48: embed (tied lm_head) 32x32, per layer q, o 32x32, k, v 16x32 and
  // gate, up, down 48x32 as bf16; the norms' 32-element gains as declared bf16.
  int64_t matmul = 32 * 32 + 2 * (32 * 32 * 2 + 16 * 32 * 2 + 48 * 32 * 3), norms = 32 + 2 * 32 * 2;
  EXPECT_EQ(p.weightBytes, (matmul + norms) * 2);
  EXPECT_DOUBLE_EQ(p.decodeFlopsPerToken, 2.0 * matmul);
}

// Fused, the qkv epilogue rotates q and k by a table of (cos, sin) per position and rotary pair: one per qkv
// op, shared by the layers and both phases, max_seq rows of head_dim / 2 pairs, built by the engine from the
// op's inverse frequencies (the plan carries only those).
TEST(Plan, TheQkvEpilogueReadsOneRotationTableOfMaxSeqRows) {
  auto m = test::parseVerified(test::tinyLlamaText("schedule = default", 8));
  ASSERT_TRUE(m);
  auto fused = fuseModule(*m);
  ASSERT_TRUE(bool(fused)) << llvm::toString(fused.takeError());
  Plan p = planFor(*m, PlanOptions{2, 64, 128});
  std::set<int> tables;
  int qkvLaunches = 0;
  for (const PhasePlan *phase : {&p.prefill, &p.decode})
    for (const PlannedLaunch &l : phase->launches)
      for (const ParamBinding &b : l.params)
        if (b.value.kind == ParamValue::Epilogue && b.value.epi.kCache >= 0) {
          ++qkvLaunches;
          EXPECT_EQ(b.value.epi.maxSeq, 128);
          ASSERT_GE(b.value.epi.rope, 0) << l.op;
          tables.insert(b.value.epi.rope);
        }
  EXPECT_EQ(qkvLaunches, 4); // two layers, two phases
  ASSERT_EQ(tables.size(), 1u);
  const PlanBuffer &t = p.buffers[*tables.begin()];
  EXPECT_EQ(t.kind, BufferKind::Constant);
  EXPECT_TRUE(t.constant.empty());
  // theta 10000, head_dim 8: 10000^(-2i / 8) for the 4 pairs.
  ASSERT_EQ(t.rotation.size(), 4u);
  const double expected[] = {1.0, 0.1, 0.01, 0.001};
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(t.rotation[i], expected[i], 1e-15) << "pair " << i;
  EXPECT_EQ(t.fixedBytes, 128 * 4 * 2 * 4);       // rows x pairs x (cos, sin) x fp32
  EXPECT_EQ(t.fixedBytes, static_cast<int64_t>(rotationTable(t.rotation, p.options.maxSeq).size() * 4));
}

// rotationTable: (cos, sin) of p * f for each position p and frequency f, row by row.
TEST(Plan, ARotationTableHoldsTheCosineAndSineOfEachPositionsAngles) {
  std::vector<float> t = rotationTable({1.0, 0.5}, 4);
  ASSERT_EQ(t.size(), 4u * 2 * 2);
  // Row 0: no rotation.
  EXPECT_EQ(t[0], 1.f);
  EXPECT_EQ(t[1], 0.f);
  EXPECT_EQ(t[2], 1.f);
  EXPECT_EQ(t[3], 0.f);
  // Row 3: angles 3 and 1.5 (cos 3 = -0.98999249660, sin 3 = 0.14112000806, cos 1.5 = 0.07073720167,
  // sin 1.5 = 0.99749498660, from tables).
  EXPECT_FLOAT_EQ(t[12], -0.98999249660f);
  EXPECT_FLOAT_EQ(t[13], 0.14112000806f);
  EXPECT_FLOAT_EQ(t[14], 0.07073720167f);
  EXPECT_FLOAT_EQ(t[15], 0.99749498660f);
  EXPECT_TRUE(rotationTable({1.0}, 0).empty());
}

TEST(Plan, ArenaHoldsEveryActivationWithoutOverlap) {
  auto m = test::parseVerified(test::tinyLlamaText("schedule = default", 8));
  ASSERT_TRUE(m);
  Plan p = planFor(*m);
  for (const PhasePlan *phase : {&p.prefill, &p.decode}) {
    EXPECT_GE(phase->arenaBytesPerRow, phase->peakLiveBytesPerRow);
    // Far less than one buffer per value instance: memory is reused across layers.
    int64_t total = 0;
    for (const PlanBuffer &b : p.buffers)
      if (b.kind == BufferKind::Activation) {
        EXPECT_GE(b.arenaOffsetPerRow, 0) << b.name;
        total += b.bytesPerRow;
      }
    EXPECT_LT(phase->arenaBytesPerRow * 4, total) << phase->name;
  }
}

TEST(Plan, DecodeUsesGemvAndPrefillTheTensorCoreGemm) {
  auto m = test::parseVerified(test::tinyLlamaText("schedule = default", 8));
  ASSERT_TRUE(m);
  Plan p = planFor(*m);
  auto kernelOf = [&](const PlannedLaunch &l) { return p.kernels[l.kernel]->name(); };
  for (const PlannedLaunch &l : p.decode.launches)
    if (l.op.find("matmul") != std::string::npos) {
      EXPECT_EQ(kernelOf(l).rfind("gemv_", 0), 0u) << kernelOf(l);
    }
  for (const PlannedLaunch &l : p.prefill.launches)
    if (l.op.find("matmul") != std::string::npos) {
      EXPECT_EQ(kernelOf(l).rfind("gemm_", 0), 0u) << kernelOf(l);
    }
  // A batch beyond the GEMV's rows (kGemvMaxRows = 16) switches decode to the GEMM.
  Plan big = planFor(*m, PlanOptions{32, 64, 128});
  for (const PlannedLaunch &l : big.decode.launches)
    if (l.op.find("matmul") != std::string::npos) {
      EXPECT_EQ(big.kernels[l.kernel]->name().rfind("gemm_", 0), 0u);
    }
}

TEST(Plan, JsonCarriesTheDecodeSummary) {
  auto m = test::parseVerified(test::tinyLlamaText("schedule = default", 8));
  ASSERT_TRUE(m);
  llvm::json::Object j = planFor(*m).toJSON();
  const llvm::json::Object *decode = j.getObject("decode");
  ASSERT_NE(decode, nullptr);
  EXPECT_EQ(*decode->getInteger("launches"), 39);
  EXPECT_EQ(*decode->getInteger("launches_per_layer"), 17);
  EXPECT_TRUE(decode->getInteger("weight_bytes").hasValue());
}

TEST(Plan, MatmulWeightsAndBiasesAreReadAsBf16AndATiedTableIsShared) {
  auto m = ir::parseModuleFile(std::string(MINFER_SOURCE_DIR) + "/examples/gpt2-124m.ir");
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  Plan p = planFor(**m, PlanOptions{1, 1024, 1024});
  auto find = [&](const std::string &name) -> const PlanBuffer * {
    for (const PlanBuffer &b : p.buffers)
      if (b.name == name) return &b;
    return nullptr;
  };
  // @wte (f32 in the checkpoint) feeds the embedding and the tied lm_head: one bf16 copy for both.
  const PlanBuffer *wte = find("@wte:bf16");
  ASSERT_NE(wte, nullptr);
  EXPECT_EQ(wte->dtype, ir::DType::BF16);
  EXPECT_EQ(wte->fixedBytes, 50257 * 768 * 2);
  EXPECT_EQ(find("@wte"), nullptr);
  // The learned positions are only embedded: they stay f32. Conv1D weights keep their transpose flag.
  ASSERT_NE(find("@wpe"), nullptr);
  EXPECT_EQ(find("@wpe")->dtype, ir::DType::F32);
  ASSERT_NE(find("@c_attn_b@0:bf16"), nullptr);
  ASSERT_NE(find("@c_attn_w@0:bf16"), nullptr);
  EXPECT_TRUE(find("@c_attn_w@0:bf16")->transposed);
  // Layer norms read their f32 gains as stored.
  ASSERT_NE(find("@ln_1_w@0"), nullptr);
  // Worked out by hand: wte 50257x768 as bf16; wpe 1024x768 as f32; per layer the matmul weights and
  // biases (2304x768 + 2304, 768x768 + 768, 3072x768 + 3072, 768x3072 + 768) as bf16 and the two layer
  // norms (4 x 768) as f32; the final norm (2 x 768) as f32.
  int64_t perLayer = (2304 * 768 + 2304 + 768 * 768 + 768 + 3072 * 768 + 3072 + 768 * 3072 + 768) * 2 + 4 * 768 * 4;
  EXPECT_EQ(p.weightBytes, 50257 * 768 * 2 + 1024 * 768 * 4 + 12 * perLayer + 2 * 768 * 4);
}

TEST(Plan, SessionSizesMustFitTheModel) {
  auto m = ir::parseModuleFile(std::string(MINFER_SOURCE_DIR) + "/examples/gpt2-124m.ir");
  ASSERT_TRUE(bool(m));
  auto target = parseTarget("sm_90");
  auto over = buildPlan(**m, *target, PlanOptions{1, 512, 2048});
  ASSERT_FALSE(bool(over));
  EXPECT_EQ(llvm::toString(over.takeError()), "--max-seq 2048 exceeds the 1024 rows of the learned position table @wpe");
  auto tiny = test::parseVerified(test::tinyLlamaText("schedule = default", 8));
  auto noMaxPos = buildPlan(*tiny, *target, PlanOptions{1, 64, 0});
  ASSERT_FALSE(bool(noMaxPos));
  EXPECT_NE(llvm::toString(noMaxPos.takeError()).find("give --max-seq"), std::string::npos);
  auto wide = buildPlan(*tiny, *target, PlanOptions{kMaxDecodeBatch + 1, 64, 16});
  ASSERT_FALSE(bool(wide));
  EXPECT_EQ(llvm::toString(wide.takeError()), "--max-batch 1025 exceeds 1024 (a decode step feeds its tokens back in one block of threads)");
  EXPECT_TRUE(bool(buildPlan(*tiny, *target, PlanOptions{kMaxDecodeBatch, 64, 16})));
}

TEST(Plan, AnOpNoKernelCanServeIsAnErrorAtTheOp) {
  // head_dim 4: the attention kernels need a multiple of 8 (16-byte rows).
  auto m = test::parseVerified(test::tinyLlamaText("schedule = default", 4));
  ASSERT_TRUE(m);
  auto plan = buildPlan(*m, *parseTarget("sm_90"), PlanOptions{1, 64, 128});
  ASSERT_FALSE(bool(plan));
  std::string err = llvm::toString(plan.takeError());
  EXPECT_NE(err.find("test.ir:29:12: error: no valid kernel for 'attention': attention_prefill_bf16_h4_kv2_d4"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("head_dim 4 is not a multiple of 8"), std::string::npos) << err;
}

// sameWeightBuffers (an engine sharing another's weights): plans of TinyLlama for one row and for 16 take
// other gemv tiles over the same weights and agree; a change to any one field of one weight or constant that
// decides its bytes on the device, or another rotation table, does not.
TEST(Plan, SameWeightBuffersLooksAtEveryFieldThatDecidesTheBytes) {
  auto m = fusedTinyLlama();
  ASSERT_TRUE(m);
  PlanOptions one;
  one.maxSeq = 256;
  PlanOptions sixteen = one;
  sixteen.maxBatch = 16;
  auto a = buildPlan(*m, *parseTarget("sm_90a"), one), b = buildPlan(*m, *parseTarget("sm_90a"), sixteen);
  ASSERT_TRUE(bool(a) && bool(b));
  std::set<std::string> tilesA, tilesB;
  for (const auto &k : a->kernels) tilesA.insert(k->name());
  for (const auto &k : b->kernels) tilesB.insert(k->name());
  ASSERT_NE(tilesA, tilesB);
  EXPECT_TRUE(sameWeightBuffers(*a, *b));
  EXPECT_TRUE(sameWeightBuffers(*a, *a));

  auto first = [](Plan &p, auto pred) -> PlanBuffer & {
    for (PlanBuffer &x : p.buffers)
      if (pred(x)) return x;
    ADD_FAILURE() << "no such buffer";
    return p.buffers.front();
  };
  auto withGains = [](const PlanBuffer &x) { return x.kind == BufferKind::Weight && x.gains >= 0; };
  auto packed = [](const PlanBuffer &x) { return x.kind == BufferKind::Weight && x.layout != PlanBuffer::Layout::AsIs; };
  auto filled = [](const PlanBuffer &x) { return x.kind == BufferKind::Constant && x.fill.has_value(); };
  auto rotation = [](const PlanBuffer &x) { return x.kind == BufferKind::Constant && !x.rotation.empty(); };
  std::vector<std::pair<const char *, std::function<void(Plan &)>>> changes = {
      {"gains", [&](Plan &p) { first(p, withGains).gains = -1; }},
      {"gains' weight", [&](Plan &p) {
         PlanBuffer &x = first(p, withGains);
         p.buffers[static_cast<size_t>(x.gains)].layer += 1;
       }},
      {"layout", [&](Plan &p) { first(p, packed).layout = PlanBuffer::Layout::AsIs; }},
      {"layout rows", [&](Plan &p) { first(p, packed).layoutRows += 1; }},
      {"dtype", [&](Plan &p) { first(p, withGains).dtype = ir::DType::F16; }},
      {"transposed", [&](Plan &p) { first(p, withGains).transposed ^= true; }},
      {"layer", [&](Plan &p) { first(p, withGains).layer += 1; }},
      {"weight", [&](Plan &p) { first(p, withGains).weight += 1; }},
      {"name", [&](Plan &p) { first(p, withGains).name += "_"; }},
      {"fill", [&](Plan &p) { *first(p, filled).fill += 1.f; }},
      {"rotation", [&](Plan &p) { first(p, rotation).rotation[0] += 1.0; }},
  };
  for (auto &[what, change] : changes) {
    Plan c = *a;
    change(c);
    EXPECT_FALSE(sameWeightBuffers(*a, c)) << what;
  }
  PlanOptions longer = one;
  longer.maxSeq = 512; // a rotation table of more positions
  auto d = buildPlan(*m, *parseTarget("sm_90a"), longer);
  ASSERT_TRUE(bool(d));
  EXPECT_FALSE(sameWeightBuffers(*a, *d));
}

} // namespace

// PlanOptions::gainsInWeights on sm_90a: the layers' RMS norms (read only by the q/k/v and gate/up matmuls)
// have their gamma multiplied into those weights at load. Decode folds them into the gemvs, whose prologue
// then reads no gamma; prefill launches them with unit gains, or with PlanOptions::gemmFoldsNorm folds each
// whose input a residual wgmma gemm stored (it writes its rows' squares; layer 0's first norm reads the
// embedding, so it launches) into the wgmma gemms that read it (from 128 rows; below, the mma.sync gemm
// takes no norm and they launch). The final norm feeds the lm_head that is the embedding table too (tied),
// so its gains cannot ride in W: it keeps its gamma, in its prefill launch and in the decode gemv's prologue.
TEST(Plan, OnSm90aTheLayersRmsGainsRideInTheirMatmulWeights) {
  auto m = test::parseVerified(test::tinyLlamaText("schedule = default", 8));
  ASSERT_TRUE(m);
  ASSERT_TRUE(bool(fuseModule(*m)));
  auto plan = [&](const char *target, PlanOptions o) {
    auto t = parseTarget(target);
    EXPECT_TRUE(bool(t));
    auto p = buildPlan(*m, *t, o);
    EXPECT_TRUE(bool(p)) << (p ? "" : llvm::toString(p.takeError()));
    return p ? std::move(*p) : Plan();
  };
  auto options = [](int64_t prefillRows, bool gemmFolds, bool gains = true) {
    PlanOptions o{1, prefillRows, 128};
    o.gemmFoldsNorm = gemmFolds;
    o.gainsInWeights = gains;
    return o;
  };
  auto normLaunches = [](const Plan &p, const PhasePlan &ph) {
    std::vector<const PlannedLaunch *> out;
    for (const PlannedLaunch &l : ph.launches)
      if (p.kernels[l.kernel]->name().rfind("rms_norm", 0) == 0) out.push_back(&l);
    return out;
  };
  auto name = [](const Plan &p, int b) { return b < 0 ? std::string("(none)") : p.buffers[b].name; };
  // Every norm launch of a layer reads fp32 ones; the final norm its own gamma.
  auto expectUnitGainLaunches = [&](const Plan &p, size_t launches) {
    auto launched = normLaunches(p, p.prefill);
    ASSERT_EQ(launched.size(), launches);
    for (const PlannedLaunch *l : launched) {
      const PlanBuffer &g = p.buffers[p.param(*l, "gamma")->buffer];
      if (l->op == "%f = rms_norm") {
        EXPECT_EQ(g.name, "@nf");
        continue;
      }
      EXPECT_EQ(g.kind, BufferKind::Constant) << l->op;
      ASSERT_TRUE(g.fill.has_value());
      EXPECT_EQ(*g.fill, 1.f);
      EXPECT_EQ(g.fixedBytes, 32 * 4) << "hidden fp32 ones";
      EXPECT_NE(p.kernels[l->kernel]->name().find("f32"), std::string::npos) << "the norm reads fp32 gains";
    }
  };
  // The matmuls reading a layer norm carry its gains and a gamma-less prologue where they fold it; the others
  // neither. Returns how many launches carried gains.
  auto checkMatmuls = [&](const Plan &p, bool gemmFolds) {
    int withGains = 0;
    for (const PhasePlan *ph : {&p.prefill, &p.decode})
      for (const PlannedLaunch &l : ph->launches) {
        const std::string k = p.kernels[l.kernel]->name();
        const ParamValue *wv = p.param(l, "W");
        if (!wv) continue;
        const PlanBuffer &w = p.buffers[wv->buffer];
        const bool qkv = k.find("_epi_qkv") != std::string::npos, gated = k.find("_epi_gated") != std::string::npos;
        SCOPED_TRACE(k);
        if (!qkv && !gated) {
          EXPECT_EQ(w.gains, -1) << w.name;
          EXPECT_EQ(k.find("_pro_rms_unit"), std::string::npos);
          continue;
        }
        ++withGains;
        EXPECT_EQ(name(p, w.gains), std::string(qkv ? "@n1@" : "@n2@") + std::to_string(l.layer));
        const bool decoding = ph == &p.decode, folds = decoding || (gemmFolds && !(qkv && l.layer == 0));
        EXPECT_EQ(k.find(decoding ? "_pro_rms_unit" : "_pro_rms_sq") != std::string::npos, folds);
        EXPECT_EQ(p.param(l, "epi")->epi.gamma, -1) << "no gamma read: it is in W";
        if (!folds) continue;
        if (!decoding) {
          // The squares come from the residual gemm that stored A: gate/up's from the o projection of its
          // layer, q/k/v's from the down projection of the layer before.
          const PlannedLaunch *producer = nullptr;
          for (const PlannedLaunch &q : ph->launches)
            if (q.op == (qkv ? "%x2 = matmul_residual" : "%x1 = matmul_residual") &&
                q.layer == (qkv ? l.layer - 1 : l.layer))
              producer = &q;
          EXPECT_NE(producer, nullptr);
          if (!producer) continue;
          const EpilogueArgs &mine = p.param(l, "epi")->epi, &theirs = p.param(*producer, "epi")->epi;
          EXPECT_NE(p.kernels[producer->kernel]->name().find("_epi_residual_rowsq"), std::string::npos);
          EXPECT_GE(mine.rowSq, 0);
          if (mine.rowSq < 0) continue;
          EXPECT_EQ(mine.rowSq, theirs.rowSq);
          EXPECT_EQ(mine.rowSqParts, theirs.rowSqParts);
          EXPECT_EQ(p.buffers[mine.rowSq].bytesPerRow, 4 * mine.rowSqParts);
          EXPECT_EQ(mine.rowSqParts, (32 + 127) / 128) << "hidden 32 in one tile of the default width";
        }
        EXPECT_EQ(p.param(l, "epi")->epi.eps, 1e-5);
        // A is the norm's input, the residual stream, not a normalised copy.
        const std::string stream = !qkv ? "%x1@" + std::to_string(l.layer)
                                   : l.layer == 0 ? "%x0"
                                                  : "%x2@" + std::to_string(l.layer - 1);
        EXPECT_EQ(p.buffers[p.param(l, "A")->buffer].name, stream);
      }
    return withGains;
  };

  Plan p = plan("sm_90a", options(128, false));
  EXPECT_EQ(checkMatmuls(p, false), 2 * 2 * 2); // q/k/v and gate/up, two layers, two phases
  expectUnitGainLaunches(p, 2 * 2 + 1);
  EXPECT_TRUE(normLaunches(p, p.decode).empty()) << "every decode norm is some gemv's prologue";
  // The tied head in decode: the final norm in the gemv's prologue with its own gamma.
  const PlannedLaunch *head = nullptr;
  for (const PlannedLaunch &l : p.decode.launches)
    if (l.op == "%logits = matmul") head = &l;
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(name(p, p.param(*head, "epi")->epi.gamma), "@nf");
  EXPECT_NE(p.kernels[head->kernel]->name().find("_pro_rms_bf16"), std::string::npos);

  // gemmFoldsNorm: prefill launches layer 0's first norm (unit gains) and the final one; the wgmma gemms
  // take the others.
  Plan folded = plan("sm_90a", options(128, true));
  EXPECT_EQ(checkMatmuls(folded, true), 2 * 2 * 2);
  expectUnitGainLaunches(folded, 2);
  EXPECT_EQ(normLaunches(folded, folded.prefill)[0]->op, "%a = rms_norm");
  EXPECT_EQ(normLaunches(folded, folded.prefill)[0]->layer, 0);
  // 64 prefill rows: the mma.sync gemm takes no norm, so the norms launch, with unit gains.
  Plan small = plan("sm_90a", options(64, true));
  expectUnitGainLaunches(small, 2 * 2 + 1);
  for (const auto &k : small.kernels) EXPECT_EQ(k->name().find("rowsq"), std::string::npos) << k->name();

  // Other targets, or the option off: no gains in any weight, the norms launch with their gamma.
  for (Plan q : {plan("sm_90", options(128, true)), plan("sm_89", options(128, true)),
                 plan("sm_90a", options(128, true, false))}) {
    for (const PlanBuffer &b : q.buffers) EXPECT_EQ(b.gains, -1) << b.name;
    for (const PlannedLaunch *l : normLaunches(q, q.prefill))
      EXPECT_EQ(q.buffers[q.param(*l, "gamma")->buffer].kind, BufferKind::Weight) << l->op;
    EXPECT_EQ(normLaunches(q, q.prefill).size(), 2u * 2 + 1);
  }
}

// GPT-2's LayerNorms keep their gains and biases: nothing rides in its weights on sm_90a either.
TEST(Plan, LayerNormsKeepTheirGains) {
  auto m = ir::parseModuleFile(std::string(MINFER_SOURCE_DIR) + "/examples/gpt2-124m.ir");
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  ASSERT_TRUE(bool(fuseModule(**m)));
  auto p = buildPlan(**m, *parseTarget("sm_90a"), PlanOptions{1, 1024, 1024});
  ASSERT_TRUE(bool(p)) << llvm::toString(p.takeError());
  for (const PlanBuffer &b : p->buffers) EXPECT_EQ(b.gains, -1) << b.name;
  for (const auto &k : p->kernels) EXPECT_EQ(k->name().find("_pro_rms_unit"), std::string::npos) << k->name();
}

// A LayerNorm folds only into the FMA gemv. In GPT-2's one-row decode it folds everywhere: the layers' norms into
// their small gemvs, and the final one into the lm_head (50257 x 768), which on sm_90a stays on the FMA kernel for
// it (4 rows a warp; it would otherwise be the wgmma gemv) and folds the argmax too. At two rows on sm_90a the
// final norm launches and the head streams through wgmma (still folding the argmax); on sm_89 it folds.
TEST(Plan, ALayerNormFoldsIntoTheHeadAtOneRow) {
  auto m = ir::parseModuleFile(std::string(MINFER_SOURCE_DIR) + "/examples/gpt2-124m.ir");
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  ASSERT_TRUE(bool(fuseModule(**m)));
  for (const char *target : {"sm_90a", "sm_89"})
    for (int64_t batch : {1, 2}) {
      SCOPED_TRACE(std::string(target) + ", batch " + std::to_string(batch));
      const bool wgmma = std::string(target) == "sm_90a" && batch == 2;
      auto p = buildPlan(**m, *parseTarget(target), PlanOptions{batch, 1024, 1024});
      ASSERT_TRUE(bool(p)) << llvm::toString(p.takeError());
      std::map<std::string, std::vector<std::string>> kernelsOf; // op -> its launches' kernels
      for (const PlannedLaunch &l : p->decode.launches) kernelsOf[l.op].push_back(p->kernels[l.kernel]->name());
      EXPECT_EQ(kernelsOf["%final = layer_norm"].size(), wgmma ? 1u : 0u);
      ASSERT_EQ(kernelsOf["%logits = matmul"].size(), 1u);
      const std::string head = kernelsOf["%logits = matmul"][0];
      EXPECT_EQ(head.find("_wgmma_") != std::string::npos, wgmma) << head;
      EXPECT_EQ(head.find("_pro_layer") == std::string::npos, wgmma) << head;
      EXPECT_NE(head.find("argmax"), std::string::npos) << head;
      if (batch == 1) {
        EXPECT_NE(head.find(std::string(target) == "sm_90a" ? "_m1_r4_w4_" : "_m1_r1_w4_"), std::string::npos) << head;
      }
      ASSERT_EQ(kernelsOf["%q = qkv"].size(), 12u);
      for (const std::string &k : kernelsOf["%q = qkv"]) EXPECT_NE(k.find("_pro_layer"), std::string::npos) << k;
    }
}

// GPT-2 XL's widths (12 layers here; qkv 4800 x 1600, fc 6400 x 1600): its layer matmuls would be wgmma gemvs
// on sm_90a, so their LayerNorms launch on their own even at one row (folding them was not measured); the final
// one still folds into the head.
TEST(Plan, ALayerNormBeforeAWgmmaSizedLayerMatmulLaunchesOnItsOwn) {
  std::string text = test::readFile(std::string(MINFER_SOURCE_DIR) + "/examples/gpt2-124m.ir");
  for (auto [from, to] : {std::pair{"dim hidden = 768", "dim hidden = 1600"}, std::pair{"dim heads = 12", "dim heads = 25"},
                          std::pair{"dim qkv_dim = 2304", "dim qkv_dim = 4800"}, std::pair{"dim ffn = 3072", "dim ffn = 6400"}}) {
    size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, std::string(from).size(), to);
  }
  auto m = test::parseVerified(text);
  ASSERT_TRUE(m);
  ASSERT_TRUE(bool(fuseModule(*m)));
  auto p = buildPlan(*m, *parseTarget("sm_90a"), PlanOptions{1, 1024, 1024});
  ASSERT_TRUE(bool(p)) << llvm::toString(p.takeError());
  std::map<std::string, std::vector<std::string>> kernelsOf; // op -> its launches' kernels
  for (const PlannedLaunch &l : p->decode.launches) kernelsOf[l.op].push_back(p->kernels[l.kernel]->name());
  EXPECT_EQ(kernelsOf["%attn_in = layer_norm"].size(), 12u);
  EXPECT_EQ(kernelsOf["%mlp_in = layer_norm"].size(), 12u);
  EXPECT_EQ(kernelsOf["%final = layer_norm"].size(), 0u);
  ASSERT_EQ(kernelsOf["%q = qkv"].size(), 12u);
  EXPECT_NE(kernelsOf["%q = qkv"][0].find("_wgmma_"), std::string::npos) << kernelsOf["%q = qkv"][0];
  ASSERT_EQ(kernelsOf["%logits = matmul"].size(), 1u);
  EXPECT_NE(kernelsOf["%logits = matmul"][0].find("_m1_r4_w4_"), std::string::npos) << kernelsOf["%logits = matmul"][0];
  EXPECT_NE(kernelsOf["%logits = matmul"][0].find("_pro_layer"), std::string::npos) << kernelsOf["%logits = matmul"][0];
}
