// tests/unit/MemoryPlannerTest.cpp — arena placement: overlapping lifetimes never share bytes, disjoint
// ones reuse memory, and the arena stays near the peak of live bytes.
#include "compiler/MemoryPlanner.h"

#include <gtest/gtest.h>

#include <random>

using namespace minfer;

namespace {

void expectNoOverlap(const std::vector<LiveRange> &ranges, const ArenaLayout &l) {
  for (size_t a = 0; a < ranges.size(); ++a)
    for (size_t b = a + 1; b < ranges.size(); ++b) {
      bool liveTogether = !(ranges[a].last < ranges[b].first || ranges[b].last < ranges[a].first);
      bool share = l.offsetsPerRow[a] < l.offsetsPerRow[b] + ranges[b].bytesPerRow &&
                   l.offsetsPerRow[b] < l.offsetsPerRow[a] + ranges[a].bytesPerRow;
      EXPECT_FALSE(liveTogether && share) << "buffers " << a << " and " << b << " overlap";
    }
  for (size_t i = 0; i < ranges.size(); ++i) {
    EXPECT_EQ(l.offsetsPerRow[i] % 16, 0);
    EXPECT_LE(l.offsetsPerRow[i] + ranges[i].bytesPerRow, l.bytesPerRow);
  }
}

TEST(MemoryPlanner, ChainReusesTheBufferTwoStepsBack) {
  // x0 -> x1 -> x2 -> x3, each read only by the next launch: two slots suffice.
  std::vector<LiveRange> chain = {{4096, 0, 1}, {4096, 1, 2}, {4096, 2, 3}, {4096, 3, 4}};
  ArenaLayout l = planArena(chain);
  expectNoOverlap(chain, l);
  EXPECT_EQ(l.bytesPerRow, 2 * 4096);
  EXPECT_EQ(l.peakLiveBytesPerRow, 2 * 4096);
  EXPECT_EQ(l.offsetsPerRow[0], l.offsetsPerRow[2]);
}

TEST(MemoryPlanner, ResidualStaysLiveAcrossTheBlock) {
  // A residual (0..5) spans an MLP whose wide intermediate (2..3) reuses the narrow ones' space.
  std::vector<LiveRange> r = {{4096, 0, 5}, {4096, 1, 2}, {11264, 2, 3}, {11264, 2, 3}, {4096, 3, 4}, {4096, 4, 5}};
  ArenaLayout l = planArena(r);
  expectNoOverlap(r, l);
  EXPECT_EQ(l.peakLiveBytesPerRow, 4096 + 4096 + 11264 + 11264);
  EXPECT_LE(l.bytesPerRow, l.peakLiveBytesPerRow + 4096);
}

TEST(MemoryPlanner, RandomLifetimesNeverCollide) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<LiveRange> r;
    for (int i = 0; i < 40; ++i) {
      int first = rng() % 60, len = rng() % 10;
      r.push_back({int64_t(16 + rng() % 5000), first, first + len});
    }
    ArenaLayout l = planArena(r);
    expectNoOverlap(r, l);
    EXPECT_GE(l.bytesPerRow, l.peakLiveBytesPerRow);
    EXPECT_LE(l.bytesPerRow, 2 * l.peakLiveBytesPerRow) << "trial " << trial;
  }
}

} // namespace
