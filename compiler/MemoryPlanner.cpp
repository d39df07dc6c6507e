// compiler/MemoryPlanner.cpp — greedy best-fit arena placement by liveness.
#include "compiler/MemoryPlanner.h"

#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <numeric>

namespace minfer {

ArenaLayout planArena(const std::vector<LiveRange> &ranges, int64_t align) {
  ArenaLayout out;
  out.offsetsPerRow.assign(ranges.size(), 0);
  auto rounded = [align](int64_t b) { return int64_t(llvm::alignTo(b, align)); };

  // Lower bound: the most bytes live at any one launch.
  int lastLaunch = 0;
  for (const LiveRange &r : ranges) lastLaunch = std::max(lastLaunch, r.last);
  for (int t = 0; t <= lastLaunch; ++t) {
    int64_t live = 0;
    for (const LiveRange &r : ranges)
      if (r.first <= t && t <= r.last) live += rounded(r.bytesPerRow);
    out.peakLiveBytesPerRow = std::max(out.peakLiveBytesPerRow, live);
  }

  std::vector<size_t> order(ranges.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return ranges[a].bytesPerRow > ranges[b].bytesPerRow; });
  std::vector<size_t> placed;
  for (size_t i : order) {
    const LiveRange &r = ranges[i];
    int64_t size = rounded(r.bytesPerRow);
    // Busy intervals of placed buffers whose lifetimes overlap this one, by offset.
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (size_t j : placed) {
      const LiveRange &o = ranges[j];
      if (o.last < r.first || r.last < o.first) continue;
      busy.push_back({out.offsetsPerRow[j], out.offsetsPerRow[j] + rounded(o.bytesPerRow)});
    }
    std::sort(busy.begin(), busy.end());
    // Best fit: the smallest gap that holds `size`; else after the last busy interval.
    int64_t best = -1, bestGap = INT64_MAX, cursor = 0;
    for (auto [begin, end] : busy) {
      if (begin - cursor >= size && begin - cursor < bestGap) {
        best = cursor;
        bestGap = begin - cursor;
      }
      cursor = std::max(cursor, end);
    }
    if (best < 0) best = cursor;
    out.offsetsPerRow[i] = best;
    out.bytesPerRow = std::max(out.bytesPerRow, best + size);
    placed.push_back(i);
  }
  return out;
}

} // namespace minfer
