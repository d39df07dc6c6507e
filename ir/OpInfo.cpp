// ir/OpInfo.cpp — turns the signature strings of Ops.def into OpInfo records, once.
#include "ir/OpInfo.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/ErrorHandling.h"

namespace minfer::ir {
namespace {

std::vector<OperandSpec> parseOperands(llvm::StringRef spec) {
  llvm::SmallVector<llvm::StringRef> parts;
  spec.split(parts, ' ', -1, /*KeepEmpty=*/false);
  std::vector<OperandSpec> out;
  for (llvm::StringRef p : parts) {
    OperandSpec o;
    o.optional = p.consume_back("?");
    auto [name, kind] = p.split(':');
    o.name = name.str();
    o.isWeight = kind == "w";
    out.push_back(o);
  }
  return out;
}

std::vector<AttrSpec> parseAttrs(llvm::StringRef spec) {
  llvm::SmallVector<llvm::StringRef> parts;
  spec.split(parts, ' ', -1, /*KeepEmpty=*/false);
  std::vector<AttrSpec> out;
  for (llvm::StringRef p : parts) {
    AttrSpec a;
    a.optional = p.consume_back("?");
    auto [name, kind] = p.split(':');
    a.name = name.str();
    if (kind == "int") {
      a.kind = AttrKind::Int;
    } else if (kind == "float") {
      a.kind = AttrKind::Float;
    } else if (kind == "ints") {
      a.kind = AttrKind::Ints;
    } else {
      a.kind = AttrKind::Enum;
      llvm::SmallVector<llvm::StringRef> choices;
      kind.split(choices, '|');
      for (llvm::StringRef c : choices) a.choices.push_back(c.str());
    }
    out.push_back(a);
  }
  return out;
}

int resultCount(llvm::StringRef spec) {
  int n = -1;
  if (spec == "*" || spec.getAsInteger(10, n) || n < 1) return -1;
  return n;
}

std::vector<OpInfo> buildTable() {
  std::vector<OpInfo> table;
  constexpr bool plain = false, fused = true; // the `fused` column's two values
#define OP(Id, Mnemonic, Operands, Attrs, Results, Fused, Summary)                                 \
  table.push_back(OpInfo{OpKind::Id, Mnemonic, parseOperands(Operands), parseAttrs(Attrs),           \
                         resultCount(Results), Fused, Summary});
#include "ir/Ops.def"
  return table;
}

const std::vector<OpInfo> &table() {
  static const std::vector<OpInfo> t = buildTable();
  return t;
}

} // namespace

std::string AttrSpec::kindStr() const {
  switch (kind) {
  case AttrKind::Int: return "int";
  case AttrKind::Float: return "float";
  case AttrKind::Ints: return "ints";
  case AttrKind::Enum: return llvm::join(choices, "|");
  }
  return "?";
}

size_t OpInfo::minOperands() const {
  return llvm::count_if(operands, [](const OperandSpec &o) { return !o.optional; });
}

int OpInfo::attrIndex(llvm::StringRef name) const {
  for (size_t i = 0; i < attrs.size(); ++i)
    if (attrs[i].name == name) return static_cast<int>(i);
  return -1;
}

const OpInfo &opInfo(OpKind k) { return table()[static_cast<size_t>(k)]; }

const OpInfo *lookupOp(llvm::StringRef mnemonic) {
  for (const OpInfo &i : table())
    if (i.mnemonic == mnemonic) return &i;
  return nullptr;
}

llvm::ArrayRef<OpInfo> allOps() { return table(); }

} // namespace minfer::ir
