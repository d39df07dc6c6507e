// ir/Types.h — element types and shapes of the minfer IR.
//
// A shape is a list of dims. Each dim is an integer constant, a named model dim (`hidden`, resolved to its
// value when parsed, the name kept for printing), or one of the two symbols: `T`, the number of tokens in
// this step, and `S`, the context length. Everything but T and S is a compile-time constant.
#pragma once

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>

namespace minfer::ir {

enum class DType { BF16, F16, F32, I32 };

llvm::StringRef dtypeName(DType);
std::optional<DType> parseDType(llvm::StringRef);
bool isFloat(DType);
size_t dtypeSize(DType);

struct Dim {
  enum Kind { Const, Named, Tokens, Context };
  Kind kind = Const;
  int64_t value = 0; // Const and Named: the value; Tokens / Context: unused
  std::string name;  // Named: the model dim it was written as

  static Dim constant(int64_t v) { return {Const, v, {}}; }
  static Dim named(std::string n, int64_t v) { return {Named, v, std::move(n)}; }
  static Dim tokens() { return {Tokens, 0, {}}; }
  static Dim context() { return {Context, 0, {}}; }

  bool isSymbolic() const { return kind == Tokens || kind == Context; }
  // Two dims are equal when they denote the same extent: `hidden` equals 768 when hidden = 768.
  bool operator==(const Dim &o) const;
  std::string str() const;
};

using Shape = llvm::SmallVector<Dim, 3>;

struct Type {
  DType dtype = DType::F32;
  Shape shape;

  bool operator==(const Type &o) const;
  bool operator!=(const Type &o) const { return !(*this == o); }
  std::string str() const; // bf16[T, hidden]
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  // The constant extent of the last dim; nullopt when it is symbolic or the shape is a scalar.
  std::optional<int64_t> lastDim() const;
};

std::string shapeStr(const Shape &);

} // namespace minfer::ir
