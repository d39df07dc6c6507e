// compiler/MemoryPlanner.h — places a phase's activation buffers in one arena, reusing memory by liveness.
//
// Every activation buffer holds `bytesPerRow` bytes per token row, so a whole plan scales with the rows
// of a step: offsets are computed in bytes per row and multiplied by the phase's maximum rows at run
// time. A buffer is live from the launch that writes it first to the launch that reads it last; two
// buffers whose lifetimes overlap never share bytes. Placement is greedy best-fit, largest first — not
// optimal, but within a few percent of the lower bound (the peak of live bytes) on decoder graphs.
#pragma once

#include <cstdint>
#include <vector>

namespace minfer {

struct LiveRange {
  int64_t bytesPerRow = 0;
  int first = 0, last = 0; // launch indices, inclusive
};

struct ArenaLayout {
  std::vector<int64_t> offsetsPerRow; // one per range, in bytes per row, each a multiple of `align`
  int64_t bytesPerRow = 0;            // the arena's size per row
  int64_t peakLiveBytesPerRow = 0;    // the lower bound: most bytes live at one launch
};

// Each offset is a multiple of `align` bytes per row, so with any row count every buffer stays aligned.
ArenaLayout planArena(const std::vector<LiveRange> &ranges, int64_t align = 16);

} // namespace minfer
