// ir/Printer.cpp — canonical IR text: dims, weights, then the graph, one op per line.
#include "ir/Printer.h"

#include <charconv>

namespace minfer::ir {
namespace {

void printAttr(const AttrSpec &spec, const AttrValue &a, llvm::raw_ostream &os) {
  switch (a.kind) {
  case AttrKind::Int: os << a.i.str(); break;
  case AttrKind::Float: os << formatFloat(a.f); break;
  case AttrKind::Enum: os << spec.texts[static_cast<size_t>(a.choice)]; break;
  case AttrKind::Ints:
    os << "[";
    for (size_t i = 0; i < a.ints.size(); ++i) os << (i ? ", " : "") << a.ints[i].str();
    os << "]";
    break;
  }
}

void printOp(const Module &m, const Op &op, llvm::StringRef indent, llvm::raw_ostream &os) {
  const OpInfo &info = op.info();
  os << indent;
  for (size_t i = 0; i < op.results.size(); ++i) os << (i ? ", %" : "%") << m.value(op.results[i]).name;
  os << " = " << info.mnemonic;
  for (size_t i = 0; i < op.operands.size(); ++i) {
    const Operand &o = op.operands[i];
    os << (i ? ", " : " ");
    if (o.isWeight) os << "@" << m.weights[o.id].name;
    else os << "%" << m.value(o.id).name;
  }
  bool first = true;
  for (size_t i = 0; i < op.attrs.size(); ++i) {
    if (!op.attrs[i]) continue;
    os << (first ? " {" : ", ") << info.attrs[i].name << " = ";
    printAttr(info.attrs[i], *op.attrs[i], os);
    first = false;
  }
  if (!first) os << "}";
  os << " : ";
  for (size_t i = 0; i < op.results.size(); ++i) os << (i ? ", " : "") << m.value(op.results[i]).type.str();
  os << "\n";
}

void printValueList(const Module &m, const std::vector<ValueId> &ids, llvm::raw_ostream &os) {
  for (size_t i = 0; i < ids.size(); ++i) os << (i ? ", %" : "%") << m.value(ids[i]).name;
}

} // namespace

std::string formatFloat(double d) {
  // Plain decimals read best (500000.0, 0.00001); very large or small values take an exponent.
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::fixed);
  std::string s(buf, ec == std::errc() ? end : buf);
  if (ec != std::errc() || s.size() > 12) {
    auto [gend, gec] = std::to_chars(buf, buf + sizeof buf, d);
    s.assign(buf, gec == std::errc() ? gend : buf);
  }
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

void printModule(const Module &m, llvm::raw_ostream &os) {
  os << "model \"" << m.name << "\"\n\n";
  for (const DimDecl &d : m.dims) os << "dim " << d.name << " = " << d.value << "\n";
  if (!m.dims.empty()) os << "\n";
  for (const WeightDecl &w : m.weights) {
    os << "weight @" << w.name << " : " << w.type.str() << " = ";
    if (w.packed()) {
      os << "concat(";
      for (size_t i = 0; i < w.parts.size(); ++i) os << (i ? ", @" : "@") << m.weights[w.parts[i]].name;
      os << ")\n";
      continue;
    }
    os << (w.transposed ? "transpose " : "") << "\"" << w.tensor << "\"\n";
  }
  if (!m.weights.empty()) os << "\n";

  os << "graph(";
  for (size_t i = 0; i < m.inputs.size(); ++i)
    os << (i ? ", %" : "%") << m.value(m.inputs[i]).name << ": " << m.value(m.inputs[i]).type.str();
  os << ") {\n";
  for (const Item &item : m.items) {
    if (const Op *op = std::get_if<Op>(&item)) {
      printOp(m, *op, "  ", os);
      continue;
    }
    const Repeat &r = std::get<Repeat>(item);
    os << "  ";
    printValueList(m, r.results, os);
    os << " = repeat " << r.count.str() << " (";
    for (size_t i = 0; i < r.carried.size(); ++i)
      os << (i ? ", %" : "%") << m.value(r.carried[i]).name << " = %" << m.value(r.inits[i]).name;
    os << ") {\n";
    for (const Op &op : r.body) printOp(m, op, "    ", os);
    os << "    yield ";
    printValueList(m, r.yields, os);
    os << "\n  }\n";
  }
  os << "  return ";
  printValueList(m, m.outputs, os);
  os << "\n}\n";
}

std::string printModule(const Module &m) {
  std::string s;
  llvm::raw_string_ostream os(s);
  printModule(m, os);
  return os.str();
}

} // namespace minfer::ir
