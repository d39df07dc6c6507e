// ir/Types.cpp — names, equality and printing of IR element types and shapes.
#include "ir/Types.h"

namespace minfer::ir {

llvm::StringRef dtypeName(DType t) {
  switch (t) {
  case DType::BF16: return "bf16";
  case DType::F16: return "f16";
  case DType::F32: return "f32";
  case DType::I32: return "i32";
  }
  return "?";
}

std::optional<DType> parseDType(llvm::StringRef s) {
  for (DType t : {DType::BF16, DType::F16, DType::F32, DType::I32})
    if (s == dtypeName(t)) return t;
  return std::nullopt;
}

bool isFloat(DType t) { return t != DType::I32; }

size_t dtypeSize(DType t) {
  switch (t) {
  case DType::BF16:
  case DType::F16: return 2;
  case DType::F32:
  case DType::I32: return 4;
  }
  return 0;
}

bool Dim::operator==(const Dim &o) const {
  if (isSymbolic() || o.isSymbolic()) return kind == o.kind;
  return value == o.value;
}

std::string Dim::str() const {
  switch (kind) {
  case Const: return std::to_string(value);
  case Named: return name;
  case Tokens: return "T";
  case Context: return "S";
  }
  return "?";
}

std::string shapeStr(const Shape &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += shape[i].str();
  }
  return s + "]";
}

bool Type::operator==(const Type &o) const {
  return dtype == o.dtype && shape.size() == o.shape.size() &&
         std::equal(shape.begin(), shape.end(), o.shape.begin());
}

std::string Type::str() const { return dtypeName(dtype).str() + shapeStr(shape); }

std::optional<int64_t> Type::lastDim() const {
  if (shape.empty() || shape.back().isSymbolic()) return std::nullopt;
  return shape.back().value;
}

} // namespace minfer::ir
