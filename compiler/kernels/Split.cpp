// compiler/kernels/Split.cpp — naming and launch geometry of the split kernel.
#include "compiler/kernels/Split.h"

#include <algorithm>

namespace minfer {

std::string SplitSpec::name() const {
  std::string n = "split_bf16_c" + std::to_string(cols);
  for (int64_t s : sizes) n += "_" + std::to_string(s);
  return n;
}

std::string SplitSpec::entry() const {
  std::string e = "minfer::split<" + std::to_string(cols);
  for (size_t i = 0; i < 4; ++i) e += ", " + std::to_string(i < sizes.size() ? sizes[i] : 0);
  return e + ">";
}

LaunchDims SplitSpec::launch(int64_t rows) const {
  bool vec = std::all_of(sizes.begin(), sizes.end(), [](int64_t s) { return s % 8 == 0; });
  // One element (or vector) per thread, capped: the grid-stride loop covers the rest.
  return gridStride(rows * (vec ? cols / 8 : cols), kThreads, 65535);
}

llvm::json::Object SplitSpec::toJSON() const {
  llvm::json::Array s;
  for (int64_t v : sizes) s.push_back(v);
  return llvm::json::Object{{"family", "split"}, {"cols", cols}, {"sizes", std::move(s)}};
}

llvm::Error SplitSpec::validate(const Target &) const {
  int64_t total = 0;
  for (int64_t v : sizes) total += v;
  if (sizes.empty() || sizes.size() > 4 || sizes[0] <= 0 || total != cols)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   name() + ": 1 to 4 parts of positive size adding up to the columns");
  return llvm::Error::success();
}

MINFER_PARAMS_LAYOUT(SplitParams,
                     MINFER_FIELD(x, Ptr), MINFER_FIELD(y0, Ptr), MINFER_FIELD(y1, Ptr), MINFER_FIELD(y2, Ptr),
                     MINFER_FIELD(y3, Ptr), MINFER_FIELD(rows, I32))

} // namespace minfer
