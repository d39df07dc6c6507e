// ir/OpInfo.h — the op table (Ops.def) as data: operand and attribute signatures, looked up by kind or
// by mnemonic. Parser, printer, verifier and interpreter all read ops through this.
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <string>
#include <vector>

namespace minfer::ir {

enum class OpKind {
#define OP(Id, ...) Id,
#include "ir/Ops.def"
};

struct OperandSpec {
  std::string name;
  bool isWeight = false;
  bool optional = false;
};

enum class AttrKind { Int, Float, Ints, Enum };

struct AttrSpec {
  std::string name;
  AttrKind kind = AttrKind::Int;
  bool optional = false;
  std::vector<std::string> choices; // Enum only

  std::string kindStr() const; // "int", "float", "ints", "half|interleaved"
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
  int attrIndex(llvm::StringRef name) const; // -1 when the op has no such attribute
};

const OpInfo &opInfo(OpKind);
const OpInfo *lookupOp(llvm::StringRef mnemonic);
llvm::ArrayRef<OpInfo> allOps();

} // namespace minfer::ir
