// tests/unit/PlanTest.cpp — lowering a module to prefill and decode launches: counts worked out by hand
// from the op list, buffers shared between the phases, and the arena layout.
#include "common/TestModels.h"

#include "compiler/Plan.h"

#include <gtest/gtest.h>

#include <set>

using namespace minfer;

namespace {

Plan planFor(const ir::Module &m, PlanOptions opts = {}) {
  auto target = parseTarget("sm_90");
  EXPECT_TRUE(bool(target));
  auto plan = buildPlan(m, *target, opts);
  EXPECT_TRUE(bool(plan)) << (plan ? "" : llvm::toString(plan.takeError()));
  return plan ? std::move(*plan) : Plan();
}

TEST(Plan, LlamaLayerLaunchesOneKernelPerOpUnfused) {
  auto m = test::parseVerified(test::tinyLlamaText());
  ASSERT_TRUE(m);
  Plan p = planFor(*m);
  // A layer: rms_norm, 3 matmuls, 2 ropes, attention (kv_write + attention), o matmul, add, rms_norm,
  // gate and up matmuls, silu, mul, down matmul, add = 17; decode attention adds the combine kernel.
  EXPECT_EQ(p.prefill.launchesPerLayer, 17);
  EXPECT_EQ(p.decode.launchesPerLayer, 18);
  EXPECT_EQ(p.decode.layers, 2);
  // Outside the layers: embedding, final norm, lm_head; decode adds the argmax.
  EXPECT_EQ(p.prefill.launches.size(), 2u * 17 + 3);
  EXPECT_EQ(p.decode.launches.size(), 2u * 18 + 4);
}

TEST(Plan, WeightsKvCachesAndConstantsAreSharedByBothPhases) {
  auto m = test::parseVerified(test::tinyLlamaText());
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
      EXPECT_EQ(b.fixedBytes, 2 * 128 * 8 * 2); // batch * max_seq * kv_dim * bf16
    }
  }
  EXPECT_EQ(kv, 4);           // K and V for each of 2 layers
  EXPECT_EQ(weights, 2 + 2 * 9); // embed, nf, and 9 per layer
  EXPECT_EQ(constants, 2);    // the inverse-frequency tables of the two rope ops
  // Matmul weights count as bf16: (32*16 + 2 * (16*16*2 + 8*16*2 + 24*16*3)) * 2 bytes, norms as declared bf16.
  int64_t matmul = 32 * 16 + 2 * (16 * 16 * 2 + 8 * 16 * 2 + 24 * 16 * 3), norms = 16 + 2 * 16 * 2;
  EXPECT_EQ(p.weightBytes, (matmul + norms) * 2);
  EXPECT_DOUBLE_EQ(p.decodeFlopsPerToken, 2.0 * matmul);
}

TEST(Plan, ArenaHoldsEveryActivationWithoutOverlap) {
  auto m = test::parseVerified(test::tinyLlamaText());
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
  auto m = test::parseVerified(test::tinyLlamaText());
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
  // A batch beyond the GEMV's rows (kGemvMaxRows = 8) switches decode to the GEMM.
  Plan big = planFor(*m, PlanOptions{32, 64, 128});
  for (const PlannedLaunch &l : big.decode.launches)
    if (l.op.find("matmul") != std::string::npos) {
      EXPECT_EQ(big.kernels[l.kernel]->name().rfind("gemm_", 0), 0u);
    }
}

TEST(Plan, JsonCarriesTheDecodeSummary) {
  auto m = test::parseVerified(test::tinyLlamaText());
  ASSERT_TRUE(m);
  llvm::json::Object j = planFor(*m).toJSON();
  const llvm::json::Object *decode = j.getObject("decode");
  ASSERT_NE(decode, nullptr);
  EXPECT_EQ(*decode->getInteger("launches"), 40);
  EXPECT_EQ(*decode->getInteger("launches_per_layer"), 18);
  EXPECT_TRUE(decode->getInteger("weight_bytes").hasValue());
}

} // namespace
