// compiler/Fuse.cpp — the fusion pass (see Fuse.h for the rules).
//
// Each rule walks one block (a list of ops in order) looking for its pattern from the op that ends it,
// checks every precondition, and replaces the matched ops by one fused op. Use counts are global (a value
// of the top level may be read inside a repeat, and a repeat yields values), recomputed before every
// match so that a rule never swallows a value some other op, a yield or the graph output still reads.
#include "compiler/Fuse.h"

#include "ir/Verifier.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"

#include <optional>

namespace minfer {
namespace {

using ir::Op;
using ir::OpKind;
using ir::ValueId;

// A rope's frequencies: what a qkv op copies from the ropes it absorbs, which must agree on them.
constexpr ir::Attr kRopeSchedule[] = {ir::Attr::Theta,         ir::Attr::Schedule,       ir::Attr::Factor,
                                      ir::Attr::LowFreqFactor, ir::Attr::HighFreqFactor, ir::Attr::OriginalMaxPos};

// The epilogue activation an activation op computes; None for any other op.
ir::Activation activationOf(OpKind k) {
  switch (k) {
  case OpKind::GeluTanh: return ir::Activation::GeluTanh;
  case OpKind::GeluErf: return ir::Activation::GeluErf;
  case OpKind::Silu: return ir::Activation::Silu;
  case OpKind::Relu: return ir::Activation::Relu;
  default: return ir::Activation::None;
  }
}
bool isActivation(OpKind k) { return activationOf(k) != ir::Activation::None; }
bool isNorm(OpKind k) { return k == OpKind::RmsNorm || k == OpKind::LayerNorm; }

Op newOp(OpKind kind, llvm::SMLoc loc) {
  Op op{kind, {}, {}, {}, loc};
  op.attrs.resize(op.info().attrs.size());
  return op;
}
// Copies attribute `a` of `from` (when set) to `to`.
void copyAttr(const Op &from, Op &to, ir::Attr a) {
  if (const ir::AttrValue *v = from.attr(a)) to.setAttr(a, *v);
}
// Both ops lack attribute `a`, or both have the same value.
bool sameAttr(const Op &x, const Op &y, ir::Attr a) {
  const ir::AttrValue *p = x.attr(a), *q = y.attr(a);
  if (!p || !q) return !p && !q;
  auto values = [](const ir::AttrValue &v) {
    std::vector<int64_t> out;
    for (const ir::IntRef &r : v.ints) out.push_back(r.value);
    return out;
  };
  return p->i.value == q->i.value && p->f == q->f && p->choice == q->choice && values(*p) == values(*q);
}

class Fuser {
public:
  explicit Fuser(ir::Module &m) : m(m) {}

  void run() {
    // The blocks: the top level as runs of ops between repeats, and every repeat body, moved out of the
    // module while the rules work on them.
    for (ir::Item &item : m.items) {
      if (Op *op = std::get_if<Op>(&item)) {
        if (segments.empty() || segments.back().repeat) segments.emplace_back();
        segments.back().ops.push_back(std::move(*op));
        continue;
      }
      ir::Repeat &r = std::get<ir::Repeat>(item);
      segments.push_back(Segment{std::move(r.body), &r});
    }
    // Bodies first, so that a top-level norm's readers inside a repeat are fused when it is looked at.
    for (Segment &seg : segments)
      if (seg.repeat) fuseBlock(seg.ops);
    for (Segment &seg : segments)
      if (!seg.repeat) fuseBlock(seg.ops);
    std::vector<ir::Item> items;
    for (Segment &seg : segments) {
      if (!seg.repeat) {
        for (Op &op : seg.ops) items.emplace_back(std::move(op));
        continue;
      }
      seg.repeat->body = std::move(seg.ops);
      items.emplace_back(std::move(*seg.repeat));
    }
    m.items = std::move(items);
  }

  FuseStats stats;

private:
  struct Segment {
    std::vector<Op> ops;
    ir::Repeat *repeat = nullptr; // the repeat whose body `ops` is (its item in m.items), or a top-level run
  };

  // Use counts and readers of every value, over the whole module as it is now.
  void countUses() {
    uses.assign(m.values.size(), 0);
    readers.clear();
    auto read = [&](ValueId v) { ++uses[static_cast<size_t>(v)]; };
    for (const Segment &seg : segments) {
      if (seg.repeat) {
        for (ValueId v : seg.repeat->inits) read(v);
        for (ValueId v : seg.repeat->yields) read(v);
      }
      for (const Op &op : seg.ops)
        for (const ir::Operand &o : op.operands)
          if (!o.isWeight) {
            read(o.id);
            readers[o.id].push_back(&op);
          }
    }
    for (ValueId v : m.outputs) read(v);
  }
  int usesOf(ValueId v) const { return uses[static_cast<size_t>(v)]; }
  bool singleUse(ValueId v) const { return usesOf(v) == 1; }

  // The op of the current block defining `v` (its index), or -1.
  int defIndex(ValueId v) const {
    auto it = def.find(v);
    return it == def.end() ? -1 : it->second;
  }
  const Op *defOf(ValueId v, OpKind kind) const {
    int i = defIndex(v);
    if (i < 0 || dead[static_cast<size_t>(i)] || (*block)[static_cast<size_t>(i)].kind != kind) return nullptr;
    return &(*block)[static_cast<size_t>(i)];
  }
  void indexBlock() {
    def.clear();
    for (size_t i = 0; i < block->size(); ++i)
      for (ValueId r : (*block)[i].results) def[r] = static_cast<int>(i);
  }
  void kill(const Op *op) { dead[static_cast<size_t>(op - block->data())] = true; }
  size_t indexOf(const Op *op) const { return static_cast<size_t>(op - block->data()); }

  void fuseBlock(std::vector<Op> &ops) {
    block = &ops;
    struct Rule {
      const char *name;
      bool (Fuser::*apply)(size_t);
    };
    static const Rule rules[] = {{"embedding-sum", &Fuser::fuseEmbeddingSum},
                                 {"qkv", &Fuser::fuseQkv},
                                 {"gated", &Fuser::fuseGated},
                                 {"epilogue", &Fuser::fuseEpilogue},
                                 {"add-norm", &Fuser::fuseAddNorm},
                                 {"fold", &Fuser::markFold}};
    for (const Rule &rule : rules) {
      bool changed = true;
      while (changed) {
        changed = false;
        // A rule changes nothing until it fires, and a sweep ends when one fires: the counts stay true.
        dead.assign(ops.size(), false);
        indexBlock();
        countUses();
        for (size_t i = 0; i < ops.size() && !changed; ++i) {
          if ((this->*rule.apply)(i)) {
            ++stats.fired[rule.name];
            changed = true;
          }
        }
        std::vector<Op> kept;
        for (size_t i = 0; i < ops.size(); ++i)
          if (!dead[i]) kept.push_back(std::move(ops[i]));
        ops = std::move(kept);
      }
    }
    block = nullptr;
  }

  // ---- embedding-sum -----------------------------------------------------------------------------------
  // add(embedding(ids, table), embedding(ids2, table2)), each embedding read by the add alone.
  bool fuseEmbeddingSum(size_t i) {
    Op &add = (*block)[i];
    if (add.kind != OpKind::Add || dead[i]) return false;
    ValueId a = add.operands[0].id, b = add.operands[1].id;
    if (a == b || !singleUse(a) || !singleUse(b)) return false;
    const Op *ea = defOf(a, OpKind::Embedding), *eb = defOf(b, OpKind::Embedding);
    if (!ea || !eb) return false;
    Op fused = newOp(OpKind::EmbeddingSum, add.loc);
    fused.operands = {ea->operands[0], ea->operands[1], eb->operands[0], eb->operands[1]};
    fused.results = add.results;
    replace({ea, eb, &add}, std::move(fused), /*atFirst=*/false);
    return true;
  }

  // ---- qkv ---------------------------------------------------------------------------------------------
  // attention(q, k, v) where q, k are (optionally roped) and q, k, v come from three matmuls of one input
  // or from one matmul split in three.
  bool fuseQkv(size_t i) {
    Op &attn = (*block)[i];
    if (attn.kind != OpKind::Attention || dead[i]) return false;
    ValueId positions = m.findInput("positions");
    if (positions < 0) return false;
    ValueId q = attn.operands[0].id, k = attn.operands[1].id, v = attn.operands[2].id;
    // k and v end up only in the KV cache: nothing else may read them.
    if (!singleUse(k) || !singleUse(v) || q == k || q == v || k == v) return false;
    int64_t heads = attn.intAttr(ir::Attr::Heads), kvHeads = attn.intAttr(ir::Attr::KvHeads), hd = attn.intAttr(ir::Attr::HeadDim);

    // Peel the ropes: both or neither, with the same schedule, at %positions.
    const Op *qRope = defOf(q, OpKind::Rope), *kRope = defOf(k, OpKind::Rope);
    if (!qRope != !kRope) return false;
    ValueId qSrc = q, kSrc = k;
    if (qRope) {
      if (qRope->operands[1].id != positions || kRope->operands[1].id != positions) return false;
      if (qRope->intAttr(ir::Attr::Heads) != heads || kRope->intAttr(ir::Attr::Heads) != kvHeads ||
          qRope->intAttr(ir::Attr::HeadDim) != hd || kRope->intAttr(ir::Attr::HeadDim) != hd)
        return false;
      for (ir::Attr a : kRopeSchedule)
        if (!sameAttr(*qRope, *kRope, a)) return false;
      if (!sameAttr(*qRope, *kRope, ir::Attr::Style)) return false;
      qSrc = qRope->operands[0].id;
      kSrc = kRope->operands[0].id;
      if (!singleUse(qSrc) || !singleUse(kSrc)) return false;
    }

    std::optional<ValueId> x;
    std::optional<int> weight, bias;
    std::vector<const Op *> removed;
    const Op *mq = plainMatmul(qSrc), *mk = plainMatmul(kSrc), *mv = plainMatmul(v);
    if (mq && mk && mv) {
      // Three matmuls of one input: pack their weights (and biases, all or none).
      if (mq->operands[0].id != mk->operands[0].id || mq->operands[0].id != mv->operands[0].id) return false;
      size_t nb = mq->operands.size();
      if (mk->operands.size() != nb || mv->operands.size() != nb) return false;
      std::vector<int> ws{mq->operands[1].id, mk->operands[1].id, mv->operands[1].id};
      if (!stackable(ws)) return false;
      if (nb == 3 && !stackable({mq->operands[2].id, mk->operands[2].id, mv->operands[2].id})) return false;
      x = mq->operands[0].id;
      weight = m.addPackedWeight(ws);
      if (nb == 3) bias = m.addPackedWeight({mq->operands[2].id, mk->operands[2].id, mv->operands[2].id});
      removed = {mq, mk, mv};
    } else {
      // One matmul split in [heads, kv_heads, kv_heads] * head_dim columns.
      int si = defIndex(qSrc);
      if (si < 0 || dead[static_cast<size_t>(si)]) return false;
      const Op &split = (*block)[static_cast<size_t>(si)];
      if (split.kind != OpKind::Split || split.results.size() != 3 || split.results[0] != qSrc ||
          split.results[1] != kSrc || split.results[2] != v)
        return false;
      std::vector<int64_t> sizes = split.intsAttr(ir::Attr::Sizes);
      if (sizes != std::vector<int64_t>{heads * hd, kvHeads * hd, kvHeads * hd}) return false;
      const Op *mm = plainMatmul(split.operands[0].id);
      if (!mm) return false;
      x = mm->operands[0].id;
      weight = mm->operands[1].id;
      if (mm->operands.size() == 3) bias = mm->operands[2].id;
      removed = {mm, &split};
    }
    if (qRope) removed.push_back(qRope), removed.push_back(kRope);

    Op fused = newOp(OpKind::Qkv, attn.loc);
    fused.operands = {{false, *x}, {false, positions}, {true, *weight}};
    if (bias) fused.operands.push_back({true, *bias});
    fused.results = {q, k, v};
    for (ir::Attr a : {ir::Attr::Heads, ir::Attr::KvHeads, ir::Attr::HeadDim}) copyAttr(attn, fused, a);
    ir::QkvRope rope = ir::QkvRope::None;
    if (qRope)
      rope = qRope->enumAttr<ir::RopeStyle>(ir::Attr::Style) == ir::RopeStyle::Half ? ir::QkvRope::Half
                                                                                  : ir::QkvRope::Interleaved;
    fused.setAttr(ir::Attr::Rope, ir::AttrValue::ofEnum(rope));
    if (qRope)
      for (ir::Attr a : kRopeSchedule) copyAttr(*qRope, fused, a);
    replace(removed, std::move(fused), /*atFirst=*/true);
    return true;
  }

  // A matmul without epilogue attributes whose result only `one` op reads.
  const Op *plainMatmul(ValueId v) const {
    const Op *mm = defOf(v, OpKind::Matmul);
    if (!mm || !singleUse(v) || mm->has(ir::Attr::Act) || mm->has(ir::Attr::Scale)) return nullptr;
    return mm;
  }

  // Weights that can be stacked into one: same dtype and rank, same columns, all per-layer or none.
  bool stackable(const std::vector<int> &ws) const {
    const ir::WeightDecl &first = m.weights[static_cast<size_t>(ws[0])];
    for (int w : ws) {
      const ir::WeightDecl &d = m.weights[static_cast<size_t>(w)];
      if (d.packed() || d.type.dtype != first.type.dtype || d.type.rank() != first.type.rank() ||
          d.perLayer() != first.perLayer())
        return false;
      if (d.type.rank() == 2 && d.type.shape[1].value != first.type.shape[1].value) return false;
    }
    return true;
  }

  // ---- gated -------------------------------------------------------------------------------------------
  bool fuseGated(size_t i) {
    Op &mul = (*block)[i];
    if (mul.kind != OpKind::Mul || dead[i]) return false;
    for (int side = 0; side < 2; ++side) {
      ValueId a = mul.operands[side].id, b = mul.operands[1 - side].id;
      int ai = defIndex(a);
      if (ai < 0 || dead[static_cast<size_t>(ai)] || !singleUse(a)) continue;
      const Op &act = (*block)[static_cast<size_t>(ai)];
      if (!isActivation(act.kind)) continue;
      const Op *gate = plainMatmul(act.operands[0].id), *up = plainMatmul(b);
      if (!gate || !up || gate == up || gate->operands.size() != 2 || up->operands.size() != 2) continue;
      if (gate->operands[0].id != up->operands[0].id) continue;
      int wg = gate->operands[1].id, wu = up->operands[1].id;
      if (!stackable({wg, wu}) || m.weights[wg].type != m.weights[wu].type) continue;
      Op fused = newOp(OpKind::GatedMatmul, mul.loc);
      fused.operands = {{false, gate->operands[0].id}, {true, m.addPackedWeight({wg, wu})}};
      fused.results = {mul.results[0]};
      fused.setAttr(ir::Attr::Act, ir::AttrValue::ofEnum(activationOf(act.kind)));
      replace({gate, up, &act, &mul}, std::move(fused), /*atFirst=*/true);
      return true;
    }
    return false;
  }

  // ---- epilogue ----------------------------------------------------------------------------------------
  // The single reader of a matmul's result, when it is an activation, a scale or a residual add that the
  // epilogue can take in its order: act(acc + bias) * scale + residual.
  bool fuseEpilogue(size_t i) {
    Op &mm = (*block)[i];
    if (dead[i] || (mm.kind != OpKind::Matmul && mm.kind != OpKind::MatmulResidual)) return false;
    ValueId y = mm.results[0];
    if (!singleUse(y)) return false;
    auto it = readers.find(y);
    if (it == readers.end() || it->second.size() != 1) return false; // read by a yield or the output
    const Op *user = it->second[0];
    if (user < block->data() || user >= block->data() + block->size() || dead[indexOf(user)]) return false;
    bool residual = mm.kind == OpKind::MatmulResidual;
    Op fused = mm;
    fused.loc = user->loc;
    fused.results = user->results;
    if (isActivation(user->kind)) {
      if (residual || mm.has(ir::Attr::Act) || mm.has(ir::Attr::Scale)) return false;
      fused.setAttr(ir::Attr::Act, ir::AttrValue::ofEnum(activationOf(user->kind)));
    } else if (user->kind == OpKind::Scale) {
      if (residual || mm.has(ir::Attr::Scale)) return false;
      fused.setAttr(ir::Attr::Scale, ir::AttrValue::ofFloat(user->floatAttr(ir::Attr::Factor)));
    } else if (user->kind == OpKind::Add) {
      if (residual || user->operands[0].id == user->operands[1].id) return false;
      ValueId r = user->operands[0].id == y ? user->operands[1].id : user->operands[0].id;
      fused = newOp(OpKind::MatmulResidual, user->loc);
      fused.operands = {mm.operands[0], mm.operands[1], {false, r}};
      if (mm.operands.size() == 3) fused.operands.push_back(mm.operands[2]);
      copyAttr(mm, fused, ir::Attr::Act);
      copyAttr(mm, fused, ir::Attr::Scale);
      fused.results = user->results;
    } else {
      return false;
    }
    // The fused op takes the place of the last op of the chain: every operand is defined by then.
    replace({&mm, user}, std::move(fused), /*atFirst=*/false);
    return true;
  }

  // ---- add-norm ----------------------------------------------------------------------------------------
  bool fuseAddNorm(size_t i) {
    Op &norm = (*block)[i];
    if (dead[i] || !isNorm(norm.kind)) return false;
    const Op *add = defOf(norm.operands[0].id, OpKind::Add);
    if (!add) return false;
    bool layer = norm.kind == OpKind::LayerNorm;
    Op fused = newOp(layer ? OpKind::AddLayerNorm : OpKind::AddRmsNorm, norm.loc);
    fused.operands = {add->operands[0], add->operands[1], norm.operands[1]};
    if (layer) fused.operands.push_back(norm.operands[2]);
    fused.results = {add->results[0], norm.results[0]};
    copyAttr(norm, fused, ir::Attr::Eps);
    // At the add's place: the sum's other readers follow the add, the norm's follow the norm.
    replace({add, &norm}, std::move(fused), /*atFirst=*/true);
    return true;
  }

  // ---- fold --------------------------------------------------------------------------------------------
  bool markFold(size_t i) {
    Op &norm = (*block)[i];
    if (dead[i] || !isNorm(norm.kind) || norm.has(ir::Attr::Fold)) return false;
    ValueId y = norm.results[0];
    auto it = readers.find(y);
    if (it == readers.end() || static_cast<int>(it->second.size()) != usesOf(y)) return false; // a yield or output
    for (const Op *r : it->second)
      if (!ir::readsAsMatmulInput(*r, y)) return false;
    norm.setAttr(ir::Attr::Fold, ir::AttrValue::ofEnum(ir::NormFold::Decode));
    return true;
  }

  // Replaces `ops` (of the current block) by `fused`, placed where the first (or last) of them was.
  void replace(std::vector<const Op *> ops, Op fused, bool atFirst) {
    size_t at = atFirst ? block->size() : 0;
    for (const Op *op : ops) at = atFirst ? std::min(at, indexOf(op)) : std::max(at, indexOf(op));
    for (const Op *op : ops) kill(op);
    (*block)[at] = std::move(fused);
    dead[at] = false;
  }

  ir::Module &m;
  std::vector<Segment> segments;
  std::vector<Op> *block = nullptr;
  std::vector<bool> dead;
  llvm::DenseMap<ValueId, int> def;
  std::vector<int> uses;
  llvm::DenseMap<ValueId, std::vector<const Op *>> readers;
};

} // namespace

llvm::Expected<FuseStats> fuseModule(ir::Module &m) {
  Fuser f(m);
  f.run();
  if (auto e = ir::verifyModule(m))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "the fusion pass produced an invalid module (a bug): " + llvm::toString(std::move(e)));
  return f.stats;
}

} // namespace minfer
