// tests/unit/RowOpsSpecTest.cpp — the row-op kernel specs (names, entries, launch geometry, shape checks),
// the host copy of the sampling algorithm, and that every row-op template compiles under NVRTC for sm_80,
// sm_89 and sm_90 across a sweep of shapes. No GPU needed: NVRTC runs anywhere.
#include "jit/Nvrtc.h"
#include "io/Safetensors.h"
#include "compiler/kernels/RowOps.h"
#include "common/RandomBf16.h"

#include <gtest/gtest.h>

#include <nvrtc.h>

#include <cmath>
#include <map>
#include <memory>
#include <set>

using namespace minfer;

namespace {

std::string errorOf(llvm::Error e) { return e ? llvm::toString(std::move(e)) : ""; }

// ---- names, entries, launch ---------------------------------------------------------------------------

TEST(RowOpsSpec, NamesAndEntriesReadLikeTheKernel) {
  NormSpec rms(NormKind::Rms, 2048, ir::DType::BF16);
  EXPECT_EQ(rms.name(), "rms_norm_bf16_d2048_t256");
  EXPECT_EQ(rms.entry(), "minfer::rms_norm<2048, 256, minfer::bf16>");
  EXPECT_EQ(rms.header(), "norm.cuh");
  NormSpec ln(NormKind::Layer, 768, ir::DType::F32, NormFusion::ResidualAdd);
  EXPECT_EQ(ln.name(), "layer_norm_residual_f32_d768_t96");
  EXPECT_EQ(ln.entry(), "minfer::layer_norm_residual<768, 96, float>");
  EXPECT_EQ(NormSpec(NormKind::Rms, 896, ir::DType::F16).entry(), "minfer::rms_norm<896, 128, __half>");

  EmbeddingSpec emb(2048, ir::DType::F16);
  EXPECT_EQ(emb.name(), "embedding_f16_d2048");
  EXPECT_EQ(emb.entry(), "minfer::embedding<2048, __half>");
  EmbeddingSpec sum(768, ir::DType::BF16, ir::DType::F32); // embedding_sum: GPT-2's token and position tables
  EXPECT_EQ(sum.name(), "embedding_sum_bf16_f32_d768");
  EXPECT_EQ(sum.entry(), "minfer::embedding<768, minfer::bf16, float>");
  EXPECT_EQ(sum.asTask(128, 1)->taskType(), "minfer::EmbeddingTask<768, minfer::bf16, float>");

  EXPECT_EQ(PointwiseSpec(PointwiseOp::SiluMul, 5632).name(), "pointwise_silu_mul_c5632");
  EXPECT_EQ(PointwiseSpec(PointwiseOp::SiluMul, 5632).entry(), "minfer::binary<minfer::pw::SiluMul, 5632>");
  EXPECT_EQ(PointwiseSpec(PointwiseOp::GeluTanh, 3072).entry(), "minfer::unary<minfer::pw::GeluTanh, 3072>");

  RopeSpec rope(32, 128, RopeStyle::Half);
  EXPECT_EQ(rope.name(), "rope_half_h32_d128");
  EXPECT_EQ(rope.entry(), "minfer::rope<32, 128, minfer::RopeStyle::Half>");
  EXPECT_EQ(RopeSpec(12, 64, RopeStyle::Interleaved).name(), "rope_interleaved_h12_d64");

  EXPECT_EQ(KvWriteSpec(4, 64).name(), "kv_write_h4_d64");
  EXPECT_EQ(KvWriteSpec(4, 64).entry(), "minfer::kv_write<4, 64>");
  EXPECT_EQ(KvWriteSpec(4, 64, RopeStyle::Half).name(), "rope_kv_write_half_h4_d64");
  EXPECT_EQ(KvWriteSpec(4, 64, RopeStyle::Half).entry(), "minfer::rope_kv_write<4, 64, minfer::RopeStyle::Half>");

  EXPECT_EQ(ArgmaxSpec(151936).name(), "argmax_v151936_t1024");
  EXPECT_EQ(ArgmaxSpec(151936).entry(), "minfer::argmax<151936, 1024>");
  EXPECT_EQ(SampleSpec(32000).name(), "sample_v32000_t512");
  EXPECT_EQ(SampleSpec(32000).entry(), "minfer::sample<32000, 512>");
}

TEST(RowOpsSpec, GeneratedSourceIncludesTheHeaderAndNamesTheEntry) {
  NormSpec rms(NormKind::Rms, 2048, ir::DType::BF16);
  std::string src = rms.source();
  EXPECT_NE(src.find("#include \"norm.cuh\""), std::string::npos) << src;
  EXPECT_NE(src.find(rms.entry()), std::string::npos) << src;
}

TEST(RowOpsSpec, NormThreadsFollowTheRowWidth) {
  // One thread per 16-byte vector in whole warps, at most 256, more only past 16 vectors per thread.
  std::map<int64_t, int> want = {{64, 32}, {768, 96}, {896, 128}, {2048, 256}, {4096, 256}, {8192, 256}, {65536, 512}, {100, 32}};
  for (auto [dim, threads] : want) EXPECT_EQ(NormSpec::defaultThreads(dim), threads) << "dim " << dim;
  EXPECT_EQ(NormSpec(NormKind::Rms, 2048, ir::DType::BF16, NormFusion::None, 512).threads, 512);
}

TEST(RowOpsSpec, LaunchGivesABlockPerRow) {
  NormSpec rms(NormKind::Rms, 4096, ir::DType::BF16);
  LaunchDims d = rms.launch(7);
  EXPECT_EQ(d.grid, (std::array<unsigned, 3>{7, 1, 1}));
  EXPECT_EQ(d.block, (std::array<unsigned, 3>{256, 1, 1}));
  EXPECT_EQ(d.sharedBytes, 0u);
  EXPECT_EQ(rms.launch(0).grid[0], 1u) << "rows = 0 launches one block that exits";
  EXPECT_EQ(EmbeddingSpec(768, ir::DType::BF16).launch(300).grid[0], 300u);
  EXPECT_EQ(EmbeddingSpec(768, ir::DType::BF16).launch(1).block[0], 96u);
  EXPECT_EQ(RopeSpec(32, 128, RopeStyle::Half).launch(5).block[0], 256u);  // 32 heads × 8 vectors
  EXPECT_EQ(RopeSpec(2, 64, RopeStyle::Interleaved).launch(5).block[0], 32u); // 16 units, 32 cos/sin
  EXPECT_EQ(KvWriteSpec(8, 128).launch(3).block[0], 128u);                      // 1024 / 8 vectors
  EXPECT_EQ(ArgmaxSpec(32000).launch(16).grid[0], 16u);
  EXPECT_EQ(ArgmaxSpec(32000).launch(16).block[0], 1024u);
  EXPECT_EQ(SampleSpec(32000).launch(2).block[0], 512u);
}

TEST(RowOpsSpec, PointwiseLaunchesOneVectorPerThread) {
  // 3 rows of 5632: 3 × 704 vectors of 8 → 2112 threads → 9 blocks of 256.
  EXPECT_EQ(PointwiseSpec(PointwiseOp::Silu, 5632).launch(3).grid[0], 9u);
  // 321 columns is odd: one element per access, 2 × 321 = 642 → 3 blocks.
  EXPECT_EQ(PointwiseSpec(PointwiseOp::Add, 321).launch(2).grid[0], 3u);
  EXPECT_EQ(PointwiseSpec(PointwiseOp::Add, 321).launch(2).block[0], 256u);
  EXPECT_EQ(PointwiseSpec(PointwiseOp::Add, 321).launch(0).grid[0], 1u);
}

TEST(RowOpsSpec, VerifyRejectsImpossibleShapes) {
  EXPECT_EQ(errorOf(NormSpec(NormKind::Rms, 2048, ir::DType::BF16).verify()), "");
  EXPECT_NE(errorOf(NormSpec(NormKind::Rms, 2048, ir::DType::I32).verify()).find("bf16, f16 or f32"), std::string::npos);
  EXPECT_NE(errorOf(NormSpec(NormKind::Rms, 2048, ir::DType::BF16, NormFusion::None, 100).verify()).find("whole warps"),
            std::string::npos);
  EXPECT_NE(errorOf(NormSpec(NormKind::Rms, 65536, ir::DType::BF16, NormFusion::None, 256).verify())
                .find("needs more than 256 threads"),
            std::string::npos);
  EXPECT_NE(errorOf(RopeSpec(4, 63, RopeStyle::Half).verify()).find("even"), std::string::npos);
  EXPECT_NE(errorOf(KvWriteSpec(4, 63, RopeStyle::Half).verify()).find("even"), std::string::npos);
  EXPECT_EQ(errorOf(KvWriteSpec(4, 63).verify()), "");
  EXPECT_NE(errorOf(SampleSpec(1).verify()).find("vocab"), std::string::npos);
  EXPECT_NE(errorOf(ArgmaxSpec(32000, 48).verify()).find("whole warps"), std::string::npos);
  EXPECT_NE(errorOf(EmbeddingSpec(0, ir::DType::BF16).verify()).find("positive"), std::string::npos);
}

TEST(RowOpsSpec, JsonHoldsEveryField) {
  llvm::json::Object o = NormSpec(NormKind::Layer, 768, ir::DType::F16, NormFusion::ResidualAdd).toJSON();
  EXPECT_EQ(o.getString("family").getValueOr("<missing>"), "norm");
  EXPECT_EQ(o.getString("kind").getValueOr("<missing>"), "layer");
  EXPECT_EQ(o.getInteger("dim").getValueOr(-1), 768);
  EXPECT_EQ(o.getString("weight").getValueOr("<missing>"), "f16");
  EXPECT_EQ(o.getString("fusion").getValueOr("<missing>"), "residual_add");
  EXPECT_EQ(o.getInteger("threads").getValueOr(-1), 96);
  llvm::json::Object kv = KvWriteSpec(8, 128, RopeStyle::Interleaved).toJSON();
  EXPECT_EQ(kv.getString("rope").getValueOr("<missing>"), "interleaved");
  EXPECT_TRUE(KvWriteSpec(8, 128).toJSON().get("rope")->getAsNull());
  EXPECT_EQ(PointwiseSpec(PointwiseOp::GeluErf, 64).toJSON().getString("op").getValueOr("<missing>"), "gelu_erf");
}

TEST(RowOpsSpec, EveryPointwiseIrOpHasAKernel) {
  std::set<ir::OpKind> pointwise = {ir::OpKind::Add,  ir::OpKind::Mul,  ir::OpKind::Scale, ir::OpKind::GeluTanh,
                                    ir::OpKind::GeluErf, ir::OpKind::Silu, ir::OpKind::Relu};
#define OP(Id, ...)                                                                                          \
  EXPECT_EQ(pointwiseOpOf(ir::OpKind::Id).has_value(), pointwise.count(ir::OpKind::Id) == 1) << #Id;
#include "ir/Ops.def"
  EXPECT_TRUE(isBinary(*pointwiseOpOf(ir::OpKind::Mul)));
  EXPECT_FALSE(isBinary(*pointwiseOpOf(ir::OpKind::Scale)));
}

// ---- the host sampling reference ------------------------------------------------------------------------

std::vector<uint16_t> bf16Row(const std::vector<float> &v) {
  std::vector<uint16_t> out;
  for (float x : v) out.push_back(floatToBf16(x));
  return out;
}

TEST(SampleReference, RandomBitsAreSplitmix64OfSeedStepRow) {
  // Independently computed (Python) from the formula in templates/sampling.cuh.
  EXPECT_EQ(sampleRandomBits(0, 0, 0), 0x238275bc38fcbe91ull);
  EXPECT_EQ(sampleRandomBits(42, 7, 3), 0xf55e4254d4655539ull);
  EXPECT_EQ(sampleRandomBits(0xDEADBEEF, 123456789, 65535), 0x78f8e8ca98887d17ull);
}

TEST(SampleReference, GreedyCasesTakeTheLowestIndexOfTheMax) {
  std::vector<uint16_t> row = bf16Row({1, 5, -2, 5, 0, 5});
  SampleSettings p;
  p.temperature = 0;
  EXPECT_EQ(sampleReference(row, p, 0).token, 1);
  p.temperature = 1;
  p.topK = 1; // exactly one candidate: the first 5, even though three tie
  for (uint64_t r = 0; r < 20; ++r) EXPECT_EQ(sampleReference(row, p, r).token, 1);
  // NaN is skipped; a row with nothing above -inf gives 0.
  std::vector<uint16_t> nan = {0x7FC0, floatToBf16(2), 0xFFC0, floatToBf16(3)};
  p.topK = 0;
  p.temperature = 0;
  EXPECT_EQ(sampleReference(nan, p, 0).token, 3);
  std::vector<uint16_t> none = {0xFF80, 0xFF80, 0x7FC0};
  EXPECT_EQ(sampleReference(none, p, 0).token, 0);
  p.temperature = 1;
  EXPECT_EQ(sampleReference(none, p, 0).token, 0);
}

TEST(SampleReference, TopKKeepsExactlyKWithTiesBrokenByIndex) {
  // Values 3 (x3 at 0, 2, 5), 2, 1: top-2 keeps indices 0 and 2 only, each with half the mass.
  std::vector<uint16_t> row = bf16Row({3, 2, 3, 1, 2, 3});
  SampleSettings p;
  p.topK = 2;
  std::vector<double> prob = sampleDistribution(row, p);
  EXPECT_DOUBLE_EQ(prob[0], 0.5);
  EXPECT_DOUBLE_EQ(prob[2], 0.5);
  EXPECT_EQ(prob[5], 0.0);
  p.topK = 4; // all three 3s and the first 2
  prob = sampleDistribution(row, p);
  double e = std::exp(-1.0);
  EXPECT_NEAR(prob[0], 1 / (3 + e), 1e-7);
  EXPECT_NEAR(prob[1], e / (3 + e), 1e-7);
  EXPECT_EQ(prob[4], 0.0);
}

TEST(SampleReference, TopPKeepsTheShortestPrefixReachingP) {
  // Probabilities ∝ e^0, e^-1, e^-2, e^-3 ≈ 0.644, 0.237, 0.087, 0.032.
  std::vector<uint16_t> row = bf16Row({0, -1, -2, -3});
  SampleSettings p;
  p.topP = 0.85f; // 0.644 < 0.85 <= 0.881: the first two
  std::vector<double> prob = sampleDistribution(row, p);
  EXPECT_GT(prob[0], 0);
  EXPECT_GT(prob[1], 0);
  EXPECT_EQ(prob[2], 0);
  EXPECT_NEAR(prob[0], 1 / (1 + std::exp(-1.0)), 1e-7);
  p.topP = 0.5f; // the top token alone
  prob = sampleDistribution(row, p);
  EXPECT_DOUBLE_EQ(prob[0], 1.0);
  p.topP = 1.0f; // off
  EXPECT_GT(sampleDistribution(row, p)[3], 0);
  // Temperature sharpens before the cut: at T = 0.5 the top token alone has 0.865.
  p.temperature = 0.5f;
  p.topP = 0.85f;
  EXPECT_DOUBLE_EQ(sampleDistribution(row, p)[0], 1.0);
}

TEST(SampleReference, DrawsFollowTheDistribution) {
  // The draw step alone, on the host: 40000 rows of the same logits against the exact probabilities.
  std::vector<uint16_t> row = test::randomBf16Bits(64, 3, 1.0f);
  SampleSettings p;
  p.temperature = 0.8f;
  p.topK = 20;
  p.topP = 0.9f;
  p.seed = 11;
  std::vector<double> prob = sampleDistribution(row, p);
  const int n = 40000;
  std::vector<int> count(row.size());
  for (int r = 0; r < n; ++r) ++count[sampleReference(row, p, r).token];
  double chi2 = 0;
  int cells = 0;
  for (size_t i = 0; i < row.size(); ++i) {
    if (prob[i] == 0) {
      EXPECT_EQ(count[i], 0) << "token " << i << " is outside the kept set";
      continue;
    }
    double expect = prob[i] * n;
    chi2 += (count[i] - expect) * (count[i] - expect) / expect;
    ++cells;
  }
  // Chi-square with cells - 1 degrees of freedom: mean cells - 1, sd sqrt(2 (cells - 1)); 6 sd is loose.
  EXPECT_GT(cells, 1);
  EXPECT_LT(chi2, cells - 1 + 6 * std::sqrt(2.0 * (cells - 1))) << cells << " cells";
}

TEST(SampleReference, SameSeedSameTokenOtherSeedOtherTokens) {
  std::vector<uint16_t> row = test::randomBf16Bits(32000, 5, 2.f);
  SampleSettings p;
  p.seed = 1;
  p.step = 9;
  std::vector<int32_t> a, b, c;
  for (uint64_t r = 0; r < 16; ++r) {
    a.push_back(sampleReference(row, p, r).token);
    b.push_back(sampleReference(row, p, r).token);
  }
  p.seed = 2;
  for (uint64_t r = 0; r < 16; ++r) c.push_back(sampleReference(row, p, r).token);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

// ---- every template compiles under NVRTC ----------------------------------------------------------------

const int64_t kDims[] = {64, 768, 896, 2048, 4096};
const int64_t kVocabs[] = {321, 32000, 151936};
const ir::DType kWeights[] = {ir::DType::BF16, ir::DType::F16, ir::DType::F32};

// Every row-op spec of the sweep.
std::vector<std::unique_ptr<KernelSpec>> sweep() {
  std::vector<std::unique_ptr<KernelSpec>> s;
  for (int64_t d : kDims) {
    for (ir::DType w : kWeights) {
      for (NormKind k : {NormKind::Rms, NormKind::Layer})
        for (NormFusion f : {NormFusion::None, NormFusion::ResidualAdd}) s.push_back(std::make_unique<NormSpec>(k, d, w, f));
      s.push_back(std::make_unique<EmbeddingSpec>(d, w));
    }
    for (PointwiseOp op : {PointwiseOp::Scale, PointwiseOp::GeluTanh, PointwiseOp::GeluErf, PointwiseOp::Silu,
                           PointwiseOp::Relu, PointwiseOp::Add, PointwiseOp::Mul, PointwiseOp::SiluMul})
      s.push_back(std::make_unique<PointwiseSpec>(op, d));
  }
  // Odd widths take the narrow-access paths.
  s.push_back(std::make_unique<NormSpec>(NormKind::Layer, 100, ir::DType::F32));
  s.push_back(std::make_unique<EmbeddingSpec>(50, ir::DType::F16));
  s.push_back(std::make_unique<PointwiseSpec>(PointwiseOp::GeluErf, 321));
  // (heads, head_dim) of Llama-2-7B q, TinyLlama k, Qwen2.5-0.5B q and k, GPT-J-like 64 / odd pairs.
  for (auto [h, hd] : std::vector<std::pair<int64_t, int64_t>>{{32, 128}, {4, 64}, {14, 64}, {2, 64}, {16, 256}, {3, 6}})
    for (RopeStyle st : {RopeStyle::Half, RopeStyle::Interleaved}) {
      s.push_back(std::make_unique<RopeSpec>(h, hd, st));
      s.push_back(std::make_unique<KvWriteSpec>(h, hd, st));
    }
  for (auto [h, hd] : std::vector<std::pair<int64_t, int64_t>>{{32, 128}, {4, 64}, {2, 64}, {3, 6}})
    s.push_back(std::make_unique<KvWriteSpec>(h, hd));
  for (int64_t v : kVocabs) {
    s.push_back(std::make_unique<ArgmaxSpec>(v));
    s.push_back(std::make_unique<SampleSpec>(v));
  }
  return s;
}

// Compiles every entry of `specs` from `header` in one NVRTC program (one parse of CUDA's headers instead
// of one per kernel); a failure carries NVRTC's log, which names the instantiation.
std::string compileTogether(const std::string &header, const std::vector<const KernelSpec *> &specs, const Target &t) {
  auto options = nvrtcOptions(t, {});
  if (!options) return llvm::toString(options.takeError());
  std::vector<const char *> opts;
  for (const std::string &o : *options) opts.push_back(o.c_str());
  std::vector<const char *> names, texts;
  for (const EmbeddedHeader &h : templateHeaders()) {
    names.push_back(h.name);
    texts.push_back(h.text);
  }
  std::string src = "#include \"" + header + "\"\n";
  nvrtcProgram prog = nullptr;
  if (nvrtcCreateProgram(&prog, src.c_str(), (header + "_sweep.cu").c_str(), int(names.size()), texts.data(),
                         names.data()) != NVRTC_SUCCESS)
    return "nvrtcCreateProgram failed";
  for (const KernelSpec *s : specs) nvrtcAddNameExpression(prog, s->entry().c_str());
  std::string problem;
  if (nvrtcCompileProgram(prog, int(opts.size()), opts.data()) != NVRTC_SUCCESS) {
    size_t n = 0;
    nvrtcGetProgramLogSize(prog, &n);
    std::string log(n, '\0');
    nvrtcGetProgramLog(prog, log.data());
    problem = header + " for " + t.name + ":\n" + log;
  } else {
    for (const KernelSpec *s : specs) {
      const char *lowered = nullptr;
      if (nvrtcGetLoweredName(prog, s->entry().c_str(), &lowered) != NVRTC_SUCCESS || !lowered)
        problem += "no lowered name for " + s->name() + " (" + s->entry() + ")\n";
    }
  }
  nvrtcDestroyProgram(&prog);
  return problem;
}

class RowOpsCompile : public ::testing::TestWithParam<const char *> {};

TEST_P(RowOpsCompile, EveryTemplateOfTheSweepCompiles) {
  auto target = parseTarget(GetParam());
  ASSERT_TRUE(bool(target)) << llvm::toString(target.takeError());
  std::vector<std::unique_ptr<KernelSpec>> specs = sweep();
  std::map<std::string, std::vector<const KernelSpec *>> byHeader;
  std::set<std::string> seen;
  for (const auto &s : specs) {
    EXPECT_TRUE(seen.insert(s->name()).second) << "two specs named " << s->name();
    byHeader[s->header()].push_back(s.get());
  }
  // The sampling kernels are large (seconds each); argmax and sample of each vocab share one program too.
  for (const auto &[header, group] : byHeader) EXPECT_EQ(compileTogether(header, group, *target), "") << header;
}

TEST_P(RowOpsCompile, OneOfEachFamilyCompilesThroughCompileKernel) {
  auto target = parseTarget(GetParam());
  ASSERT_TRUE(bool(target)) << llvm::toString(target.takeError());
  std::vector<std::unique_ptr<KernelSpec>> specs;
  specs.push_back(std::make_unique<NormSpec>(NormKind::Layer, 768, ir::DType::F16, NormFusion::ResidualAdd));
  specs.push_back(std::make_unique<EmbeddingSpec>(896, ir::DType::F32));
  specs.push_back(std::make_unique<PointwiseSpec>(PointwiseOp::Scale, 2048));
  specs.push_back(std::make_unique<RopeSpec>(14, 64, RopeStyle::Half));
  specs.push_back(std::make_unique<KvWriteSpec>(2, 64, RopeStyle::Interleaved));
  specs.push_back(std::make_unique<ArgmaxSpec>(321));
  specs.push_back(std::make_unique<SampleSpec>(321));
  for (const auto &s : specs) {
    auto c = compileKernel(kernelSource(*s), *target);
    ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
    EXPECT_FALSE(c->cubin.empty()) << s->name();
    EXPECT_EQ(cubinSmVersion(c->cubin), target->smVersion()) << s->name();
    EXPECT_NE(c->loweredName.find("_ZN6minfer"), std::string::npos) << s->name() << ": " << c->loweredName;
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, RowOpsCompile, ::testing::Values("sm_80", "sm_89", "sm_90"),
                         [](const auto &info) { return std::string(info.param); });

} // namespace
