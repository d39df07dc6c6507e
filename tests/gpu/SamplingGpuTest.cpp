// tests/gpu/SamplingGpuTest.cpp — argmax and sampling on a GPU (CTest label `gpu`; each test skips without
// one): exact tokens for argmax (with deliberate ties and NaNs); for sampling, greedy cases, determinism,
// bit-exact agreement with the host copy of the algorithm (compiler/kernels/RowOps.cpp sampleReference)
// and a chi-square test of many draws against the exact distribution.
#include "GpuHarness.h"
#include "common/RandomBf16.h"

#include "compiler/kernels/RowOps.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

using namespace minfer;
using gputest::run;

namespace {

const int64_t kRows[] = {1, 7, 64, 300};

// The vocabularies the argmax and sample kernels run at: the GPT-2 fixture's odd 321, Llama's 32000 and
// Qwen2's 151936.
const int64_t kVocabs[] = {321, 32000, 151936};

// For each vocabulary v of kVocabs, under a trace naming the spec: builds Spec(v) and calls
// body(v, spec, kernel, rng) with `rng` seeded v + seedOffset. A fatal failure ends the test there.
template <typename Spec, typename Body> void forEachVocab(unsigned seedOffset, Body body) {
  for (int64_t v : kVocabs) {
    Spec spec(v);
    SCOPED_TRACE(spec.name());
    GPU_TRY(kernel, gputest::buildKernel(spec));
    std::mt19937 rng(v + seedOffset);
    body(v, spec, kernel, rng);
    if (testing::Test::HasFatalFailure()) return;
  }
}

// ---- argmax -------------------------------------------------------------------------------------------

int32_t hostArgmax(const uint16_t *row, int64_t v) {
  int32_t best = -1;
  float bestV = -INFINITY;
  for (int64_t i = 0; i < v; ++i)
    if (float x = bf16ToFloat(row[i]); x > bestV) bestV = x, best = int32_t(i);
  return best < 0 ? 0 : best;
}

// Random logits [rows, v], N(0, 3), bf16: ties among the largest happen by themselves at large vocabularies.
std::vector<uint16_t> randomLogits(int64_t rows, int64_t v, std::mt19937 &rng, float stddev = 3.f) {
  return test::randomBf16Bits(size_t(rows * v), rng, stddev);
}

// Rows with planted features: a tie for the max (the lower index must win), the max at the end and at
// the start, NaNs (skipped), all equal (0), all -inf (0).
void plantSpecialRows(std::vector<uint16_t> &logits, int64_t rows, int64_t v, std::mt19937 &rng) {
  std::uniform_int_distribution<int64_t> col(0, v - 1);
  const uint16_t big = floatToBf16(100.f), nan = 0x7FC0, negInf = 0xFF80;
  for (int64_t r = 0; r < rows; ++r) {
    uint16_t *row = logits.data() + r * v;
    switch (r % 8) {
    case 0: { // tie between two random columns
      int64_t a = col(rng), b = col(rng);
      row[a] = row[b] = big;
      break;
    }
    case 1: row[v - 1] = big; break;
    case 2: row[0] = big; break;
    case 3: // NaNs everywhere above the max: must be skipped
      for (int64_t i = 0; i < v; i += 3) row[i] = nan;
      break;
    case 4:
      if (r >= 8) std::fill(row, row + v, floatToBf16(0.5f)); // all equal
      break;
    case 5:
      if (r >= 8) std::fill(row, row + v, negInf);
      break;
    case 6: { // -0 ahead of +0 at the max: equal, the first wins
      std::fill(row, row + v, floatToBf16(-1.f));
      int64_t a = col(rng) / 2;
      row[a] = 0x8000;
      row[a + v / 2] = 0x0000;
      break;
    }
    default: break;
    }
  }
}

TEST(ArgmaxKernel, MatchesHostArgmaxExactly) {
  MINFER_REQUIRE_GPU();
  forEachVocab<ArgmaxSpec>(0, [](int64_t v, const ArgmaxSpec &spec, const gputest::GpuKernel &kernel,
                                 std::mt19937 &rng) {
    for (int64_t rows : kRows) {
      std::vector<uint16_t> logits = randomLogits(rows, v, rng);
      plantSpecialRows(logits, rows, v, rng);
      GPU_TRY(lBuf, gputest::uploadVector(logits));
      GPU_TRY(oBuf, gputest::uploadVector(std::vector<int32_t>(rows, -7)));
      MINFER_ASSERT_OK(run(kernel, spec, rows, ArgmaxParams{.logits = lBuf.ptr(), .out = oBuf.ptr(), .rows = int(rows)}));
      std::vector<int32_t> got(rows);
      MINFER_ASSERT_OK(oBuf.download(got.data(), rows * 4));
      for (int64_t r = 0; r < rows; ++r)
        EXPECT_EQ(got[r], hostArgmax(logits.data() + r * v, v)) << "rows=" << rows << " row " << r << " (kind " << r % 8 << ")";
    }
  });
}

// ---- sampling -----------------------------------------------------------------------------------------

// Runs the sample kernel over `logits` [rows, v]; the drawn tokens.
llvm::Expected<std::vector<int32_t>> sampleOnGpu(const gputest::GpuKernel &kernel, const SampleSpec &spec,
                                                 const std::vector<uint16_t> &logits, int64_t rows,
                                                 const SampleSettings &p) {
  auto lBuf = gputest::uploadVector(logits);
  if (!lBuf) return lBuf.takeError();
  auto oBuf = gputest::uploadVector(std::vector<int32_t>(rows, -7));
  if (!oBuf) return oBuf.takeError();
  SampleParams params{.logits = lBuf->ptr(), .out = oBuf->ptr(), .rows = int(rows), .temperature = p.temperature,
                      .top_k = p.topK, .top_p = p.topP, .seed = p.seed, .step = p.step};
  if (auto e = run(kernel, spec, rows, params)) return e;
  std::vector<int32_t> out(rows);
  if (auto e = oBuf->download(out.data(), rows * 4)) return e;
  return out;
}

std::string paramsStr(const SampleSettings &p) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "T=%g top_k=%d top_p=%g seed=%llu step=%llu", p.temperature, p.topK, p.topP,
                (unsigned long long)p.seed, (unsigned long long)p.step);
  return buf;
}

TEST(SampleKernel, GreedyCasesEqualArgmax) {
  MINFER_REQUIRE_GPU();
  forEachVocab<SampleSpec>(1, [](int64_t v, const SampleSpec &spec, const gputest::GpuKernel &kernel,
                                 std::mt19937 &rng) {
    const int64_t rows = 64;
    std::vector<uint16_t> logits = randomLogits(rows, v, rng);
    plantSpecialRows(logits, rows, v, rng);
    for (auto [t, k] : std::vector<std::pair<float, int>>{{0.f, 0}, {-1.f, 50}, {1.f, 1}, {0.7f, 1}}) {
      SampleSettings p;
      p.temperature = t;
      p.topK = k;
      p.topP = 0.9f;
      p.seed = 5;
      GPU_TRY(got, sampleOnGpu(kernel, spec, logits, rows, p));
      for (int64_t r = 0; r < rows; ++r)
        EXPECT_EQ(got[r], hostArgmax(logits.data() + r * v, v)) << paramsStr(p) << " row " << r;
    }
  });
}

TEST(SampleKernel, SameSeedSameTokensOtherSeedOtherTokens) {
  MINFER_REQUIRE_GPU();
  const int64_t v = 32000, rows = 64;
  SampleSpec spec(v);
  GPU_TRY(kernel, gputest::buildKernel(spec));
  std::mt19937 rng(2);
  std::vector<uint16_t> logits = randomLogits(rows, v, rng, 1.f);
  SampleSettings p;
  p.seed = 1234;
  p.step = 17;
  GPU_TRY(a, sampleOnGpu(kernel, spec, logits, rows, p));
  GPU_TRY(b, sampleOnGpu(kernel, spec, logits, rows, p));
  EXPECT_EQ(a, b);
  p.seed = 1235;
  GPU_TRY(c, sampleOnGpu(kernel, spec, logits, rows, p));
  p.seed = 1234;
  p.step = 18;
  GPU_TRY(d, sampleOnGpu(kernel, spec, logits, rows, p));
  // 64 draws from a spread-out distribution over 32000 tokens: equal only by a bug.
  int sameSeed = 0, sameStep = 0;
  for (int64_t r = 0; r < rows; ++r) sameSeed += a[r] == c[r], sameStep += a[r] == d[r];
  EXPECT_LT(sameSeed, 8) << "another seed gave mostly the same tokens";
  EXPECT_LT(sameStep, 8) << "another step gave mostly the same tokens";
}

// Logits with structure: random N(0, s), coarse (many exact ties, to exercise the tie rules), with NaN and
// -inf sprinkled in.
std::vector<uint16_t> varietyLogits(int64_t rows, int64_t v, std::mt19937 &rng) {
  std::vector<uint16_t> out = randomLogits(rows, v, rng, 2.f);
  std::uniform_int_distribution<int64_t> col(0, v - 1);
  for (int64_t r = 0; r < rows; ++r) {
    uint16_t *row = out.data() + r * v;
    if (r % 4 == 1) // integers only: large tie groups at every value
      for (int64_t i = 0; i < v; ++i) row[i] = floatToBf16(std::round(bf16ToFloat(row[i])));
    if (r % 4 == 2)
      for (int i = 0; i < 5; ++i) row[col(rng)] = 0x7FC0, row[col(rng)] = 0xFF80;
    if (r % 4 == 3) // one dominant token
      row[col(rng)] = floatToBf16(12.f);
  }
  return out;
}

TEST(SampleKernel, ReproducesTheHostAlgorithmExactly) {
  MINFER_REQUIRE_GPU();
  const SampleSettings settings[] = {
      {1.0f, 0, 1.0f, 7, 0},      {0.7f, 50, 1.0f, 7, 1},   {1.0f, 0, 0.9f, 7, 2},    {0.8f, 40, 0.95f, 7, 3},
      {1.5f, 1000, 0.5f, 7, 4},   {100.f, 0, 0.99f, 7, 5},  {0.3f, 3, 1.0f, 7, 6},    {1.0f, 2000, 0.3f, 99, 7},
  };
  forEachVocab<SampleSpec>(2, [&](int64_t v, const SampleSpec &spec, const gputest::GpuKernel &kernel,
                                  std::mt19937 &rng) {
    const int64_t rows = v > 100000 ? 32 : 64;
    std::vector<uint16_t> logits = varietyLogits(rows, v, rng);
    int compared = 0, skipped = 0, skippedEqual = 0;
    for (const SampleSettings &p : settings) {
      GPU_TRY(got, sampleOnGpu(kernel, spec, logits, rows, p));
      for (int64_t r = 0; r < rows; ++r) {
        SampleOutcome want = sampleReference(llvm::ArrayRef<uint16_t>(logits.data() + r * v, v), p, uint64_t(r));
        // Device expf is within 2 ulp, so each weight within 2^-22 of the host's and every partial sum within
        // ~2.4e-7 of the mass: a boundary closer than 1e-6 may legitimately fall the other way. (A flat
        // distribution over 150k tokens gives each one only ~7e-6 of the mass, so some rows are skipped.)
        if (want.drawMargin < 1e-6 || want.topPMargin < 1e-6) {
          ++skipped;
          skippedEqual += got[r] == want.token;
          continue;
        }
        ++compared;
        EXPECT_EQ(got[r], want.token) << paramsStr(p) << " row " << r << " (kind " << r % 4 << ")";
      }
    }
    std::printf("%s: %d rows compared exactly, %d too close to a boundary to compare (%d of them equal anyway)\n",
                spec.name().c_str(), compared, skipped, skippedEqual);
    EXPECT_GT(compared, 3 * skipped) << "too few rows far enough from a boundary to compare";
  });
}

// Many rows of the same logits: the counts of each token against the exact distribution.
void expectFollowsDistribution(const gputest::GpuKernel &kernel, const SampleSpec &spec,
                               const std::vector<uint16_t> &row, const SampleSettings &p, int64_t rows) {
  std::vector<uint16_t> logits;
  for (int64_t r = 0; r < rows; ++r) logits.insert(logits.end(), row.begin(), row.end());
  GPU_TRY(got, sampleOnGpu(kernel, spec, logits, rows, p));
  std::vector<double> prob = sampleDistribution(row, p);
  std::vector<int64_t> count(row.size());
  for (int32_t t : got) {
    ASSERT_GE(t, 0);
    ASSERT_LT(t, int64_t(row.size()));
    ++count[t];
  }
  // Pool the cells expected below 5 draws into one (the chi-square approximation needs ~5 per cell).
  double chi2 = 0, restExpect = 0;
  int64_t restCount = 0, cells = 0, outside = 0;
  for (size_t i = 0; i < row.size(); ++i) {
    double e = prob[i] * rows;
    if (prob[i] == 0) {
      outside += count[i];
      continue;
    }
    if (e < 5) {
      restExpect += e;
      restCount += count[i];
      continue;
    }
    chi2 += (count[i] - e) * (count[i] - e) / e;
    ++cells;
  }
  if (restExpect > 0) {
    chi2 += (restCount - restExpect) * (restCount - restExpect) / restExpect;
    ++cells;
  }
  EXPECT_EQ(outside, 0) << paramsStr(p) << ": draws outside the kept set";
  double dof = std::max<int64_t>(cells - 1, 1);
  // Mean dof, standard deviation sqrt(2 dof): 6 standard deviations is a loose bound.
  EXPECT_LT(chi2, dof + 6 * std::sqrt(2 * dof)) << paramsStr(p) << ": " << cells << " cells";
  std::printf("%s %s: chi2 %.1f over %lld cells\n", spec.name().c_str(), paramsStr(p).c_str(), chi2, (long long)cells);
}

TEST(SampleKernel, DrawsFollowTheExactDistribution) {
  MINFER_REQUIRE_GPU();
  {
    SampleSpec spec(321);
    GPU_TRY(kernel, gputest::buildKernel(spec));
    std::mt19937 rng(9);
    std::vector<uint16_t> row = randomLogits(1, 321, rng, 1.5f);
    expectFollowsDistribution(kernel, spec, row, {1.0f, 0, 1.0f, 3, 0}, 40000);
    expectFollowsDistribution(kernel, spec, row, {0.8f, 20, 1.0f, 3, 1}, 40000);
    expectFollowsDistribution(kernel, spec, row, {1.2f, 0, 0.8f, 3, 2}, 40000);
    expectFollowsDistribution(kernel, spec, row, {0.9f, 50, 0.9f, 3, 3}, 40000);
  }
  {
    SampleSpec spec(32000);
    GPU_TRY(kernel, gputest::buildKernel(spec));
    std::mt19937 rng(10);
    std::vector<uint16_t> row = randomLogits(1, 32000, rng, 2.f);
    expectFollowsDistribution(kernel, spec, row, {0.7f, 30, 0.95f, 4, 0}, 8192);
  }
}

} // namespace
