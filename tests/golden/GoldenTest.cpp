// tests/golden/GoldenTest.cpp — the reference interpreter against Hugging Face transformers.
//
// Each fixture under tests/golden/fixtures/ was written by make_fixtures.py (a tiny random-weight HF model:
// config.json + model.safetensors, and reference.safetensors with HF's float64 logits over 64 positions).
// The fixture goes through import-hf and the safetensors reader like any checkpoint; the interpreter must
// match HF's logits for the prompt and for each teacher-forced decode step with relative error below 1e-5,
// and produce HF's greedy continuation.
#include "common/GoldenReference.h"
#include "common/TestModels.h"

#include "compiler/Fuse.h"
#include "io/HFImport.h"
#include "io/Safetensors.h"
#include "io/WeightLoader.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace minfer;
using minfer::test::fixtureDir;
using minfer::test::kFixtures;
using minfer::test::readReference;

namespace {

constexpr double kTolerance = 1e-5; // DESIGN.md, Numerics: interpreter vs HF's float64 reference

class Golden : public ::testing::TestWithParam<std::tuple<const char *, bool>> {};

std::string goldenName(const testing::TestParamInfo<std::tuple<const char *, bool>> &info) {
  return std::string(std::get<0>(info.param)) + (std::get<1>(info.param) ? "_fused" : "_unfused");
}

// Unfused, the module as imported; fused, after the fusion pass (compiler/Fuse.cpp), whose ops the
// interpreter defines too: both must hold to HF.
TEST_P(Golden, InterpreterMatchesTransformers) {
  auto [fixture, fuse] = GetParam();
  std::string dir = fixtureDir(fixture);
  auto module = importHF(dir);
  ASSERT_TRUE(bool(module)) << llvm::toString(module.takeError());
  if (fuse) {
    auto stats = fuseModule(**module);
    ASSERT_TRUE(bool(stats)) << llvm::toString(stats.takeError());
    EXPECT_EQ(stats->fired["qkv"], 1) << "every fixture has one attention block to fuse";
    EXPECT_GE(stats->fired["epilogue"], 2) << "the two residual adds at least";
  }
  auto ckpt = Checkpoint::open(dir);
  ASSERT_TRUE(bool(ckpt)) << llvm::toString(ckpt.takeError());
  auto weights = loadWeightsF32(**module, *ckpt);
  ASSERT_TRUE(bool(weights)) << llvm::toString(weights.takeError());
  auto ref = readReference(dir);
  ASSERT_TRUE(bool(ref)) << llvm::toString(ref.takeError());
  int64_t vocab = ref->promptLogits.cols();
  ASSERT_GT(ref->promptIds.size(), 0u);
  ASSERT_EQ(ref->promptLogits.rows(), static_cast<int64_t>(ref->promptIds.size()));
  ASSERT_EQ(ref->forcedLogits.rows(), static_cast<int64_t>(ref->forcedIds.size()));

  ASSERT_GE(ref->promptIds.size() + ref->forcedIds.size(), 64u) << "fixtures reach 64 positions";
  int64_t maxSeq =
      static_cast<int64_t>(ref->promptIds.size() + std::max(ref->forcedIds.size(), ref->greedyIds.size()));
  auto interp = ir::Interpreter::create(**module, *weights, 1, maxSeq);
  ASSERT_TRUE(bool(interp)) << llvm::toString(interp.takeError());
  ASSERT_EQ((*interp)->vocab(), vocab);

  // Prefill of the prompt.
  auto prompt = (*interp)->step(0, ref->promptIds);
  ASSERT_TRUE(bool(prompt)) << llvm::toString(prompt.takeError());
  double err = test::relError(prompt->data, ref->promptLogits.data);
  EXPECT_LT(err, kTolerance) << "prompt logits";
  // Teacher-forced decode steps through the KV cache.
  double forcedErr = 0;
  for (size_t i = 0; i < ref->forcedIds.size(); ++i) {
    auto step = (*interp)->step(0, {ref->forcedIds[i]});
    ASSERT_TRUE(bool(step)) << llvm::toString(step.takeError());
    std::vector<float> want(ref->forcedLogits.row(i), ref->forcedLogits.row(i) + vocab);
    double stepErr = test::relError(step->data, want);
    EXPECT_LT(stepErr, kTolerance) << "forced step " << i;
    forcedErr = std::max(forcedErr, stepErr);
  }
  // Greedy continuation from the prompt alone.
  auto fresh = ir::Interpreter::create(**module, *weights, 1, maxSeq);
  ASSERT_TRUE(bool(fresh));
  auto greedy = ir::generateGreedy(**fresh, {ref->promptIds}, static_cast<int64_t>(ref->greedyIds.size()));
  ASSERT_TRUE(bool(greedy)) << llvm::toString(greedy.takeError());
  EXPECT_EQ(greedy->tokens[0], ref->greedyIds);
  std::cout << "[ golden ] " << fixture << (fuse ? " fused" : " unfused") << ": prompt logits rel err " << err
            << ", forced steps up to " << forcedErr << ", greedy " << greedy->tokens[0].size() << " tokens\n";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Golden, ::testing::Combine(::testing::ValuesIn(kFixtures), ::testing::Bool()),
                         goldenName);

TEST(GoldenFixtures, EveryCommittedFixtureIsTested) {
  std::error_code ec;
  int found = 0;
  for (llvm::sys::fs::directory_iterator it(std::string(MINFER_SOURCE_DIR) + "/tests/golden/fixtures", ec), end;
       it != end && !ec; it.increment(ec)) {
    std::string name = llvm::sys::path::filename(it->path()).str();
    EXPECT_TRUE(std::find(std::begin(kFixtures), std::end(kFixtures), name) != std::end(kFixtures))
        << "fixture " << name << " is not in kFixtures";
    ++found;
  }
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(found, static_cast<int>(std::size(kFixtures)));
}

} // namespace
