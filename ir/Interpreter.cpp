// ir/Interpreter.cpp — eval<Id> for every row of Ops.def, and the step loop around them.
#include "ir/Interpreter.h"

#include "ir/Diagnostics.h"

#include "llvm/ADT/DenseMap.h"

#include <cmath>
#include <numeric>

namespace minfer::ir {

size_t Tensor::numelOf(const std::vector<int64_t> &s) {
  size_t n = 1;
  for (int64_t d : s) n *= static_cast<size_t>(d);
  return n;
}

struct Interpreter::State {
  const Module &m;
  const WeightSet &weights;
  int64_t maxSeq;
  int64_t vocab = 0;
  // First KV slot of each attention op; a repeat's op uses slot base + layer.
  llvm::DenseMap<const Op *, int64_t> kvSlotBase;
  int64_t kvSlots = 0;

  struct Sequence {
    int64_t length = 0;
    std::vector<Tensor> k, v; // per KV slot: [length, kv_heads * head_dim]
  };
  std::vector<Sequence> seqs;

  // Per step:
  std::vector<Tensor> env; // by ValueId
  Sequence *seq = nullptr;
  int64_t layer = 0;

  std::vector<std::vector<Tensor>> packed; // by weight decl: a packed weight's parts stacked, per layer

  State(const Module &m, const WeightSet &w, int64_t maxSeq) : m(m), weights(w), maxSeq(maxSeq) {}
  llvm::Error run(const Op &op);
};

namespace {

using State = Interpreter::State;

struct EvalCtx {
  State &s;
  const Op &op;
  llvm::ArrayRef<const Tensor *> given = {}; // evalOp: the operands, instead of env and weights

  const Tensor &in(size_t i) const {
    if (!given.empty()) return *given[i];
    const Operand &o = op.operands[i];
    if (!o.isWeight) return s.env[o.id];
    const std::vector<Tensor> &perLayer = s.m.weights[o.id].packed() ? s.packed[o.id] : s.weights.byDecl[o.id];
    return perLayer.size() == 1 ? perLayer[0] : perLayer[s.layer];
  }
  bool has(size_t i) const { return i < op.operands.size(); }
  Tensor &out(size_t i, std::vector<int64_t> shape) const {
    Tensor &t = s.env[op.results[i]];
    t = Tensor(std::move(shape));
    return t;
  }
  llvm::Error fail(const llvm::Twine &msg) const { return s.m.error(op.loc, msg); }
};

template <typename Fn> llvm::Error pointwise(const EvalCtx &c, Fn fn) {
  const Tensor &x = c.in(0);
  Tensor &y = c.out(0, x.shape);
  for (int64_t i = 0; i < x.numel(); ++i) y.data[i] = fn(x.data[i]);
  return llvm::Error::success();
}

template <typename Fn> llvm::Error binary(const EvalCtx &c, Fn fn) {
  const Tensor &a = c.in(0), &b = c.in(1);
  Tensor &y = c.out(0, a.shape);
  for (int64_t i = 0; i < a.numel(); ++i) y.data[i] = fn(a.data[i], b.data[i]);
  return llvm::Error::success();
}

// y = table[ids] (operands first, first + 1), or with `add`, y += table[ids].
llvm::Error gatherRows(const EvalCtx &c, size_t first, Tensor &y, bool add) {
  const Tensor &ids = c.in(first), &table = c.in(first + 1);
  int64_t rows = table.shape[0], dim = table.shape[1];
  for (int64_t t = 0; t < ids.numel(); ++t) {
    int64_t id = static_cast<int64_t>(ids.data[t]);
    if (id < 0 || id >= rows)
      return c.fail("id " + std::to_string(id) + " at row " + std::to_string(t) + " is outside the " +
                    std::to_string(rows) + " rows of @" + c.s.m.weights[c.op.operands[first + 1].id].name);
    const float *src = table.row(id);
    float *dst = y.row(t);
    for (int64_t i = 0; i < dim; ++i) dst[i] = add ? dst[i] + src[i] : src[i];
  }
  return llvm::Error::success();
}
llvm::Error evalEmbedding(const EvalCtx &c) {
  return gatherRows(c, 0, c.out(0, {c.in(0).numel(), c.in(1).shape[1]}), false);
}
llvm::Error evalEmbeddingSum(const EvalCtx &c) {
  Tensor &y = c.out(0, {c.in(0).numel(), c.in(1).shape[1]});
  if (auto e = gatherRows(c, 0, y, false)) return e;
  return gatherRows(c, 2, y, true);
}

// y = norm(x) into result `result` of the op; gamma (and beta) are operands first, first + 1.
llvm::Error normInto(const EvalCtx &c, const Tensor &x, size_t first, bool layerNorm, size_t result) {
  const Tensor &gamma = c.in(first);
  const Tensor *beta = layerNorm ? &c.in(first + 1) : nullptr;
  double eps = c.op.floatAttr(Attr::Eps);
  Tensor &y = c.out(result, x.shape);
  int64_t d = x.cols();
  for (int64_t r = 0; r < x.rows(); ++r) {
    const float *xr = x.row(r);
    double mean = 0;
    if (layerNorm) {
      for (int64_t i = 0; i < d; ++i) mean += xr[i];
      mean /= d;
    }
    double var = 0;
    for (int64_t i = 0; i < d; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    double inv = 1.0 / std::sqrt(var / d + eps);
    for (int64_t i = 0; i < d; ++i)
      y.row(r)[i] = static_cast<float>((xr[i] - mean) * inv * gamma.data[i] + (beta ? beta->data[i] : 0.0));
  }
  return llvm::Error::success();
}
llvm::Error evalLayerNorm(const EvalCtx &c) { return normInto(c, c.in(0), 1, true, 0); }
llvm::Error evalRmsNorm(const EvalCtx &c) { return normInto(c, c.in(0), 1, false, 0); }

llvm::Error addNorm(const EvalCtx &c, bool layerNorm) {
  const Tensor &a = c.in(0), &b = c.in(1);
  Tensor sum(a.shape);
  for (int64_t i = 0; i < a.numel(); ++i) sum.data[i] = a.data[i] + b.data[i];
  if (auto e = normInto(c, sum, 2, layerNorm, 1)) return e;
  c.out(0, {}) = std::move(sum);
  return llvm::Error::success();
}
llvm::Error evalAddRmsNorm(const EvalCtx &c) { return addNorm(c, false); }
llvm::Error evalAddLayerNorm(const EvalCtx &c) { return addNorm(c, true); }

// The activations, as the pointwise ops and the fused matmuls apply them.
float geluTanh(float x) {
  double xd = x, k = std::sqrt(2.0 / M_PI);
  return static_cast<float>(0.5 * xd * (1.0 + std::tanh(k * (xd + 0.044715 * xd * xd * xd))));
}
float geluErf(float x) { return static_cast<float>(0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)))); }
float silu(float x) { return static_cast<float>(x / (1.0 + std::exp(-static_cast<double>(x)))); }
float relu(float x) { return x > 0 ? x : 0.0f; }

// The activation named by an op's `act` attribute (identity when absent).
float (*activationOf(const Op &op))(float) {
  switch (op.enumAttr<Activation>(Attr::Act)) {
  case Activation::None: return nullptr;
  case Activation::GeluTanh: return geluTanh;
  case Activation::GeluErf: return geluErf;
  case Activation::Silu: return silu;
  case Activation::Relu: return relu;
  }
  return nullptr;
}

// x [.., k] . w[first rows ... first + n)^T (+ bias), accumulated in double, as [x rows, n].
Tensor matmulRows(const Tensor &x, const Tensor &w, const Tensor *bias, int64_t first, int64_t n) {
  int64_t k = w.shape[1];
  Tensor y({x.rows(), n});
  for (int64_t r = 0; r < x.rows(); ++r) {
    const float *xr = x.row(r);
    for (int64_t j = 0; j < n; ++j) {
      const float *wr = w.row(first + j);
      double acc = bias ? bias->data[first + j] : 0.0;
      for (int64_t i = 0; i < k; ++i) acc += static_cast<double>(xr[i]) * wr[i];
      y.row(r)[j] = static_cast<float>(acc);
    }
  }
  return y;
}

// matmul and matmul_residual: y = act(x . w^T + bias) * scale (+ residual).
llvm::Error matmulEpilogue(const EvalCtx &c, size_t biasOperand, const Tensor *residual) {
  const Tensor &x = c.in(0), &w = c.in(1);
  const Tensor *bias = c.has(biasOperand) ? &c.in(biasOperand) : nullptr;
  Tensor acc = matmulRows(x, w, bias, 0, w.shape[0]);
  std::vector<int64_t> shape = x.shape;
  shape.back() = w.shape[0];
  Tensor &y = c.out(0, shape);
  float (*act)(float) = activationOf(c.op);
  double scale = c.op.floatAttr(Attr::Scale, 1.0);
  for (int64_t i = 0; i < acc.numel(); ++i) {
    double v = act ? act(acc.data[i]) : acc.data[i];
    v *= scale;
    if (residual) v += residual->data[i];
    y.data[i] = static_cast<float>(v);
  }
  return llvm::Error::success();
}

llvm::Error evalMatmul(const EvalCtx &c) { return matmulEpilogue(c, 2, nullptr); }
llvm::Error evalMatmulResidual(const EvalCtx &c) { return matmulEpilogue(c, 3, &c.in(2)); }

llvm::Error evalGatedMatmul(const EvalCtx &c) {
  const Tensor &x = c.in(0), &w = c.in(1);
  int64_t n = w.shape[0] / 2;
  Tensor gate = matmulRows(x, w, nullptr, 0, n), up = matmulRows(x, w, nullptr, n, n);
  std::vector<int64_t> shape = x.shape;
  shape.back() = n;
  Tensor &y = c.out(0, shape);
  float (*act)(float) = activationOf(c.op);
  for (int64_t i = 0; i < y.numel(); ++i) y.data[i] = static_cast<float>(static_cast<double>(act(gate.data[i])) * up.data[i]);
  return llvm::Error::success();
}

llvm::Error evalAdd(const EvalCtx &c) { return binary(c, [](float a, float b) { return a + b; }); }
llvm::Error evalMul(const EvalCtx &c) { return binary(c, [](float a, float b) { return a * b; }); }
llvm::Error evalScale(const EvalCtx &c) {
  float f = static_cast<float>(c.op.floatAttr(Attr::Factor));
  return pointwise(c, [f](float x) { return x * f; });
}
llvm::Error evalGeluTanh(const EvalCtx &c) { return pointwise(c, geluTanh); }
llvm::Error evalGeluErf(const EvalCtx &c) { return pointwise(c, geluErf); }
llvm::Error evalSilu(const EvalCtx &c) { return pointwise(c, silu); }
llvm::Error evalRelu(const EvalCtx &c) { return pointwise(c, relu); }

} // namespace

std::vector<double> ropeInverseFrequencies(const Op &op) {
  int64_t hd = op.intAttr(Attr::HeadDim);
  double theta = op.floatAttr(Attr::Theta);
  std::vector<double> inv(hd / 2);
  for (int64_t i = 0; i < hd / 2; ++i) inv[i] = 1.0 / std::pow(theta, static_cast<double>(2 * i) / hd);
  auto schedule = op.enumAttr<RopeSchedule>(Attr::Schedule, RopeSchedule::Default);
  double factor = op.floatAttr(Attr::Factor, 1.0);
  if (schedule == RopeSchedule::Linear) {
    for (double &f : inv) f /= factor;
  } else if (schedule == RopeSchedule::Llama3) {
    // Long wavelengths are slowed by `factor`, short ones kept, and the band between interpolated.
    double low = op.floatAttr(Attr::LowFreqFactor), high = op.floatAttr(Attr::HighFreqFactor);
    double oldLen = static_cast<double>(op.intAttr(Attr::OriginalMaxPos));
    double lowWavelen = oldLen / low, highWavelen = oldLen / high;
    for (double &f : inv) {
      double wavelen = 2 * M_PI / f;
      if (wavelen > lowWavelen) {
        f /= factor;
      } else if (wavelen >= highWavelen) {
        double smooth = (oldLen / wavelen - low) / (high - low);
        f = (1 - smooth) * f / factor + smooth * f;
      }
    }
  }
  return inv;
}

namespace {

// y = x with each of its `heads` heads rotated at the positions `pos`.
void rotate(const Op &op, const Tensor &x, const Tensor &pos, int64_t heads, bool interleaved, Tensor &y) {
  int64_t hd = op.intAttr(Attr::HeadDim), half = hd / 2;
  std::vector<double> inv = ropeInverseFrequencies(op);
  for (int64_t t = 0; t < x.rows(); ++t) {
    for (int64_t i = 0; i < half; ++i) {
      double angle = pos.data[t] * inv[i], cs = std::cos(angle), sn = std::sin(angle);
      for (int64_t h = 0; h < heads; ++h) {
        int64_t a = h * hd + (interleaved ? 2 * i : i), b = h * hd + (interleaved ? 2 * i + 1 : i + half);
        double xa = x.row(t)[a], xb = x.row(t)[b];
        y.row(t)[a] = static_cast<float>(xa * cs - xb * sn);
        y.row(t)[b] = static_cast<float>(xb * cs + xa * sn);
      }
    }
  }
}

llvm::Error evalRope(const EvalCtx &c) {
  const Tensor &x = c.in(0);
  rotate(c.op, x, c.in(1), c.op.intAttr(Attr::Heads), c.op.enumAttr<RopeStyle>(Attr::Style) == RopeStyle::Interleaved, c.out(0, x.shape));
  return llvm::Error::success();
}

llvm::Error evalQkv(const EvalCtx &c) {
  const Tensor &x = c.in(0), &pos = c.in(1), &w = c.in(2);
  const Tensor *bias = c.has(3) ? &c.in(3) : nullptr;
  int64_t heads = c.op.intAttr(Attr::Heads), kv = c.op.intAttr(Attr::KvHeads), hd = c.op.intAttr(Attr::HeadDim);
  auto rope = c.op.enumAttr<QkvRope>(Attr::Rope);
  int64_t first = 0;
  for (int i = 0; i < 3; ++i) {
    int64_t h = i == 0 ? heads : kv;
    Tensor part = matmulRows(x, w, bias, first, h * hd);
    first += h * hd;
    if (i < 2 && rope != QkvRope::None) {
      rotate(c.op, part, pos, h, rope == QkvRope::Interleaved, c.out(i, part.shape));
      continue;
    }
    c.out(i, {}) = std::move(part);
  }
  return llvm::Error::success();
}

llvm::Error evalSplit(const EvalCtx &c) {
  const Tensor &x = c.in(0);
  std::vector<int64_t> sizes = c.op.intsAttr(Attr::Sizes);
  int64_t offset = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::vector<int64_t> shape = x.shape;
    shape.back() = sizes[i];
    Tensor &y = c.out(i, shape);
    for (int64_t r = 0; r < x.rows(); ++r) std::copy_n(x.row(r) + offset, sizes[i], y.row(r));
    offset += sizes[i];
  }
  return llvm::Error::success();
}

llvm::Error evalAttention(const EvalCtx &c) {
  const Tensor &q = c.in(0), &k = c.in(1), &v = c.in(2);
  int64_t heads = c.op.intAttr(Attr::Heads), kvHeads = c.op.intAttr(Attr::KvHeads), hd = c.op.intAttr(Attr::HeadDim);
  double scale = c.op.floatAttr(Attr::Scale, 1.0 / std::sqrt(static_cast<double>(hd)));
  int64_t group = heads / kvHeads, kvDim = kvHeads * hd, T = q.rows();
  int64_t past = c.s.seq->length;

  // Append this step's keys and values to the layer's cache.
  int64_t slot = c.s.kvSlotBase.lookup(&c.op) + c.s.layer;
  Tensor &kc = c.s.seq->k[slot], &vc = c.s.seq->v[slot];
  auto append = [&](Tensor &cache, const Tensor &src) {
    cache.shape = {past + T, kvDim};
    cache.data.insert(cache.data.end(), src.data.begin(), src.data.end());
  };
  append(kc, k);
  append(vc, v);

  Tensor &y = c.out(0, q.shape);
  std::vector<double> p(past + T);
  for (int64_t t = 0; t < T; ++t) {
    int64_t visible = past + t + 1; // causal: position past+t sees positions 0..past+t
    for (int64_t h = 0; h < heads; ++h) {
      const float *qh = q.row(t) + h * hd;
      int64_t kvOff = (h / group) * hd;
      double maxScore = -INFINITY;
      for (int64_t j = 0; j < visible; ++j) {
        const float *kj = kc.row(j) + kvOff;
        double dot = 0;
        for (int64_t d = 0; d < hd; ++d) dot += static_cast<double>(qh[d]) * kj[d];
        p[j] = dot * scale;
        maxScore = std::max(maxScore, p[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j < visible; ++j) sum += (p[j] = std::exp(p[j] - maxScore));
      for (int64_t d = 0; d < hd; ++d) {
        double acc = 0;
        for (int64_t j = 0; j < visible; ++j) acc += p[j] * vc.row(j)[kvOff + d];
        y.row(t)[h * hd + d] = static_cast<float>(acc / sum);
      }
    }
  }
  return llvm::Error::success();
}

} // namespace

llvm::Error State::run(const Op &op) {
  EvalCtx c{*this, op};
  switch (op.kind) {
#define OP(Id, ...)                                                                                          \
  case OpKind::Id: return eval##Id(c);
#include "ir/Ops.def"
  }
  return c.fail("unknown op kind");
}

Interpreter::Interpreter(std::unique_ptr<State> st) : s(std::move(st)) {}
Interpreter::~Interpreter() = default;

llvm::Expected<std::unique_ptr<Interpreter>> Interpreter::create(const Module &m, const WeightSet &weights,
                                                                 int64_t batch, int64_t maxSeq) {
  if (batch <= 0 || maxSeq <= 0) return makeError("interpreter: batch and max_seq must be positive");
  if (weights.byDecl.size() != m.weights.size())
    return makeError("interpreter: " + llvm::Twine(weights.byDecl.size()) + " weights given, module declares " +
                llvm::Twine(m.weights.size()));
  auto st = std::make_unique<State>(m, weights, maxSeq);
  // Check every weight tensor against its declaration; note each attention op's KV slots.
  std::vector<int64_t> layersOf = m.weightLayerCounts();
  forEachOp(m, [&](const Op &op, int64_t count) {
    if (op.kind == OpKind::Attention) {
      st->kvSlotBase[&op] = st->kvSlots;
      st->kvSlots += count ? count : 1;
    }
  });
  // Packed weights are assembled here from their parts (a WeightSet holds only checkpoint tensors).
  st->packed.resize(m.weights.size());
  for (size_t i = 0; i < m.weights.size(); ++i) {
    const WeightDecl &w = m.weights[i];
    if (!w.packed()) continue;
    for (int64_t l = 0; l < layersOf[i]; ++l) {
      Tensor t;
      for (const Dim &d : w.type.shape) t.shape.push_back(d.value);
      for (int p : w.parts) {
        const std::vector<Tensor> &part = weights.byDecl[p];
        if (part.empty()) return makeError("interpreter: @" + m.weights[p].name + " (a part of @" + w.name + ") is missing");
        const Tensor &src = part.size() == 1 ? part[0] : part[static_cast<size_t>(l)];
        t.data.insert(t.data.end(), src.data.begin(), src.data.end());
      }
      if (t.numel() != static_cast<int64_t>(Tensor::numelOf(t.shape)))
        return makeError("interpreter: the parts of @" + w.name + " do not stack to " + w.type.str());
      st->packed[i].push_back(std::move(t));
    }
  }
  for (size_t i = 0; i < m.weights.size(); ++i) {
    const WeightDecl &w = m.weights[i];
    if (w.packed()) continue;
    if (static_cast<int64_t>(weights.byDecl[i].size()) != layersOf[i])
      return makeError("interpreter: @" + w.name + " needs " + llvm::Twine(layersOf[i]) + " tensor(s), got " +
                  llvm::Twine(weights.byDecl[i].size()));
    for (const Tensor &t : weights.byDecl[i]) {
      bool same = t.shape.size() == w.type.shape.size();
      for (size_t d = 0; same && d < t.shape.size(); ++d) same = t.shape[d] == w.type.shape[d].value;
      if (!same) return makeError("interpreter: @" + w.name + " tensor does not have the declared shape " + w.type.str());
    }
  }
  st->vocab = *m.value(m.outputs[0]).type.lastDim();
  st->seqs.resize(batch);
  for (auto &seq : st->seqs) {
    seq.k.resize(st->kvSlots);
    seq.v.resize(st->kvSlots);
  }
  st->env.resize(m.values.size());
  return std::unique_ptr<Interpreter>(new Interpreter(std::move(st)));
}

llvm::Expected<Tensor> Interpreter::step(int64_t seqIdx, llvm::ArrayRef<int32_t> tokens) {
  if (seqIdx < 0 || seqIdx >= batch())
    return makeError("sequence " + llvm::Twine(seqIdx) + " is outside the batch of " + llvm::Twine(batch()));
  if (tokens.empty()) return makeError("a step needs at least one token");
  State::Sequence &seq = s->seqs[seqIdx];
  int64_t T = static_cast<int64_t>(tokens.size());
  if (seq.length + T > s->maxSeq)
    return makeError("sequence " + llvm::Twine(seqIdx) + " would hold " + llvm::Twine(seq.length + T) +
                " tokens, more than max_seq " + llvm::Twine(s->maxSeq));

  const Module &m = s->m;
  s->seq = &seq;
  s->layer = 0;
  for (ValueId id : m.inputs) {
    Tensor &t = s->env[id] = Tensor({T});
    for (int64_t i = 0; i < T; ++i)
      t.data[i] = m.value(id).name == "tokens" ? static_cast<float>(tokens[i]) : static_cast<float>(seq.length + i);
  }
  for (const Item &item : m.items) {
    if (const Op *op = std::get_if<Op>(&item)) {
      if (auto e = s->run(*op)) return e;
      continue;
    }
    const Repeat &r = std::get<Repeat>(item);
    for (size_t i = 0; i < r.carried.size(); ++i) s->env[r.carried[i]] = s->env[r.inits[i]];
    for (s->layer = 0; s->layer < r.count.value; ++s->layer) {
      for (const Op &op : r.body)
        if (auto e = s->run(op)) return e;
      for (size_t i = 0; i < r.carried.size(); ++i) s->env[r.carried[i]] = s->env[r.yields[i]];
    }
    s->layer = 0;
    for (size_t i = 0; i < r.carried.size(); ++i) s->env[r.results[i]] = s->env[r.carried[i]];
  }
  seq.length += T;
  return s->env[m.outputs[0]];
}

llvm::Expected<std::vector<Tensor>> evalOp(const Module &m, const Op &op, llvm::ArrayRef<const Tensor *> operands,
                                           KvCache *cache) {
  if (operands.size() != op.operands.size())
    return m.error(op.loc, "evalOp: " + llvm::Twine(operands.size()) + " operands given, the op has " +
                               llvm::Twine(op.operands.size()));
  WeightSet none;
  State st(m, none, INT64_MAX);
  st.env.resize(m.values.size());
  State::Sequence seq;
  if (op.kind == OpKind::Attention) {
    if (!cache) return m.error(op.loc, "evalOp: attention needs a KV cache");
    st.kvSlotBase[&op] = 0;
    seq.k = {std::move(cache->k)};
    seq.v = {std::move(cache->v)};
    seq.length = seq.k[0].data.empty() ? 0 : seq.k[0].rows();
  }
  st.seq = &seq;
  EvalCtx c{st, op, operands};
  llvm::Error e = llvm::Error::success();
  switch (op.kind) {
#define OP(Id, ...)                                                                                          \
  case OpKind::Id: e = eval##Id(c); break;
#include "ir/Ops.def"
  }
  if (op.kind == OpKind::Attention) {
    cache->k = std::move(seq.k[0]);
    cache->v = std::move(seq.v[0]);
  }
  if (e) return e;
  std::vector<Tensor> out;
  for (ValueId r : op.results) out.push_back(std::move(st.env[r]));
  return out;
}

int64_t Interpreter::length(int64_t seq) const { return s->seqs[seq].length; }
int64_t Interpreter::batch() const { return static_cast<int64_t>(s->seqs.size()); }
int64_t Interpreter::vocab() const { return s->vocab; }

void Interpreter::reset(int64_t seq) {
  State::Sequence &sq = s->seqs[seq];
  sq.length = 0;
  for (Tensor &t : sq.k) t = Tensor();
  for (Tensor &t : sq.v) t = Tensor();
}

namespace {
int32_t argmax(const float *row, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (row[i] > row[best]) best = i;
  return static_cast<int32_t>(best);
}
} // namespace

llvm::Expected<GreedyResult> generateGreedy(Interpreter &interp, llvm::ArrayRef<std::vector<int32_t>> prompts,
                                            int64_t maxNew, std::optional<int32_t> eos,
                                            llvm::function_ref<bool(int64_t, int32_t)> onToken) {
  GreedyResult out;
  int64_t vocab = interp.vocab();
  for (size_t seq = 0; seq < prompts.size(); ++seq) {
    auto logits = interp.step(static_cast<int64_t>(seq), prompts[seq]);
    if (!logits) return logits.takeError();
    Tensor rows = std::move(*logits);
    std::vector<int32_t> generated;
    while (static_cast<int64_t>(generated.size()) < maxNew) {
      int32_t next = argmax(rows.row(rows.rows() - 1), vocab);
      generated.push_back(next);
      bool go = !onToken || onToken(static_cast<int64_t>(seq), next);
      if (!go || (eos && next == *eos) || static_cast<int64_t>(generated.size()) == maxNew) break;
      auto stepLogits = interp.step(static_cast<int64_t>(seq), {next});
      if (!stepLogits) return stepLogits.takeError();
      rows.data.insert(rows.data.end(), stepLogits->data.begin(), stepLogits->data.end());
      rows.shape = {rows.rows(), vocab}; // rows() counts the appended row
    }
    out.tokens.push_back(std::move(generated));
    out.logits.push_back(std::move(rows));
  }
  return out;
}

} // namespace minfer::ir
