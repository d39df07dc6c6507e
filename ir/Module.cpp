// ir/Module.cpp — lookups and diagnostics on a Module.
#include "ir/Module.h"

#include "ir/Diagnostics.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/ErrorHandling.h"

namespace minfer::ir {

AttrValue AttrValue::ofFloat(double f) {
  AttrValue v;
  v.kind = AttrKind::Float;
  v.f = f;
  return v;
}

size_t Op::slot(Attr a) const {
  int i = info().attrIndex(a);
  if (i < 0)
    llvm::report_fatal_error("op '" + info().mnemonic + "' has no attribute '" + attrName(a) + "' (ir/Ops.def)", false);
  return static_cast<size_t>(i);
}

const AttrValue *Op::attr(Attr a) const {
  size_t i = slot(a);
  return i < attrs.size() && attrs[i] ? &*attrs[i] : nullptr;
}

void Op::setAttr(Attr a, AttrValue v) {
  size_t i = slot(a);
  if (attrs.size() <= i) attrs.resize(info().attrs.size());
  attrs[i] = std::move(v);
}

int64_t Op::intAttr(Attr a, int64_t fallback) const {
  const AttrValue *v = attr(a);
  return v ? v->i.value : fallback;
}

double Op::floatAttr(Attr a, double fallback) const {
  const AttrValue *v = attr(a);
  return v ? v->f : fallback;
}

std::vector<int64_t> Op::intsAttr(Attr a) const {
  std::vector<int64_t> out;
  if (const AttrValue *v = attr(a))
    for (const IntRef &r : v->ints) out.push_back(r.value);
  return out;
}

void Op::checkEnum(Attr a, llvm::StringRef type) const {
  const AttrSpec &spec = info().attrs[slot(a)];
  if (spec.enumName != type)
    llvm::report_fatal_error("attribute '" + attrName(a) + "' of op '" + info().mnemonic + "' is " + spec.kindStr() +
                                 ", read as enum " + type,
                             false);
}

int Op::absentChoice(Attr a) const {
  const AttrSpec &spec = info().attrs[slot(a)];
  const llvm::StringLiteral *absent = llvm::find(spec.texts, llvm::StringRef());
  if (absent == spec.texts.end())
    llvm::report_fatal_error("attribute '" + attrName(a) + "' of op '" + info().mnemonic +
                                 "' is absent and its enum has no value for that",
                             false);
  return static_cast<int>(absent - spec.texts.begin());
}

std::string WeightDecl::tensorName(int64_t layer) const {
  std::string out = tensor;
  size_t at = out.find("{l}");
  while (at != std::string::npos) {
    out.replace(at, 3, std::to_string(layer));
    at = out.find("{l}", at);
  }
  return out;
}

const DimDecl *Module::findDim(llvm::StringRef n) const {
  for (const DimDecl &d : dims)
    if (d.name == n) return &d;
  return nullptr;
}

bool isMatmulFamily(OpKind k) {
  return k == OpKind::Matmul || k == OpKind::MatmulResidual || k == OpKind::GatedMatmul || k == OpKind::Qkv;
}

bool readsAsMatmulInput(const Op &op, ValueId v) {
  if (!isMatmulFamily(op.kind) || op.operands[0].isWeight || op.operands[0].id != v) return false;
  for (size_t i = 1; i < op.operands.size(); ++i)
    if (!op.operands[i].isWeight && op.operands[i].id == v) return false;
  return true;
}

int Module::findWeight(llvm::StringRef n) const {
  for (size_t i = 0; i < weights.size(); ++i)
    if (weights[i].name == n) return static_cast<int>(i);
  return -1;
}

int Module::addPackedWeight(llvm::ArrayRef<int> parts) {
  WeightDecl w;
  std::string base;
  int64_t rows = 0;
  for (int p : parts) {
    const WeightDecl &part = weights[static_cast<size_t>(p)];
    base += (base.empty() ? "" : "_") + part.name;
    rows += part.type.shape[0].value;
  }
  w.name = base;
  for (int i = 2; findWeight(w.name) >= 0; ++i) w.name = base + "_" + std::to_string(i);
  const WeightDecl &first = weights[static_cast<size_t>(parts[0])];
  w.type = first.type;
  w.type.shape[0] = Dim::constant(rows);
  w.loc = first.loc;
  w.parts.assign(parts.begin(), parts.end());
  w.packedPerLayer = first.perLayer();
  weights.push_back(std::move(w));
  return static_cast<int>(weights.size() - 1);
}

ValueId Module::findInput(llvm::StringRef n) const {
  for (ValueId id : inputs)
    if (value(id).name == n) return id;
  return -1;
}

ValueId Module::addValue(std::string n, Type type, llvm::SMLoc l) {
  values.push_back(Value{std::move(n), std::move(type), l});
  return static_cast<ValueId>(values.size() - 1);
}

std::vector<int64_t> Module::weightLayerCounts() const {
  std::vector<int64_t> counts(weights.size(), 1);
  forEachOp(*this, [&](const Op &op, int64_t count) {
    for (const Operand &o : op.operands)
      if (o.isWeight && weights[o.id].perLayer()) counts[o.id] = std::max<int64_t>(1, count);
  });
  for (size_t i = 0; i < weights.size(); ++i)
    for (int p : weights[i].parts) counts[p] = std::max(counts[p], counts[i]);
  return counts;
}

int64_t Module::numKvSlots() const {
  int64_t n = 0;
  forEachOp(*this, [&](const Op &op, int64_t count) {
    if (op.kind == OpKind::Attention) n += count ? count : 1;
  });
  return n;
}

llvm::Error Module::error(llvm::SMLoc l, const llvm::Twine &msg) const {
  if (source && l.isValid()) return diagnosticAt(*source, l, msg);
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "in module '" + name + "': " + msg.str());
}

} // namespace minfer::ir
