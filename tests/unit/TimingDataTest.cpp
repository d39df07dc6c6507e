// Tests of the data the benchmarks and the autotuner time kernels on (runtime/Timing.h): timing::randomElements,
// the generator behind timing::filled and the engine's synthetic weights, and timing::rowSquarePartial. No GPU.
#include "io/Safetensors.h"
#include "runtime/Timing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <string>

namespace minfer {
namespace {

std::vector<float> asFloats(const std::vector<uint8_t> &bytes, ir::DType type) {
  const size_t elementBytes = type == ir::DType::F32 ? 4 : 2;
  std::vector<float> out(bytes.size() / elementBytes);
  for (size_t i = 0; i < out.size(); ++i) {
    if (type == ir::DType::F32) {
      std::memcpy(&out[i], bytes.data() + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      out[i] = type == ir::DType::F16 ? f16ToFloat(h) : bf16ToFloat(h);
    }
  }
  return out;
}

// Uniform in [-halfRange, halfRange): every value inside (bf16 rounding can reach halfRange itself), mean ~0,
// mean square ~halfRange^2 / 3, both signs, far from constant; bf16 and f16 values are the f32 ones rounded
// (io/Safetensors.h's conversions).
TEST(TimingData, RandomElementsAreUniformInTheirRangeAndNotAPattern) {
  const size_t n = 1 << 16;
  for (ir::DType type : {ir::DType::BF16, ir::DType::F16, ir::DType::F32}) {
    SCOPED_TRACE(std::string(ir::dtypeName(type)));
    std::vector<float> v = asFloats(timing::randomElements(n, type, 0.25f, 7), type);
    ASSERT_EQ(v.size(), n);
    double sum = 0, squares = 0;
    size_t negative = 0, outside = 0;
    for (float x : v) {
      sum += x;
      squares += double(x) * x;
      negative += x < 0;
      outside += !(std::abs(x) <= 0.25f);
    }
    EXPECT_EQ(outside, 0u);
    EXPECT_NEAR(sum / n, 0.0, 0.005);
    EXPECT_NEAR(squares / n, 0.25 * 0.25 / 3, 0.001);
    EXPECT_NEAR(double(negative) / n, 0.5, 0.01);
    std::set<float> distinct(v.begin(), v.end());
    EXPECT_GT(distinct.size(), type == ir::DType::F32 ? n / 2 : 1000u) << "distinct values of " << n;
  }
  std::vector<float> f32 = asFloats(timing::randomElements(1000, ir::DType::F32, 0.25f, 7), ir::DType::F32);
  std::vector<float> b16 = asFloats(timing::randomElements(1000, ir::DType::BF16, 0.25f, 7), ir::DType::BF16);
  std::vector<float> f16 = asFloats(timing::randomElements(1000, ir::DType::F16, 0.25f, 7), ir::DType::F16);
  for (size_t i = 0; i < f32.size(); ++i) {
    ASSERT_EQ(b16[i], bf16ToFloat(floatToBf16(f32[i]))) << i;
    ASSERT_EQ(f16[i], f16ToFloat(floatToF16(f32[i]))) << i;
  }
}

TEST(TimingData, RandomElementsAreTheSameForASeedAndDifferAcrossSeeds) {
  const ir::DType bf16 = ir::DType::BF16, f32 = ir::DType::F32;
  EXPECT_EQ(timing::randomElements(4096, bf16, 0.035f, 11), timing::randomElements(4096, bf16, 0.035f, 11));
  EXPECT_NE(timing::randomElements(4096, bf16, 0.035f, 11), timing::randomElements(4096, bf16, 0.035f, 12));
  std::vector<float> small = asFloats(timing::randomElements(4096, f32, 0.035f, 11), f32);
  EXPECT_LE(*std::max_element(small.begin(), small.end(), [](float a, float b) { return std::abs(a) < std::abs(b); }),
            0.035f);
}

// A folded norm over K columns sums `parts` partials and takes 1 / sqrt(sum / K): with the partials filled with
// rowSquarePartial, that is 1 / rms of filled()'s rows (uniform +-0.25: rms 0.144).
TEST(TimingData, RowSquarePartialsGiveTheRmsOfTheFilledRows) {
  for (int64_t k : {2048, 4096, 11008})
    for (int parts : {1, 8}) {
      const double total = double(timing::rowSquarePartial(k, parts)) * parts;
      EXPECT_NEAR(std::sqrt(total / double(k)), 0.25 / std::sqrt(3.0), 1e-6) << "K " << k << ", " << parts << " parts";
    }
}

} // namespace
} // namespace minfer
