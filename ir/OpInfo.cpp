// ir/OpInfo.cpp — turns the signature strings of Ops.def into OpInfo records, once, checking each
// attribute against the ATTR and ENUM rows.
#include "ir/OpInfo.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/ErrorHandling.h"

namespace minfer::ir {
namespace {

// Calls fn(name, kind, optional) for each `name:kind` (`?` for optional) of a space-separated signature.
template <typename Fn> void forEachEntry(llvm::StringRef spec, Fn fn) {
  llvm::SmallVector<llvm::StringRef> parts;
  spec.split(parts, ' ', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef p : parts) {
    bool optional = p.consume_back("?");
    auto [name, kind] = p.split(':');
    fn(name, kind, optional);
  }
}

std::vector<OperandSpec> parseOperands(llvm::StringRef spec) {
  std::vector<OperandSpec> out;
  forEachEntry(spec, [&](llvm::StringRef name, llvm::StringRef kind, bool optional) {
    out.push_back(OperandSpec{name.str(), kind == "w", optional});
  });
  return out;
}

struct EnumEntry {
  llvm::StringRef name;
  llvm::ArrayRef<llvm::StringLiteral> texts;
};
constexpr EnumEntry kEnums[] = {
#define ENUM(Type) {EnumInfo<Type>::name, EnumInfo<Type>::texts},
#include "ir/Ops.def"
};
constexpr llvm::StringLiteral kAttrNames[] = {
#define ATTR(Id, name) name,
#include "ir/Ops.def"
};

// An Ops.def row that names an undeclared attribute or enum is a bug in the table: it stops every program
// that reads the table, at its first op, and any unit test.
[[noreturn]] void badTable(const llvm::Twine &msg) { llvm::report_fatal_error("ir/Ops.def: " + msg, false); }

std::vector<AttrSpec> parseAttrs(llvm::StringRef mnemonic, llvm::StringRef spec) {
  std::vector<AttrSpec> out;
  forEachEntry(spec, [&](llvm::StringRef name, llvm::StringRef kind, bool optional) {
    AttrSpec a;
    a.optional = optional;
    const llvm::StringLiteral *n = llvm::find(kAttrNames, name);
    if (n == std::end(kAttrNames)) badTable("op '" + mnemonic + "' names attribute '" + name + "' with no ATTR row");
    a.id = static_cast<Attr>(n - std::begin(kAttrNames));
    a.name = *n;
    if (kind == "int") {
      a.kind = AttrKind::Int;
    } else if (kind == "float") {
      a.kind = AttrKind::Float;
    } else if (kind == "ints") {
      a.kind = AttrKind::Ints;
    } else {
      const EnumEntry *e = llvm::find_if(kEnums, [&](const EnumEntry &e) { return e.name == kind; });
      if (e == std::end(kEnums)) badTable("attribute '" + name + "' of op '" + mnemonic + "' has unknown kind '" + kind + "'");
      a.kind = AttrKind::Enum;
      a.enumName = e->name;
      a.texts = e->texts;
    }
    out.push_back(a);
  });
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
  table.push_back(OpInfo{OpKind::Id, Mnemonic, parseOperands(Operands), parseAttrs(Mnemonic, Attrs),           \
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
  case AttrKind::Enum: return llvm::join(choices(), "|");
  }
  return "?";
}

std::vector<llvm::StringRef> AttrSpec::choices() const {
  std::vector<llvm::StringRef> out;
  for (llvm::StringRef t : texts)
    if (!t.empty()) out.push_back(t);
  return out;
}

llvm::StringRef attrName(Attr a) { return kAttrNames[static_cast<size_t>(a)]; }

size_t OpInfo::minOperands() const {
  return llvm::count_if(operands, [](const OperandSpec &o) { return !o.optional; });
}

int OpInfo::attrIndex(Attr a) const {
  for (size_t i = 0; i < attrs.size(); ++i)
    if (attrs[i].id == a) return static_cast<int>(i);
  return -1;
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
