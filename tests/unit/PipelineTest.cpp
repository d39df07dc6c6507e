// tests/unit/PipelineTest.cpp — compiler::Pipeline's steps on an IR file and on the bundle built from it:
// the passes run (or not, for a bundle), a bundle brings its own sizes and target, and its kernels come from
// the bundle without NVRTC.
#include "common/TestFiles.h"
#include "common/TestModels.h"
#include "compiler/Pipeline.h"

#include <gtest/gtest.h>

namespace minfer {
namespace {

TEST(Pipeline, AnIrFileThroughEveryStepThenItsBundle) {
  test::TempDir tmp{"minfer-pipeline"};
  std::string ir = tmp.write("model.ir", test::tinyLlamaText("schedule = default", 8));
  PipelineOptions opts;
  opts.plan = PlanOptions{2, 32, 64};
  opts.plan.gainsInWeights = false;
  opts.plan.gemmFoldsNorm = false;
  opts.plan.weightRing = true;
  opts.cache = false; // compile in this process: the test's own kernels, no cache state
  int printed = 0;
  opts.afterPasses = [&](const ir::Module &) { ++printed; };

  auto p = Pipeline::load(ir, opts);
  ASSERT_TRUE(bool(p)) << llvm::toString(p.takeError());
  EXPECT_EQ(p->sourceName(), "ir");
  ASSERT_FALSE(bool(p->runPasses()));
  EXPECT_TRUE(p->fused());
  EXPECT_EQ(printed, 1);
  Target sm89 = test::target("sm_89");
  auto plan = p->plan(sm89);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  EXPECT_EQ((*plan)->options.maxBatch, 2);
  std::vector<KernelSource> sources = p->sources();
  ASSERT_EQ(sources.size(), (*plan)->kernels.size());
  for (size_t i = 0; i < sources.size(); ++i) {
    EXPECT_EQ(sources[i].name, (*plan)->kernels[i]->name());
    EXPECT_FALSE(sources[i].headers.empty()) << "a kernel source must carry the templates it includes";
  }
  auto compiled = p->compile(sm89);
  ASSERT_TRUE(bool(compiled)) << llvm::toString(compiled.takeError());
  std::string bundlePath = tmp.file("model.mfb");
  ASSERT_FALSE(bool(writeBundle(bundlePath, p->makeBundle(std::move(*compiled)))));

  // The bundle: planned as built (its sizes, not the options'), no passes, its own kernels.
  PipelineOptions other;
  other.plan = PlanOptions{1, 16, 16};
  other.afterPasses = [&](const ir::Module &) { ++printed; };
  auto b = Pipeline::load(bundlePath, other);
  ASSERT_TRUE(bool(b)) << llvm::toString(b.takeError());
  EXPECT_EQ(b->sourceName(), "bundle");
  EXPECT_EQ(b->tuningFrom(), "bundle");
  ASSERT_FALSE(bool(b->runPasses()));
  EXPECT_TRUE(b->fused());
  EXPECT_EQ(printed, 2);
  auto wrong = b->plan(test::target("sm_90"));
  ASSERT_FALSE(bool(wrong));
  std::string msg = llvm::toString(wrong.takeError());
  EXPECT_NE(msg.find("the bundle was built for sm_89, but the target is sm_90"), std::string::npos) << msg;
  auto bplan = b->plan(sm89);
  ASSERT_TRUE(bool(bplan)) << llvm::toString(bplan.takeError());
  EXPECT_EQ((*bplan)->options.maxBatch, 2);
  EXPECT_EQ((*bplan)->options.maxSeq, 64);
  EXPECT_FALSE((*bplan)->options.gainsInWeights) << "the bundle's plan keeps its norms' gains where it built them";
  EXPECT_FALSE((*bplan)->options.gemmFoldsNorm) << "and launches its prefill norms as it built them";
  EXPECT_TRUE((*bplan)->options.weightRing) << "and asks for the persistent kernel's weight ring as it was built";
  uint64_t before = nvrtcCompileCount();
  auto fromBundle = b->compile(sm89);
  ASSERT_TRUE(bool(fromBundle)) << llvm::toString(fromBundle.takeError());
  EXPECT_EQ(nvrtcCompileCount(), before) << "a bundle's kernels are read, never compiled";
  ASSERT_EQ(fromBundle->size(), (*bplan)->kernels.size());
  for (size_t i = 0; i < fromBundle->size(); ++i) {
    EXPECT_EQ((*fromBundle)[i].name, (*bplan)->kernels[i]->name());
    EXPECT_FALSE((*fromBundle)[i].cubin.empty());
  }
}

TEST(Pipeline, AMissingModelIsNamed) {
  auto p = Pipeline::load("/nonexistent/minfer/model.ir");
  ASSERT_FALSE(bool(p));
  EXPECT_TRUE(test::failsMentioning(p.takeError(), {"model '/nonexistent/minfer/model.ir' does not exist"}));
}

} // namespace
} // namespace minfer
