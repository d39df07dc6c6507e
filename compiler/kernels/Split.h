// compiler/kernels/Split.h — the spec of templates/split.cuh: slicing a fused projection into parts.
#pragma once

#include "compiler/kernels/KernelSpec.h"

#include <vector>

namespace minfer {

struct SplitSpec : KernelSpec {
  int64_t cols = 0;
  std::vector<int64_t> sizes; // 1 to 4 parts, adding up to cols

  static constexpr unsigned kThreads = 256; // 8 warps: enough to keep the copy bandwidth-bound

  SplitSpec(int64_t cols, std::vector<int64_t> sizes) : cols(cols), sizes(std::move(sizes)) {}
  std::string name() const override;
  std::string header() const override { return "split.cuh"; }
  std::string entry() const override;
  LaunchDims launch(int64_t rows) const override;
  llvm::json::Object toJSON() const override;
  llvm::Error validate(const Target &) const override;
};

} // namespace minfer
