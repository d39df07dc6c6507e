// tests/unit/ParamsTest.cpp — every kernel family's Params: the host layout is well formed, the plan binds
// fields by name, and NVRTC refuses a template whose struct disagrees with the host's (the generated checks
// are real checks, not decoration).
#include "common/TestFiles.h"
#include "common/TestModels.h"
#include "compiler/Plan.h"
#include "compiler/kernels/Attention.h"
#include "compiler/kernels/Epilogue.h"
#include "compiler/kernels/Gemm.h"
#include "compiler/kernels/Gemv.h"
#include "compiler/kernels/RowOps.h"
#include "compiler/kernels/Split.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>

namespace minfer {
namespace {

size_t fieldBytes(const ParamField &f) {
  switch (f.type) {
  case ParamType::I32:
  case ParamType::F32: return 4;
  case ParamType::Ptr:
  case ParamType::U64: return 8;
  case ParamType::Struct: return f.nested->bytes;
  }
  return 0;
}

const ParamsLayout *const kLayouts[] = {
    &MatmulParams::layout(),          &EpiParams::layout(),         &NormParams::layout(),
    &PointwiseParams::layout(),       &EmbeddingParams::layout(),   &RopeParams::layout(),
    &KvWriteParams::layout(),         &ArgmaxParams::layout(),      &SampleParams::layout(),
    &AdvanceParams::layout(),         &SplitParams::layout(),       &AttentionPrefillParams::layout(),
    &AttentionDecodeParams::layout()};

TEST(Params, EveryLayoutIsOrderedAlignedAndInsideItsStruct) {
  for (const ParamsLayout *l : kLayouts) {
    SCOPED_TRACE(l->name);
    ASSERT_FALSE(l->fields.empty());
    EXPECT_LE(l->bytes, kMaxParamsBytes);
    std::set<std::string> names;
    uint32_t end = 0;
    for (const ParamField &f : l->fields) {
      EXPECT_TRUE(names.insert(f.name).second) << "duplicate field " << f.name;
      EXPECT_GE(f.offset, end) << f.name << " overlaps the field before it";
      size_t align = f.type == ParamType::Struct ? 8 : fieldBytes(f);
      EXPECT_EQ(f.offset % align, 0u) << f.name << " is misaligned";
      end = f.offset + static_cast<uint32_t>(fieldBytes(f));
      EXPECT_EQ(l->find(f.name), &f - l->fields.data());
    }
    EXPECT_LE(end, l->bytes);
    EXPECT_EQ(l->find("no_such_field"), -1);
  }
}

TEST(Params, WritesConvertToTheFieldsType) {
  uint8_t blob[kMaxParamsBytes] = {};
  const ParamsLayout &l = SampleParams::layout();
  const ParamField &temperature = l.fields[l.find("temperature")], &topK = l.fields[l.find("top_k")];
  const ParamField &seed = l.fields[l.find("seed")];
  writeParam(blob, temperature, 0.5);
  writeParam(blob, topK, int64_t(40));
  writeParam(blob, seed, uint64_t(0x123456789abcdefULL));
  SampleParams p;
  std::memcpy(&p, blob, sizeof p);
  EXPECT_EQ(p.temperature, 0.5f);
  EXPECT_EQ(p.top_k, 40);
  EXPECT_EQ(p.seed, 0x123456789abcdefULL);
}

TEST(Params, GeneratedSourcesCheckEveryFieldOfTheTemplatesStruct) {
  NormSpec spec(NormKind::Layer, 64, ir::DType::BF16, NormFusion::ResidualAdd);
  std::string src = spec.source();
  EXPECT_NE(src.find("sizeof(minfer::NormParams) == " + std::to_string(sizeof(NormParams))), std::string::npos) << src;
  for (const ParamField &f : NormParams::layout().fields)
    EXPECT_NE(src.find("->" + std::string(f.name) + ") == " + std::to_string(f.offset)), std::string::npos)
        << f.name << "\n"
        << src;
  // A nested struct is checked member by member at its offset inside the outer one.
  std::string gemm = GemmSpec(64, 64, Epilogue::None, GemmTile{}).source();
  EXPECT_NE(gemm.find("->epi.argmax) == " + std::to_string(offsetof(MatmulParams, epi) + offsetof(EpiParams, argmax))),
            std::string::npos)
      << gemm;
}

// A host mirror that disagrees with the template (eps moved) must fail the kernel's compile, naming the field.
TEST(Params, NvrtcRefusesATemplateWhoseStructDisagreesWithTheHost) {
  static const ParamField wrong[] = {{"a", ParamType::Ptr, 0}, {"eps", ParamType::F32, 60}};
  ParamsLayout layout{"minfer::NormParams", sizeof(NormParams), wrong};
  NormSpec spec(NormKind::Rms, 64, ir::DType::BF16, NormFusion::None);
  KernelSource src = kernelSource(spec);
  std::string good = src.text;
  src.text = "#include \"norm.cuh\"\n" + layout.layoutChecks();
  auto compiled = compileKernel(src, test::target("sm_89"));
  ASSERT_FALSE(bool(compiled));
  std::string msg = llvm::toString(compiled.takeError());
  EXPECT_NE(msg.find("minfer::NormParams::eps is not where the host's mirror"), std::string::npos) << msg;
  src.text = good;
  auto ok = compileKernel(src, test::target("sm_89"));
  EXPECT_TRUE(bool(ok)) << (ok ? "" : llvm::toString(ok.takeError()));
}

TEST(Params, ThePlanBindsOnlyFieldsTheKernelHas) {
  auto m = test::parseVerified(test::tinyLlamaText("schedule = default", 8));
  ASSERT_TRUE(m);
  auto plan = buildPlan(*m, test::target("sm_89"), PlanOptions{2, 64, 128});
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  for (const PhasePlan *ph : {&plan->prefill, &plan->decode})
    for (const PlannedLaunch &l : ph->launches) {
      const ParamsLayout &layout = plan->kernels[l.kernel]->params();
      std::set<int> fields;
      for (const ParamBinding &b : l.params) {
        ASSERT_GE(b.field, 0) << l.op;
        ASSERT_LT(b.field, int(layout.fields.size())) << l.op;
        EXPECT_TRUE(fields.insert(b.field).second) << l.op << ": " << layout.fields[b.field].name << " bound twice";
      }
      // A kernel with a row count always gets one.
      if (layout.find("rows") >= 0) {
        EXPECT_TRUE(plan->param(l, "rows")) << l.op;
      }
    }
}

} // namespace
} // namespace minfer
