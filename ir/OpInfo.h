// ir/OpInfo.h — the op table (Ops.def) as data and as C++: the attribute names (`Attr`), the enum
// attributes' types, and each op's operand and attribute signature, looked up by kind or by mnemonic.
// Parser, printer, verifier and interpreter all read ops through this.
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace minfer::ir {

enum class OpKind {
#define OP(Id, ...) Id,
#include "ir/Ops.def"
};

// Every attribute name of Ops.def.
enum class Attr {
#define ATTR(Id, name) Id,
#include "ir/Ops.def"
};
llvm::StringRef attrName(Attr);

// The enum attributes' types: ir::Activation, ir::RopeStyle, ...
#define ENUM(Type) enum class Type {
#define CHOICE(Type, Id, text) Id,
#define END_ENUM(Type) };
#include "ir/Ops.def"

// An enum type's name and IR texts, indexed by value.
template <typename E> struct EnumInfo;
#define ENUM(Type)                                                                                           \
  template <> struct EnumInfo<Type> {                                                                        \
    static constexpr llvm::StringLiteral name = #Type;                                                       \
    static constexpr llvm::StringLiteral texts[] = {
#define CHOICE(Type, Id, text) text,
#define END_ENUM(Type)                                                                                       \
    };                                                                                                       \
  };
#include "ir/Ops.def"

// How IR writes `e` ("" for the value of an absent attribute).
template <typename E> llvm::StringRef enumText(E e) { return EnumInfo<E>::texts[static_cast<size_t>(e)]; }
// The value IR writes as `text`; none for an unknown or empty text.
template <typename E> std::optional<E> parseEnum(llvm::StringRef text) {
  for (size_t i = 0; i < std::size(EnumInfo<E>::texts); ++i)
    if (!text.empty() && EnumInfo<E>::texts[i] == text) return static_cast<E>(i);
  return std::nullopt;
}

struct OperandSpec {
  std::string name;
  bool isWeight = false;
  bool optional = false;
};

enum class AttrKind { Int, Float, Ints, Enum };

struct AttrSpec {
  Attr id;
  llvm::StringRef name;
  AttrKind kind = AttrKind::Int;
  bool optional = false;
  llvm::StringRef enumName;                  // Enum: the Type of its ENUM row
  llvm::ArrayRef<llvm::StringLiteral> texts; // Enum: the IR text of each value ("" for the absent value)

  std::vector<llvm::StringRef> choices() const; // Enum: the texts IR may write
  std::string kindStr() const;                  // "int", "float", "ints", "half|interleaved"
};

struct OpInfo {
  OpKind kind;
  llvm::StringRef mnemonic;
  std::vector<OperandSpec> operands;
  std::vector<AttrSpec> attrs;
  int results = 1; // the number of results; -1: one per entry of `sizes`
  bool fused = false; // written only by the fusion pass (compiler/Fuse.cpp): the `fused` column of Ops.def
  llvm::StringRef summary;

  size_t minOperands() const;
  int attrIndex(Attr) const;               // -1 when the op has no such attribute
  int attrIndex(llvm::StringRef name) const; // by IR name, for the parser
  bool declares(Attr a) const { return attrIndex(a) >= 0; }
};

const OpInfo &opInfo(OpKind);
const OpInfo *lookupOp(llvm::StringRef mnemonic);
llvm::ArrayRef<OpInfo> allOps();

} // namespace minfer::ir
