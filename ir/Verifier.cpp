// ir/Verifier.cpp — per-op shape rules (infer<Id>, one per row of Ops.def) and module-level checks.
#include "ir/Verifier.h"

#include "ir/Limits.h"

#include "llvm/ADT/StringSet.h"

#include <cmath>

namespace minfer::ir {
namespace {

using Types = llvm::SmallVector<Type, 1>;

// What an infer function sees: the op, its operand types, and an error helper at the op's location.
struct OpCheck {
  const Module &m;
  const Op &op;

  const Type &operand(size_t i) const {
    const Operand &o = op.operands[i];
    return o.isWeight ? m.weights[o.id].type : m.value(o.id).type;
  }
  bool has(size_t i) const { return i < op.operands.size(); }
  std::string name(size_t i) const {
    const Operand &o = op.operands[i];
    return o.isWeight ? "@" + m.weights[o.id].name : "%" + m.value(o.id).name;
  }
  llvm::Error fail(const llvm::Twine &msg) const {
    return m.error(op.loc, "'" + op.info().mnemonic + "': " + msg);
  }
  // The operand must have a float element type and at least `minRank` dims, the last one constant.
  llvm::Error floatWithFeatures(size_t i) const {
    const Type &t = operand(i);
    if (!isFloat(t.dtype)) return fail(name(i) + " must have a float element type, got " + t.str());
    if (t.rank() < 1 || !t.lastDim()) return fail(name(i) + " must end in a constant dim, got " + t.str());
    return llvm::Error::success();
  }
  llvm::Error vector(size_t i, int64_t n, llvm::StringRef what) const {
    const Type &t = operand(i);
    if (t.rank() != 1 || t.shape[0].isSymbolic() || t.shape[0].value != n)
      return fail(what + " " + name(i) + " must be [" + std::to_string(n) + "], got " + t.str());
    return llvm::Error::success();
  }
  // A positive int attribute of at most `max`.
  llvm::Error positiveInt(Attr attr, int64_t max = limits::kMaxDim) const {
    int64_t v = op.intAttr(attr);
    if (v <= 0) return fail("attribute '" + attrName(attr) + "' must be positive, got " + std::to_string(v));
    if (v > max)
      return fail("attribute '" + attrName(attr) + "' is " + std::to_string(v) + ", above the limit of " +
                  std::to_string(max));
    return llvm::Error::success();
  }
  llvm::Error positiveFloat(Attr attr) const {
    double v = op.floatAttr(attr);
    if (!(v > 0) || !std::isfinite(v)) return fail("attribute '" + attrName(attr) + "' must be a positive number");
    return llvm::Error::success();
  }
};

Type withLastDim(const Type &t, Dim d) {
  Type r = t;
  r.shape.back() = std::move(d);
  return r;
}

llvm::Expected<Types> inferEmbedding(const OpCheck &c) {
  const Type &ids = c.operand(0), &table = c.operand(1);
  if (ids.dtype != DType::I32 || ids.rank() != 1) return c.fail("ids " + c.name(0) + " must be i32[T], got " + ids.str());
  if (table.rank() != 2) return c.fail("table " + c.name(1) + " must be [rows, dim], got " + table.str());
  DType out = c.m.value(c.op.results[0]).type.dtype;
  if (!isFloat(out)) return c.fail("result must have a float element type");
  return Types{Type{out, {ids.shape[0], table.shape[1]}}};
}

llvm::Expected<Types> inferEmbeddingSum(const OpCheck &c) {
  const Type &ids2 = c.operand(2), &table = c.operand(1), &table2 = c.operand(3);
  auto first = inferEmbedding(c);
  if (!first) return first.takeError();
  if (ids2.dtype != DType::I32 || ids2 != c.operand(0))
    return c.fail("ids " + c.name(2) + " must be " + c.operand(0).str() + " as " + c.name(0) + ", got " + ids2.str());
  if (table2.rank() != 2 || table2.shape[1].value != table.shape[1].value)
    return c.fail("table " + c.name(3) + " must be [rows, " + std::to_string(table.shape[1].value) + "] as " +
                  c.name(1) + ", got " + table2.str());
  return first;
}

llvm::Expected<Types> inferNorm(const OpCheck &c, bool withBeta) {
  if (auto e = c.floatWithFeatures(0)) return e;
  int64_t d = *c.operand(0).lastDim();
  if (auto e = c.vector(1, d, "gamma")) return e;
  if (withBeta)
    if (auto e = c.vector(2, d, "beta")) return e;
  if (auto e = c.positiveFloat(Attr::Eps)) return e;
  return Types{c.operand(0)};
}
llvm::Expected<Types> inferLayerNorm(const OpCheck &c) { return inferNorm(c, true); }
llvm::Expected<Types> inferRmsNorm(const OpCheck &c) { return inferNorm(c, false); }

// Operand 0 (x) times weight operand `wi` ([out, in] with in = x's features): the product's type, with an
// optional bias (operand `bi`, [out]) and `scale` checked — what matmul, matmul_residual and gated_matmul share.
llvm::Expected<Type> checkProduct(const OpCheck &c, size_t wi, size_t bi) {
  if (auto e = c.floatWithFeatures(0)) return e;
  const Type &x = c.operand(0), &w = c.operand(wi);
  if (w.rank() != 2) return c.fail("weight " + c.name(wi) + " must be [out, in], got " + w.str());
  if (w.shape[1].value != *x.lastDim())
    return c.fail("weight " + c.name(wi) + " " + w.str() + " has " + std::to_string(w.shape[1].value) +
                  " inputs but " + c.name(0) + " " + x.str() + " has " + std::to_string(*x.lastDim()) + " features");
  if (c.has(bi))
    if (auto e = c.vector(bi, w.shape[0].value, "bias")) return e;
  if (c.op.hasIfDeclared(Attr::Scale) && !std::isfinite(c.op.floatAttr(Attr::Scale)))
    return c.fail("attribute 'scale' must be finite");
  return withLastDim(x, w.shape[0]);
}

llvm::Expected<Types> inferMatmul(const OpCheck &c) {
  auto y = checkProduct(c, 1, 2);
  if (!y) return y.takeError();
  return Types{*y};
}

llvm::Expected<Types> inferMatmulResidual(const OpCheck &c) {
  auto y = checkProduct(c, 1, 3);
  if (!y) return y.takeError();
  if (c.operand(2) != *y) return c.fail("residual " + c.name(2) + " must be " + y->str() + ", got " + c.operand(2).str());
  return Types{c.operand(2)};
}

llvm::Expected<Types> inferGatedMatmul(const OpCheck &c) {
  auto y = checkProduct(c, 1, 2); // no bias operand: index 2 is never there
  if (!y) return y.takeError();
  int64_t rows = c.operand(1).shape[0].value;
  if (rows % 2)
    return c.fail("weight " + c.name(1) + " must be [2 n, in] (gate rows, then up rows), got " + c.operand(1).str());
  return Types{withLastDim(*y, Dim::constant(rows / 2))};
}

llvm::Expected<Types> inferAddNorm(const OpCheck &c, bool withBeta) {
  if (auto e = c.floatWithFeatures(0)) return e;
  if (c.operand(0) != c.operand(1))
    return c.fail("operands must have the same type, got " + c.operand(0).str() + " and " + c.operand(1).str());
  int64_t d = *c.operand(0).lastDim();
  if (auto e = c.vector(2, d, "gamma")) return e;
  if (withBeta)
    if (auto e = c.vector(3, d, "beta")) return e;
  if (auto e = c.positiveFloat(Attr::Eps)) return e;
  return Types{c.operand(0), c.operand(0)};
}
llvm::Expected<Types> inferAddRmsNorm(const OpCheck &c) { return inferAddNorm(c, false); }
llvm::Expected<Types> inferAddLayerNorm(const OpCheck &c) { return inferAddNorm(c, true); }

llvm::Expected<Types> inferBinary(const OpCheck &c) {
  if (auto e = c.floatWithFeatures(0)) return e;
  if (c.operand(0) != c.operand(1))
    return c.fail("operands must have the same type, got " + c.operand(0).str() + " and " + c.operand(1).str());
  return Types{c.operand(0)};
}
llvm::Expected<Types> inferAdd(const OpCheck &c) { return inferBinary(c); }
llvm::Expected<Types> inferMul(const OpCheck &c) { return inferBinary(c); }

llvm::Expected<Types> inferUnary(const OpCheck &c) {
  if (auto e = c.floatWithFeatures(0)) return e;
  return Types{c.operand(0)};
}
llvm::Expected<Types> inferScale(const OpCheck &c) {
  if (!std::isfinite(c.op.floatAttr(Attr::Factor))) return c.fail("attribute 'factor' must be finite");
  return inferUnary(c);
}
llvm::Expected<Types> inferGeluTanh(const OpCheck &c) { return inferUnary(c); }
llvm::Expected<Types> inferGeluErf(const OpCheck &c) { return inferUnary(c); }
llvm::Expected<Types> inferSilu(const OpCheck &c) { return inferUnary(c); }
llvm::Expected<Types> inferRelu(const OpCheck &c) { return inferUnary(c); }

// x must be [tokens, heads * head_dim] with tokens equal to `tokens` (when given).
llvm::Error checkHeads(const OpCheck &c, size_t i, int64_t heads, int64_t headDim, const Dim *tokens) {
  const Type &t = c.operand(i);
  if (auto e = c.floatWithFeatures(i)) return e;
  if (t.rank() != 2 || *t.lastDim() != heads * headDim)
    return c.fail(c.name(i) + " must be [T, " + std::to_string(heads) + " heads * " + std::to_string(headDim) +
                  " head_dim = " + std::to_string(heads * headDim) + "], got " + t.str());
  if (tokens && !(t.shape[0] == *tokens))
    return c.fail(c.name(i) + " " + t.str() + " must have as many rows as " + c.name(0) + " " + c.operand(0).str());
  return llvm::Error::success();
}

llvm::Error checkRopeSchedule(const OpCheck &c);
llvm::Error checkPositions(const OpCheck &c, size_t i, size_t rowsOf);

llvm::Expected<Types> inferRope(const OpCheck &c) {
  if (auto e = c.positiveInt(Attr::Heads, limits::kMaxHeads)) return e;
  if (auto e = c.positiveInt(Attr::HeadDim, limits::kMaxHeadDim)) return e;
  int64_t heads = c.op.intAttr(Attr::Heads), hd = c.op.intAttr(Attr::HeadDim);
  if (hd % 2) return c.fail("head_dim must be even to rotate pairs, got " + std::to_string(hd));
  if (auto e = checkHeads(c, 0, heads, hd, nullptr)) return e;
  if (auto e = checkPositions(c, 1, 0)) return e;
  if (auto e = checkRopeSchedule(c)) return e;
  return Types{c.operand(0)};
}

// theta and the frequency schedule of a rope (or of a qkv op that ropes).
llvm::Error checkRopeSchedule(const OpCheck &c) {
  if (!c.op.has(Attr::Theta)) return c.fail("needs attribute 'theta' (float) to rotate");
  if (auto e = c.positiveFloat(Attr::Theta)) return e;

  // Each frequency schedule takes exactly its own parameters.
  auto schedule = c.op.enumAttr<RopeSchedule>(Attr::Schedule, RopeSchedule::Default);
  llvm::SmallVector<Attr, 4> wanted;
  if (schedule == RopeSchedule::Linear) wanted = {Attr::Factor};
  if (schedule == RopeSchedule::Llama3)
    wanted = {Attr::Factor, Attr::LowFreqFactor, Attr::HighFreqFactor, Attr::OriginalMaxPos};
  llvm::StringRef name = enumText(schedule);
  for (Attr a : {Attr::Factor, Attr::LowFreqFactor, Attr::HighFreqFactor, Attr::OriginalMaxPos}) {
    bool want = llvm::is_contained(wanted, a);
    if (want && !c.op.has(a)) return c.fail("schedule '" + name + "' needs attribute '" + attrName(a) + "'");
    if (!want && c.op.has(a))
      return c.fail("attribute '" + attrName(a) + "' does not apply to schedule '" + name + "'");
  }
  if (c.op.has(Attr::Factor))
    if (auto e = c.positiveFloat(Attr::Factor)) return e;
  if (schedule == RopeSchedule::Llama3) {
    if (auto e = c.positiveFloat(Attr::LowFreqFactor)) return e;
    if (auto e = c.positiveInt(Attr::OriginalMaxPos)) return e;
    if (!(c.op.floatAttr(Attr::HighFreqFactor) > c.op.floatAttr(Attr::LowFreqFactor)))
      return c.fail("llama3 schedule needs high_freq_factor > low_freq_factor");
  }
  return llvm::Error::success();
}

// Rotations are by each token's position in its sequence: the graph input, never another i32 value (the
// kernels read the step's positions directly).
llvm::Error checkPositions(const OpCheck &c, size_t i, size_t rowsOf) {
  if (c.m.value(c.op.operands[i].id).name != "positions" || c.m.findInput("positions") != c.op.operands[i].id)
    return c.fail("positions operand must be the graph input %positions, got " + c.name(i));
  const Type &pos = c.operand(i);
  if (!(pos.shape[0] == c.operand(rowsOf).shape[0]))
    return c.fail("positions " + c.name(i) + " must be i32[" + c.operand(rowsOf).shape[0].str() + "], got " + pos.str());
  return llvm::Error::success();
}

llvm::Expected<Types> inferQkv(const OpCheck &c) {
  for (Attr a : {Attr::Heads, Attr::KvHeads})
    if (auto e = c.positiveInt(a, limits::kMaxHeads)) return e;
  if (auto e = c.positiveInt(Attr::HeadDim, limits::kMaxHeadDim)) return e;
  int64_t heads = c.op.intAttr(Attr::Heads), kv = c.op.intAttr(Attr::KvHeads), hd = c.op.intAttr(Attr::HeadDim);
  if (auto e = c.floatWithFeatures(0)) return e;
  const Type &x = c.operand(0), &w = c.operand(2);
  if (x.rank() != 2) return c.fail(c.name(0) + " must be [T, features], got " + x.str());
  if (auto e = checkPositions(c, 1, 0)) return e;
  int64_t n = (heads + 2 * kv) * hd;
  if (w.rank() != 2 || w.shape[0].value != n || w.shape[1].value != *x.lastDim())
    return c.fail("weight " + c.name(2) + " must be [(heads + 2 kv_heads) * head_dim = " + std::to_string(n) + ", " +
                  std::to_string(*x.lastDim()) + "], got " + w.str());
  if (c.has(3))
    if (auto e = c.vector(3, n, "bias")) return e;
  if (c.op.enumAttr<QkvRope>(Attr::Rope) != QkvRope::None) {
    if (hd % 2) return c.fail("head_dim must be even to rotate pairs, got " + std::to_string(hd));
    if (auto e = checkRopeSchedule(c)) return e;
  } else {
    for (Attr a : {Attr::Theta, Attr::Schedule, Attr::Factor, Attr::LowFreqFactor, Attr::HighFreqFactor,
                   Attr::OriginalMaxPos})
      if (c.op.has(a)) return c.fail("attribute '" + attrName(a) + "' does not apply to rope = none");
  }
  // The results keep the names (and so the dims) they are declared with; only the widths are checked here.
  Types out;
  int64_t widths[3] = {heads * hd, kv * hd, kv * hd};
  for (int i = 0; i < 3; ++i) {
    const Type &t = c.m.value(c.op.results[i]).type;
    bool fits = t.rank() == 2 && t.lastDim() && *t.lastDim() == widths[i];
    out.push_back(withLastDim(x, fits ? t.shape.back() : Dim::constant(widths[i])));
  }
  return out;
}

llvm::Expected<Types> inferSplit(const OpCheck &c) {
  if (auto e = c.floatWithFeatures(0)) return e;
  std::vector<int64_t> sizes = c.op.intsAttr(Attr::Sizes);
  if (sizes.empty()) return c.fail("'sizes' must not be empty");
  int64_t total = 0;
  Types out;
  const AttrValue *a = c.op.attr(Attr::Sizes);
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] <= 0) return c.fail("split sizes must be positive, got " + std::to_string(sizes[i]));
    total += sizes[i];
    const IntRef &r = a->ints[i];
    out.push_back(withLastDim(c.operand(0), r.dim.empty() ? Dim::constant(r.value) : Dim::named(r.dim, r.value)));
  }
  if (total != *c.operand(0).lastDim())
    return c.fail("sizes add up to " + std::to_string(total) + " but " + c.name(0) + " " + c.operand(0).str() +
                  " has " + std::to_string(*c.operand(0).lastDim()));
  if (c.op.results.size() != sizes.size())
    return c.fail(std::to_string(sizes.size()) + " sizes but " + std::to_string(c.op.results.size()) + " results");
  return out;
}

llvm::Expected<Types> inferAttention(const OpCheck &c) {
  for (Attr a : {Attr::Heads, Attr::KvHeads})
    if (auto e = c.positiveInt(a, limits::kMaxHeads)) return e;
  if (auto e = c.positiveInt(Attr::HeadDim, limits::kMaxHeadDim)) return e;
  int64_t heads = c.op.intAttr(Attr::Heads), kv = c.op.intAttr(Attr::KvHeads), hd = c.op.intAttr(Attr::HeadDim);
  if (heads % kv)
    return c.fail("heads (" + std::to_string(heads) + ") must be a multiple of kv_heads (" + std::to_string(kv) + ")");
  if (auto e = checkHeads(c, 0, heads, hd, nullptr)) return e;
  const Dim &tokens = c.operand(0).shape[0];
  if (auto e = checkHeads(c, 1, kv, hd, &tokens)) return e;
  if (auto e = checkHeads(c, 2, kv, hd, &tokens)) return e;
  if (c.op.has(Attr::Scale))
    if (auto e = c.positiveFloat(Attr::Scale)) return e;
  return Types{c.operand(0)};
}

llvm::Expected<Types> dispatchInfer(const OpCheck &c) {
  switch (c.op.kind) {
#define OP(Id, ...)                                                                                          \
  case OpKind::Id: return infer##Id(c);
#include "ir/Ops.def"
  }
  return c.fail("unknown op kind");
}

// Every dim within limits::kMaxDim, so that shapes and their products stay far from int64 overflow.
llvm::Error checkDims(const Module &m) {
  for (const DimDecl &d : m.dims)
    if (d.value <= 0 || d.value > limits::kMaxDim)
      return m.error(d.loc, "dim " + d.name + " = " + std::to_string(d.value) + " must be in 1.." +
                                std::to_string(limits::kMaxDim));
  return llvm::Error::success();
}

llvm::Error checkWeights(const Module &m) {
  for (const WeightDecl &w : m.weights) {
    if (!isFloat(w.type.dtype)) return m.error(w.loc, "weight @" + w.name + " must have a float element type");
    if (w.type.rank() < 1 || w.type.rank() > 2)
      return m.error(w.loc, "weight @" + w.name + " must be a vector or a matrix, got " + w.type.str());
    for (const Dim &d : w.type.shape)
      if (d.isSymbolic() || d.value <= 0)
        return m.error(w.loc, "weight @" + w.name + " must have positive constant dims, got " + w.type.str());
    for (const Dim &d : w.type.shape)
      if (d.value > limits::kMaxDim)
        return m.error(w.loc, "weight @" + w.name + " has a dim of " + std::to_string(d.value) + ", above the limit of " +
                                  std::to_string(limits::kMaxDim));
    if (w.type.rank() == 2 && w.type.shape[0].value * w.type.shape[1].value > limits::kMaxWeightElements)
      return m.error(w.loc, "weight @" + w.name + " " + w.type.str() + " has more than " +
                                std::to_string(limits::kMaxWeightElements) + " elements");
    if (w.transposed && w.type.rank() != 2)
      return m.error(w.loc, "only a matrix can be transposed, @" + w.name + " is " + w.type.str());
    for (int p : w.parts)
      if (p < 0 || static_cast<size_t>(p) >= m.weights.size() || m.weights[p].packed())
        return m.error(w.loc, "packed weight @" + w.name + " must stack declared, unpacked weights");
  }
  return llvm::Error::success();
}

llvm::Error checkInputs(const Module &m) {
  for (ValueId id : m.inputs) {
    const Value &v = m.value(id);
    if (v.name != "tokens" && v.name != "positions")
      return m.error(v.loc, "unknown graph input %" + v.name + "; expected %tokens and optionally %positions");
    if (v.type.dtype != DType::I32 || v.type.rank() != 1 || v.type.shape[0].kind != Dim::Tokens)
      return m.error(v.loc, "graph input %" + v.name + " must be i32[T], got " + v.type.str());
  }
  if (m.findInput("tokens") < 0) return m.error(m.loc, "the graph must take %tokens: i32[T]");
  if (m.outputs.size() != 1) return m.error(m.returnLoc, "the graph must return exactly one value, the logits");
  const Type &out = m.value(m.outputs[0]).type;
  if (!isFloat(out.dtype) || out.rank() != 2 || out.shape[0].kind != Dim::Tokens || !out.lastDim())
    return m.error(m.returnLoc, "the graph must return logits of type [T, vocab], got " + out.str());
  return llvm::Error::success();
}

llvm::Error checkOp(const Module &m, const Op &op, bool inRepeat, std::vector<bool> &weightUsed) {
  for (const Operand &o : op.operands) {
    if (!o.isWeight) continue;
    weightUsed[o.id] = true;
    const WeightDecl &w = m.weights[o.id];
    if (w.perLayer() && !inRepeat)
      return m.error(op.loc, "per-layer weight @" + w.name + " (\"" + w.tensor + "\") used outside a repeat block");
  }
  auto types = inferResultTypes(m, op);
  if (!types) return types.takeError();
  for (size_t i = 0; i < op.results.size() && i < types->size(); ++i) {
    const Value &r = m.value(op.results[i]);
    if (r.type != (*types)[i])
      return m.error(r.loc, "'" + op.info().mnemonic + "' result %" + r.name + " is declared " + r.type.str() +
                                " but its operands give " + (*types)[i].str());
  }
  return llvm::Error::success();
}

} // namespace

llvm::Expected<Types> inferResultTypes(const Module &m, const Op &op) {
  const OpInfo &info = op.info();
  OpCheck c{m, op};
  if (op.operands.size() < info.minOperands() || op.operands.size() > info.operands.size())
    return c.fail("wrong number of operands");
  for (size_t i = 0; i < op.operands.size(); ++i)
    if (op.operands[i].isWeight != info.operands[i].isWeight)
      return c.fail("operand " + std::to_string(i + 1) + " must be a " + (info.operands[i].isWeight ? "weight" : "value"));
  for (size_t i = 0; i < info.attrs.size(); ++i)
    if (!info.attrs[i].optional && (i >= op.attrs.size() || !op.attrs[i]))
      return c.fail("missing attribute '" + info.attrs[i].name + "'");
  if (info.results > 0 && op.results.size() != static_cast<size_t>(info.results))
    return c.fail("must have exactly " + std::to_string(info.results) + " result(s)");
  return dispatchInfer(c);
}

llvm::Error verifyModule(const Module &m) {
  if (auto e = checkDims(m)) return e;
  if (auto e = checkWeights(m)) return e;
  if (auto e = checkInputs(m)) return e;
  std::vector<bool> weightUsed(m.weights.size(), false);
  for (const Item &item : m.items) {
    if (const Op *op = std::get_if<Op>(&item)) {
      if (auto e = checkOp(m, *op, false, weightUsed)) return e;
      continue;
    }
    const Repeat &r = std::get<Repeat>(item);
    if (r.count.value <= 0 || r.count.value > limits::kMaxLayers)
      return m.error(r.loc, "repeat count " + std::to_string(r.count.value) + " must be in 1.." +
                                std::to_string(limits::kMaxLayers));
    for (const Op &op : r.body)
      if (auto e = checkOp(m, op, true, weightUsed)) return e;
    for (size_t i = 0; i < r.yields.size(); ++i) {
      const Type &want = m.value(r.carried[i]).type, &got = m.value(r.yields[i]).type;
      if (want != got)
        return m.error(m.value(r.carried[i]).loc, "carried value %" + m.value(r.carried[i]).name + " is " +
                                                      want.str() + " but the body yields " + got.str());
    }
  }
  for (size_t i = 0; i < m.weights.size(); ++i)
    if (weightUsed[i])
      for (int p : m.weights[i].parts) weightUsed[p] = true;
  for (size_t i = 0; i < m.weights.size(); ++i)
    if (!weightUsed[i]) return m.error(m.weights[i].loc, "weight @" + m.weights[i].name + " is declared but never used");
  return llvm::Error::success();
}

} // namespace minfer::ir
