// compiler/kernels/Split.h — the spec of templates/split.cuh: slicing a fused projection into parts.
#pragma once

#include "compiler/kernels/KernelSpec.h"

#include <vector>

namespace minfer {

// split.cuh's argument (compiler/kernels/Params.h).
struct SplitParams {
  uint64_t x = 0;                        // [rows, cols]
  uint64_t y0 = 0, y1 = 0, y2 = 0, y3 = 0; // [rows, size of part i]; 0 past the parts
  int32_t rows = 0;
  static const ParamsLayout &layout();
};

struct SplitSpec : KernelSpec {
  int64_t cols = 0;
  std::vector<int64_t> sizes; // 1 to 4 parts, adding up to cols

  static constexpr unsigned kThreads = 256; // 8 warps: enough to keep the copy bandwidth-bound

  SplitSpec(int64_t cols, std::vector<int64_t> sizes) : cols(cols), sizes(std::move(sizes)) {}
  std::string name() const override;
  std::string header() const override { return "split.cuh"; }
  const ParamsLayout &params() const override { return SplitParams::layout(); }
  std::string entry() const override;
  LaunchDims launch(int64_t rows) const override;
  llvm::json::Object toJSON() const override;
  llvm::Error validate(const Target &) const override;
};

} // namespace minfer
