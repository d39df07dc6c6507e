// tests/unit/HalfConversionTest.cpp — bf16 and f16 conversions (io/Safetensors.h) against values
// known independently: bit patterns from the formats' definitions, a formula over every f16 pattern, a
// nearest-value search, and the compiler's own _Float16.
#include "io/Safetensors.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

using namespace minfer;

namespace {

// ---- scalar conversions, against bit patterns known from the formats' definitions -----------------------

float pow2(int e) { return std::ldexp(1.0f, e); }
uint32_t bitsOf(float f) { return std::bit_cast<uint32_t>(f); }
constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(HalfConversions, Bf16DecodesKnownBitPatterns) {
  const std::pair<uint16_t, float> known[] = {
      {0x3F80, 1.0f}, {0xC000, -2.0f}, {0x3E80, 0.25f}, {0x4049, 3.140625f}, {0x7F80, kInf}, {0xFF80, -kInf},
      {0x0001, pow2(-133)}, // smallest bf16 subnormal: 2^-126 × 2^-7
  };
  for (auto [bits, value] : known)
    EXPECT_EQ(bf16ToFloat(bits), value) << std::hex << bits;
  EXPECT_TRUE(std::isnan(bf16ToFloat(0x7FC0)));
  EXPECT_EQ(bitsOf(bf16ToFloat(0x8000)), 0x80000000u); // -0
}

TEST(HalfConversions, Bf16RoundsToNearestTiesToEvenAndKeepsNan) {
  const std::pair<float, uint16_t> known[] = {
      {1.0f, 0x3F80}, {-1.0f, 0xBF80}, {kInf, 0x7F80},
      {1.0f + pow2(-8), 0x3F80},             // halfway 0x3F80 / 0x3F81: to even
      {1.0f + 3 * pow2(-8), 0x3F82},         // halfway 0x3F81 / 0x3F82: to even
      {1.0f + pow2(-8) + pow2(-20), 0x3F81}, // just above halfway
      {1.0f + pow2(-8) - pow2(-20), 0x3F80}, // just below halfway
      {std::numeric_limits<float>::max(), 0x7F80}, // rounds up to inf
  };
  for (auto [value, bits] : known)
    EXPECT_EQ(floatToBf16(value), bits) << value;
  for (uint32_t nan : {0x7FC00000u, 0x7F800001u, 0xFF800001u, 0x7FFFFFFFu}) {
    uint16_t b = floatToBf16(std::bit_cast<float>(nan));
    EXPECT_EQ(b & 0x7F80, 0x7F80) << std::hex << nan;
    EXPECT_NE(b & 0x007F, 0) << std::hex << nan;
    EXPECT_EQ(b & 0x8000, (nan >> 16) & 0x8000) << "sign kept";
  }
}

TEST(HalfConversions, Bf16MatchesNearestCandidateSearch) {
  // Reference: of the two bf16 values around x, take the nearer (in double), ties to the even one.
  std::mt19937 rng(1234);
  for (int i = 0; i < 200000; ++i) {
    uint32_t bits = uint32_t(rng());
    if (i % 4 == 3) bits = (bits & 0xFFFF0000u) | 0x8000u; // exactly halfway between two bf16 values
    float x = std::bit_cast<float>(bits);
    if (!std::isfinite(x)) continue;
    uint16_t lo = uint16_t(bitsOf(x) >> 16), hi = uint16_t(lo + 1);
    double dlo = std::fabs(double(x) - double(std::bit_cast<float>(uint32_t(lo) << 16)));
    double vhi = (hi & 0x7FFF) == 0x7F80 ? std::copysign(std::ldexp(1.0, 128), x) // inf counts as 2^128
                                         : double(std::bit_cast<float>(uint32_t(hi) << 16));
    double dhi = std::fabs(double(x) - vhi);
    uint16_t want = dlo < dhi ? lo : dhi < dlo ? hi : (lo & 1 ? hi : lo);
    ASSERT_EQ(floatToBf16(x), want) << "x bits " << std::hex << bitsOf(x);
  }
}

TEST(HalfConversions, F16DecodesKnownBitPatterns) {
  const std::pair<uint16_t, float> known[] = {
      {0x3C00, 1.0f}, {0xC000, -2.0f}, {0x3555, 0.333251953125f}, {0x7C00, kInf}, {0xFC00, -kInf},
      {0x7BFF, 65504.0f},       // largest finite
      {0x0400, pow2(-14)},      // smallest normal
      {0x0001, pow2(-24)},      // smallest subnormal
      {0x03FF, 1023 * pow2(-24)}, // largest subnormal
      {0x8001, -pow2(-24)},
  };
  for (auto [bits, value] : known)
    EXPECT_EQ(f16ToFloat(bits), value) << std::hex << bits;
  EXPECT_EQ(bitsOf(f16ToFloat(0x8000)), 0x80000000u); // -0
  EXPECT_TRUE(std::isnan(f16ToFloat(0x7E00)));
  EXPECT_TRUE(std::isnan(f16ToFloat(0x7C01)));
}

TEST(HalfConversions, F16DecodesEveryPatternPerTheFormulaAndRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    int exp = (h >> 10) & 31, man = h & 1023;
    double mag = exp == 0 ? std::ldexp(man, -24) : std::ldexp(1024 + man, exp - 25);
    float got = f16ToFloat(uint16_t(h));
    if (exp == 31) {
      EXPECT_TRUE(man ? std::isnan(got) : std::isinf(got)) << std::hex << h;
      continue;
    }
    ASSERT_EQ(double(got), (h & 0x8000) ? -mag : mag) << std::hex << h;
    ASSERT_EQ(std::signbit(got), bool(h & 0x8000)) << std::hex << h;
    ASSERT_EQ(floatToF16(got), h) << "every finite half survives a round trip; " << std::hex << h;
  }
}

TEST(HalfConversions, F16EncodesRoundingToNearestTiesToEven) {
  const std::pair<float, uint16_t> known[] = {
      {1.0f, 0x3C00}, {-2.0f, 0xC000}, {65504.0f, 0x7BFF}, {pow2(-14), 0x0400}, {pow2(-24), 0x0001},
      {1.0f + pow2(-11), 0x3C00},             // halfway: to even
      {1.0f + 3 * pow2(-11), 0x3C02},         // halfway: to even
      {1.0f + pow2(-11) + pow2(-20), 0x3C01}, // above halfway
      {65519.0f, 0x7BFF}, {65520.0f, 0x7C00}, // either side of the midpoint to inf (inf is "even")
      {1e6f, 0x7C00}, {-1e6f, 0xFC00}, {kInf, 0x7C00}, {-kInf, 0xFC00},
      {pow2(-25), 0x0000},                    // halfway 0 / 2^-24: to even (0)
      {1.5f * pow2(-25), 0x0001},
      {3 * pow2(-25), 0x0002},                // halfway 1 / 2 units of 2^-24: to even
      {5 * pow2(-25), 0x0002},                // halfway 2 / 3 units: to even
      {1023.5f * pow2(-24), 0x0400},          // largest subnormal rounds up into the normals
      {1e-10f, 0x0000}, {-1e-10f, 0x8000}, {1e-40f, 0x0000}, // the last a float subnormal
  };
  for (auto [value, bits] : known)
    EXPECT_EQ(floatToF16(value), bits) << value;
  for (uint32_t nan : {0x7FC00000u, 0x7F800001u, 0xFFC00000u}) {
    uint16_t h = floatToF16(std::bit_cast<float>(nan));
    EXPECT_EQ(h & 0x7C00, 0x7C00);
    EXPECT_NE(h & 0x03FF, 0);
    EXPECT_EQ(h & 0x8000, (nan >> 16) & 0x8000);
  }
}

#ifdef __FLT16_MAX__
TEST(HalfConversions, F16EncodingMatchesCompilerFloat16) {
  // The compiler's _Float16 conversion (IEEE round-to-nearest-even) is an independent reference.
  std::mt19937 rng(99);
  for (int i = 0; i < 400000; ++i) {
    // Every other sample has an exponent near f16's range (2^-27 .. 2^20), where rounding matters most;
    // every fourth is an exact tie.
    uint32_t bits = uint32_t(rng());
    if (i % 2) bits = (bits & 0x807FFFFFu) | ((100 + bits % 48) << 23);
    float x = std::bit_cast<float>(bits);
    if (i % 4 == 3) { // exactly halfway between two adjacent finite halves (exact in float)
      uint16_t h = uint16_t(bits % 0x7BFF) | uint16_t(bits >> 31 << 15);
      x = (float(std::bit_cast<_Float16>(h)) + float(std::bit_cast<_Float16>(uint16_t(h + 1)))) / 2;
      bits = bitsOf(x);
    }
    if (std::isnan(x)) continue;
    ASSERT_EQ(floatToF16(x), std::bit_cast<uint16_t>(static_cast<_Float16>(x))) << std::hex << bits;
  }
}
#endif

} // namespace
