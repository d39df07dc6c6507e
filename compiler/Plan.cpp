// compiler/Plan.cpp — lowering a verified module to the launches of a prefill and of a decode step.
// (Over 650 lines: one class, Lowering, whose per-op cases share its buffer and binding helpers; the plan
// JSON is in PlanJson.cpp.)
//
// One op becomes one launch (attention: a KV write and the attention kernel; split: one copy writing every
// part), fused ops included: matmul, matmul_residual, gated_matmul and qkv
// are one gemm or gemv each with the matching epilogue (a qkv's k and v go straight into the KV cache of the
// attention that reads them, which then skips its KV write). In decode, a norm marked `fold = decode` gets no
// launch where gemvFoldsNorm says so (up to 2 rows; RMS norms up to 16 rows on sm_90a): the gemvs that read
// it normalise in their prologue. On sm_90a an RMS norm read only by matmuls has its gamma multiplied into
// their weights at load (PlanOptions::gainsInWeights, PlanBuffer::gains); with PlanOptions::gemmFoldsNorm the
// wgmma gemms (128 rows and more) scale each row by its 1 / rms, so the norm has no launch in prefill
// either. Decode matmuls at a batch of up to kGemvMaxRows (16) use the GEMV template, everything else the
// tensor-core GEMM; a tile comes from the tuning database when it has one (PlanOptions::tuning), else from
// the heuristic. Matmul weights and biases are read as bf16, converted at load when the checkpoint stores
// another type, packed and reordered as the epilogue reads them (rowOrder).
#include "compiler/Plan.h"

#include "compiler/MemoryPlanner.h"
#include "compiler/Tuning.h"
#include "compiler/kernels/Attention.h"
#include "compiler/kernels/Epilogue.h"
#include "compiler/kernels/Gemm.h"
#include "compiler/kernels/Gemv.h"
#include "compiler/kernels/RowOps.h"
#include "compiler/kernels/Split.h"
#include "ir/Diagnostics.h"
#include "ir/Limits.h"
#include "ir/Interpreter.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MathExtras.h"

#include <cassert>
#include <cmath>

namespace minfer {

namespace {

PlanBuffer named(std::string name, BufferKind kind, int64_t bytesPerRow = 0) {
  PlanBuffer b;
  b.name = std::move(name);
  b.kind = kind;
  b.bytesPerRow = bytesPerRow;
  return b;
}

// Buffers both phases share: weights, KV caches, constants and step inputs, by name.
struct SharedBuffers {
  std::map<std::string, int> byName;
};

class Lowering {
public:
  Lowering(const ir::Module &m, Plan &plan, PhasePlan &phase, bool decode, SharedBuffers &shared)
      : m(m), plan(plan), phase(phase), decode(decode), shared(shared) {}

  llvm::Error run();

private:
  using V = ParamValue;
  // One field of a kernel's Params, by name, and its value.
  struct Field {
    const char *name;
    ParamValue value;
  };

  // The index of `spec` in the plan's kernels (added once). A spec that breaks its template's rules is
  // reported at the op being lowered (lowerChecked).
  int kernel(std::shared_ptr<KernelSpec> spec) {
    if (llvm::Error e = spec->validate(plan.target))
      if (!specProblem) specProblem = llvm::toString(std::move(e));
    std::string n = spec->name();
    auto it = plan.kernelIndex.find(n);
    if (it != plan.kernelIndex.end()) return it->second;
    plan.kernels.push_back(std::move(spec));
    return plan.kernelIndex[n] = static_cast<int>(plan.kernels.size() - 1);
  }
  int buffer(PlanBuffer b) {
    plan.buffers.push_back(std::move(b));
    return static_cast<int>(plan.buffers.size() - 1);
  }
  // A fresh activation for value `v` (one per layer instance), live from the next launch on.
  int define(ir::ValueId v, int64_t cols) {
    std::string n = "%" + m.value(v).name + (layer >= 0 ? "@" + std::to_string(layer) : "");
    auto pin = pinned.find(v);
    int b = pin != pinned.end() ? pin->second : buffer(named(n, BufferKind::Activation, cols * 2));
    live[b] = {static_cast<int>(phase.launches.size()), static_cast<int>(phase.launches.size())};
    env[v] = b;
    return b;
  }
  int use(ir::ValueId v) {
    int b = env.lookup(v);
    if (live.count(b)) live[b].second = static_cast<int>(phase.launches.size());
    return b;
  }
  // The buffer named `b.name` if either phase made it already, else `b`.
  int sharedBuffer(PlanBuffer b) {
    auto it = shared.byName.find(b.name);
    if (it != shared.byName.end()) {
      PlanBuffer &have = plan.buffers[it->second];
      have.fixedBytes = std::max(have.fixedBytes, b.fixedBytes); // e.g. workspaces of differing attention ops
      return it->second;
    }
    std::string name = b.name;
    return shared.byName[name] = buffer(std::move(b));
  }
  // Weight `o` of the current layer as the kernel reads it: `dtype` (matmul weights and biases are bf16,
  // converted at load when the checkpoint has another type; a second name keeps both when both are read),
  // its rows in `layout`'s order (a fused epilogue's; `epi` gives the rope pairs' geometry).
  int weight(const ir::Operand &o, std::optional<ir::DType> dtype = std::nullopt,
             PlanBuffer::Layout layout = PlanBuffer::Layout::AsIs, const Epilogue &epi = {}) {
    const ir::WeightDecl &w = m.weights[o.id];
    ir::DType dt = dtype.value_or(w.type.dtype);
    int64_t l = w.perLayer() ? layer : 0;
    std::string n = "@" + w.name + (w.perLayer() ? "@" + std::to_string(l) : "") +
                    (dt != w.type.dtype ? ":" + ir::dtypeName(dt).str() : "") +
                    (layout == PlanBuffer::Layout::RopePairs ? ":rope_pairs"
                     : layout == PlanBuffer::Layout::GateUp  ? ":gate_up"
                                                             : "");
    PlanBuffer b = named(n, BufferKind::Weight);
    b.layout = layout;
    if (layout == PlanBuffer::Layout::RopePairs) {
      b.layoutHeadDim = epi.headDim;
      b.layoutRows = int64_t(epi.heads + epi.kvHeads) * epi.headDim; // q and k rows; v stays as it is
    }
    b.weight = o.id;
    b.layer = l;
    b.dtype = dt;
    b.transposed = w.transposed;
    int64_t numel = 1;
    for (const ir::Dim &d : w.type.shape) numel *= d.value;
    b.fixedBytes = numel * static_cast<int64_t>(ir::dtypeSize(dt));
    return sharedBuffer(std::move(b));
  }
  // `spec` with its tuned tile for this phase's rows when the tuning database has one, else as it is (the
  // heuristic default); the plan records which. An entry whose winner was the default of its time, where
  // the default has moved since, gives the current default (TuningEntry::keepsDefault).
  std::shared_ptr<KernelSpec> tuned(std::shared_ptr<KernelSpec> spec, bool decodePhase, int64_t rows) {
    std::string key = spec->tuningKey();
    if (key.empty()) return spec;
    if (plan.options.tuning)
      if (const TuningEntry *e = plan.options.tuning->find(key, tuningBucket(decodePhase, rows));
          e && !e->keepsDefault(spec->tileName()))
        if (auto t = spec->withTile(e->tile, plan.target)) {
          plan.tileSource[t->name()] = "tuned";
          plan.tunedTiles[TuningDb::entryKey(key, tuningBucket(decodePhase, rows))] = e->tile;
          return t;
        }
    plan.tileSource.emplace(spec->name(), "default");
    return spec;
  }
  // A matmul weight (or bias) as bf16, its rows in the order the epilogue reads them.
  int matmulWeight(const ir::Operand &o, PlanBuffer::Layout layout = PlanBuffer::Layout::AsIs, const Epilogue &epi = {}) {
    return weight(o, ir::DType::BF16, layout, epi);
  }
  // The K or V cache of attention op `attn` in the current layer.
  int kvCache(const ir::Op &attn, bool isV) {
    int kvHeads = static_cast<int>(attn.intAttr(ir::Attr::KvHeads)), headDim = static_cast<int>(attn.intAttr(ir::Attr::HeadDim));
    int slot = kvSlotBase.lookup(&attn) + static_cast<int>(std::max<int64_t>(layer, 0));
    PlanBuffer b = named(std::string(isV ? "v_cache" : "k_cache") + "@" + std::to_string(slot), BufferKind::KvCache);
    b.kvSlot = slot;
    b.isValue = isV;
    b.layer = layer;
    b.fixedBytes = plan.options.maxBatch * plan.options.maxSeq * kvHeads * headDim * 2;
    return sharedBuffer(std::move(b));
  }
  // The rope inverse frequencies of a rope (or roping qkv) op: one table per op, shared by every layer.
  int ropeTable(const ir::Op &op) {
    PlanBuffer table = named("inv_freq:%" + m.value(op.results[0]).name, BufferKind::Constant);
    for (double f : ir::ropeInverseFrequencies(op)) table.constant.push_back(static_cast<float>(f));
    table.fixedBytes = static_cast<int64_t>(table.constant.size() * 4);
    return sharedBuffer(std::move(table));
  }
  // The rotation table of a roping qkv op (its epilogue's EpiParams::rope): one per op, shared by every layer.
  int rotationTable(const ir::Op &op) {
    PlanBuffer table = named("rope_table:%" + m.value(op.results[0]).name, BufferKind::Constant);
    table.rotation = ir::ropeInverseFrequencies(op);
    table.fixedBytes = plan.options.maxSeq * static_cast<int64_t>(table.rotation.size()) * 2 * 4;
    return sharedBuffer(std::move(table));
  }
  // The attention op that reads `v` (nullptr when none or several ops do).
  const ir::Op *attentionReading(ir::ValueId v) const {
    auto it = readers.find(v);
    if (it == readers.end() || it->second.size() != 1 || it->second[0]->kind != ir::OpKind::Attention) return nullptr;
    return it->second[0];
  }
  bool fromQkv(ir::ValueId v) const {
    auto it = producer.find(v);
    return it != producer.end() && it->second->kind == ir::OpKind::Qkv;
  }
  // A norm marked `fold = decode` is folded in decode when gemvFoldsNorm says so for this batch and every
  // reader is a matmul-family op reading it as its input and lowers to a gemv (which has the prologue);
  // otherwise it gets its own launch.
  bool foldable(const ir::Op &norm) const {
    if (gemmFolds(norm)) return true;
    if (!gemvPhase() || !norm.has(ir::Attr::Fold)) return false;
    Prologue::Kind kind = norm.kind == ir::OpKind::LayerNorm ? Prologue::Kind::Layer : Prologue::Kind::Rms;
    if (!gemvFoldsNorm(plan.target, gemvRows(), kind)) return false;
    ir::ValueId y = norm.results[0];
    auto it = readers.find(y);
    if (it == readers.end() || yielded.count(y)) return false;
    if (!llvm::all_of(it->second, [&](const ir::Op *r) { return ir::readsAsMatmulInput(*r, y); })) return false;
    // A LayerNorm keeps the FMA gemv, the only one with its prologue. Where a reader would otherwise be the wgmma
    // gemv (a large W on sm_90a: GPT-2's lm_head, 77 MB; the larger GPT-2s' layer matmuls), the norm launches
    // instead, but for the lm_head at one row (H200, session 37, untuned: with the final norm folded into the
    // head's FMA gemv at 4 rows a warp, GPT-2's one-row step took 0.9% and 0.2% less in two calls and one launch
    // fewer; its 2-row step 3.0% longer). The layer matmuls of the larger GPT-2s were not measured folded.
    const bool headAtOneRow = gemvRows() == 1 && it->second.size() == 1 && it->second[0]->results[0] == m.outputs[0];
    if (kind == Prologue::Kind::Layer && !headAtOneRow)
      for (const ir::Op *r : it->second) {
        const ir::WeightDecl &w = m.weights[r->operands[weightOperand(*r)].id];
        GemvTile plain =
            defaultGemvTile(plan.target, gemvRows(), w.type.shape[0].value, w.type.shape[1].value, 0, Prologue::Kind::None);
        if (plain.wgmma) return false;
      }
    return true;
  }
  // The rows the matmuls lowered now cover at most: decode's batch; after the prefill's gather, in the
  // variant for a few output rows, kGemvMaxRows; else the prefill's rows.
  int64_t gemvRows() const {
    return decode ? plan.options.maxBatch : fewOutRows ? kGemvMaxRows : plan.options.maxPrefillRows;
  }
  // Whether they lower to gemv kernels (up to kGemvMaxRows rows).
  bool gemvPhase() const { return (decode || fewOutRows) && gemvRows() <= kGemvMaxRows; }
  // PlanOptions::gemmFoldsNorm: the gemms of this phase are wgmma kernels (the default from 128 rows on
  // sm_90a; a tuned tile of a spec with row squares is wgmma too, as only those take them) and some norm's
  // gains ride in W: the residual gemms write their rows' squares.
  bool gemmRowSquares() const {
    if (!plan.options.gemmFoldsNorm || gainsInW.empty() || gemvPhase()) return false;
    int64_t rows = decode ? plan.options.maxBatch : plan.options.maxPrefillRows;
    return defaultGemmTile(plan.target, rows, 1, 64).wgmma;
  }
  // A norm whose gains ride in W is folded into the gemms that read it where its input's rows' squares were
  // written by the gemm that stored it (rowSquaresOf).
  bool gemmFolds(const ir::Op &norm) const {
    if (!gainsInW.count(&norm) || !gemmRowSquares()) return false;
    auto x = env.find(norm.operands[0].id);
    return x != env.end() && rowSquaresOf.count(x->second) > 0;
  }
  // A buffer of `bytesPerRow` in the phase's arena that no IR value names (a gemm's row squares), live from
  // the next launch; `reads` extends it to the launch being lowered.
  int scratchActivation(const std::string &name, int64_t bytesPerRow) {
    int b = buffer(named(name + (layer >= 0 ? "@" + std::to_string(layer) : ""), BufferKind::Activation, bytesPerRow));
    live[b] = {static_cast<int>(phase.launches.size()), static_cast<int>(phase.launches.size())};
    return b;
  }
  void reads(int b) { live[b].second = static_cast<int>(phase.launches.size()); }
  // The weight operand of a matmul-family op.
  static size_t weightOperand(const ir::Op &op) { return op.kind == ir::OpKind::Qkv ? 2 : 1; }
  // PlanOptions::gainsInWeights: the RMS norms whose gamma goes into the columns of the weights of the
  // matmuls reading them. Each such weight (and each part of a packed one) and the gamma must be read by
  // that op alone, so that nothing else sees the scaled values.
  void findGainsInWeights() {
    if (!plan.fused || !plan.options.gainsInWeights || !plan.target.hasWgmma()) return;
    std::map<int, int> uses; // weight -> ops reading it, a packed weight's parts counted as reads of each
    ir::forEachOp(m, [&](const ir::Op &op, int64_t) {
      for (const ir::Operand &o : op.operands) {
        if (!o.isWeight) continue;
        ++uses[o.id];
        for (int part : m.weights[o.id].parts) ++uses[part];
      }
    });
    auto once = [&](int w) {
      if (uses[w] != 1) return false;
      return llvm::all_of(m.weights[w].parts, [&](int part) { return uses[part] == 1; });
    };
    ir::forEachOp(m, [&](const ir::Op &op, int64_t) {
      if (op.kind != ir::OpKind::RmsNorm || !op.operands[1].isWeight || !once(op.operands[1].id)) return;
      ir::ValueId y = op.results[0];
      auto it = readers.find(y);
      if (it == readers.end() || yielded.count(y)) return;
      if (llvm::all_of(it->second, [&](const ir::Op *r) {
            return ir::readsAsMatmulInput(*r, y) && once(r->operands[weightOperand(*r)].id);
          }))
        gainsInW.insert(&op);
    });
  }
  // A norm kernel's gamma where the gains ride in W: `dim` fp32 ones, shared by every such norm.
  int unitGains(int64_t dim) {
    PlanBuffer b = named("unit_gains:" + std::to_string(dim), BufferKind::Constant);
    b.fill = 1.f;
    b.fixedBytes = dim * 4;
    return sharedBuffer(std::move(b));
  }
  // A step input (i32 per row), shared by both phases, recorded in plan.io by its role.
  int input(const std::string &name) {
    int b = sharedBuffer(named(name, BufferKind::Input, 4));
    Plan::StepBuffers &io = plan.io;
    for (auto [role, slot] : {std::pair<const char *, int *>{"tokens", &io.tokens}, {"positions", &io.positions},
                              {"seq_of", &io.seqOf}, {"context_len", &io.contextLen}, {"out_rows", &io.outRows}})
      if (name == role) *slot = b;
    return b;
  }
  // A launch of kernel `k` with `fields` bound by name in its Params (a name the Params lacks is reported
  // at the op being lowered, like an invalid spec); after the prefill's gather its grid covers the output rows.
  PlannedLaunch call(int k, std::vector<Field> fields, LaunchRole role = LaunchRole::Op) {
    PlannedLaunch l;
    l.kernel = k;
    l.role = role;
    l.layer = layer;
    l.overOutRows = gathered;
    const ParamsLayout &params = plan.kernels[k]->params();
    for (Field &f : fields) {
      int index = params.find(f.name);
      if (index < 0 && !specProblem)
        specProblem = plan.kernels[k]->name() + " has no parameter '" + f.name + "' (" + params.name + ")";
      l.params.push_back(ParamBinding{index, std::move(f.value)});
    }
    return l;
  }
  void emit(int k, std::vector<Field> fields, const ir::Op &op, bool perSequence = false) {
    PlannedLaunch l = call(k, std::move(fields));
    l.op = "%" + m.value(op.results[0]).name + " = " + op.info().mnemonic.str();
    l.perSequence = perSequence;
    phase.launches.push_back(std::move(l));
  }
  static V buf(int b) {
    V v;
    v.buffer = b;
    return v;
  }
  static V of(V::Kind kind) {
    V v;
    v.kind = kind;
    return v;
  }
  static V integer(int64_t i) {
    V v = of(V::Int);
    v.i = i;
    return v;
  }
  static V real(double f) {
    V v = of(V::Float);
    v.f = f;
    return v;
  }
  // After the prefill's gather, the ops that follow the layers see only the gathered rows.
  V rows() const { return of(gathered ? V::OutRows : V::Rows); }

  int64_t cols(ir::ValueId v) const { return *m.value(v).type.lastDim(); }
  const ir::Value &operandValue(const ir::Op &op, size_t i) const { return m.value(op.operands[i].id); }

  llvm::Error lower(const ir::Op &op);
  llvm::Error lowerChecked(const ir::Op &op) {
    if (auto e = lower(op)) return e;
    if (specProblem) return m.error(op.loc, "no valid kernel for '" + op.info().mnemonic + "': " + *specProblem);
    return llvm::Error::success();
  }
  llvm::Error lowerMatmul(const ir::Op &op);
  llvm::Error lowerAttention(const ir::Op &op);
  void gatherOutputRows(const ir::Repeat &r);
  llvm::Error lowerAfterGather(size_t from);
  // Whether the items from `from` on (after the prefill's gather) are lowered twice: plain ops, a matmul
  // among them, in a fused module, on a target with the wgmma gemv (which folds an RMS norm at 16 rows).
  bool lowersTwiceAfterGather(size_t from) const {
    if (!plan.fused || !plan.target.hasWgmma()) return false;
    bool matmul = false;
    for (size_t i = from; i < m.items.size(); ++i) {
      const ir::Op *op = std::get_if<ir::Op>(&m.items[i]);
      if (!op) return false;
      matmul |= ir::isMatmulFamily(op->kind);
    }
    return matmul;
  }
  void emitDecodeTail();

  const ir::Module &m;
  Plan &plan;
  PhasePlan &phase;
  bool decode;
  int64_t layer = -1;
  int kvSlot = 0;
  llvm::DenseMap<ir::ValueId, int> env;
  std::map<int, std::pair<int, int>> live; // activation buffer -> [first, last] launch
  SharedBuffers &shared;
  std::optional<std::string> specProblem; // the first spec that failed validation in the current op
  bool argmaxFused = false; // decode: the lm_head's gemv folds the argmax (EpiArgmax)
  bool gathered = false; // prefill, after the layers: launches run over the gathered output rows
  bool fewOutRows = false; // lowering the ops after the gather for at most kGemvMaxRows output rows
  llvm::DenseMap<ir::ValueId, int> pinned; // a value's buffer, given before it is defined (the logits)
  llvm::DenseMap<const ir::Op *, int> kvSlotBase;
  llvm::DenseMap<ir::ValueId, std::vector<const ir::Op *>> readers; // every op reading each value
  llvm::DenseMap<ir::ValueId, const ir::Op *> producer;              // the op defining each value
  std::set<ir::ValueId> yielded;                                     // yielded by a repeat or returned
  llvm::DenseMap<ir::ValueId, const ir::Op *> folded; // a folded norm's result -> the norm
  std::set<const ir::Op *> gainsInW; // the RMS norms whose gamma rides in W (findGainsInWeights)
  struct RowSquares {
    int buffer = -1;
    int64_t parts = 0;
  };
  std::map<int, RowSquares> rowSquaresOf; // an activation -> its rows' squares, written by the gemm storing it
};

// matmul, matmul_residual, gated_matmul and qkv: one gemm (prefill, large decode batches) or gemv launch
// whose epilogue does the rest; a folded norm of the input becomes the gemv's prologue (decode), or the
// wgmma gemm's row scale where its gains ride in W.
llvm::Error Lowering::lowerMatmul(const ir::Op &op) {
  using ir::OpKind;
  size_t wi = weightOperand(op);
  size_t bi = op.kind == OpKind::MatmulResidual ? 3 : op.kind == OpKind::Qkv ? 3 : 2; // the bias operand
  int64_t n = m.weights[op.operands[wi].id].type.shape[0].value;
  int64_t k = m.weights[op.operands[wi].id].type.shape[1].value;
  bool bias = op.operands.size() > bi && op.kind != OpKind::GatedMatmul;
  EpilogueArgs ea;
  Epilogue epi;
  PlanBuffer::Layout layout = PlanBuffer::Layout::AsIs;
  if (op.kind == OpKind::GatedMatmul) {
    epi = Epilogue::gated(op.enumAttr<Activation>(ir::Attr::Act));
    layout = PlanBuffer::Layout::GateUp;
  } else if (op.kind == OpKind::Qkv) {
    auto rope = op.enumAttr<QkvRope>(ir::Attr::Rope);
    epi = Epilogue::qkv(static_cast<int>(op.intAttr(ir::Attr::Heads)), static_cast<int>(op.intAttr(ir::Attr::KvHeads)),
                        static_cast<int>(op.intAttr(ir::Attr::HeadDim)), rope, bias);
    if (rope == QkvRope::Half) layout = PlanBuffer::Layout::RopePairs;
  } else {
    epi = Epilogue::pointwise(bias, op.enumAttr<Activation>(ir::Attr::Act), op.kind == OpKind::MatmulResidual,
                              op.has(ir::Attr::Scale));
    ea.scale = op.floatAttr(ir::Attr::Scale, 1.0);
  }

  // A folded norm of the input: its gamma (and beta) and eps go to the gemv's prologue, its input is A;
  // where its gains ride in W, the prologue has none and W's buffer multiplies them in at load.
  ir::ValueId xv = op.operands[0].id;
  auto fold = folded.find(xv);
  bool useGemv = gemvPhase();
  assert((fold == folded.end() || useGemv || gainsInW.count(fold->second)) &&
         "a norm is folded into gemv kernels, or into gemms with its gains in W");
  Prologue pro;
  int x, gains = -1;
  if (fold != folded.end()) {
    const ir::Op &norm = *fold->second;
    x = use(norm.operands[0].id);
    ea.eps = norm.floatAttr(ir::Attr::Eps);
    if (gainsInW.count(&norm)) {
      pro = Prologue::rmsUnitGain();
      gains = weight(norm.operands[1]);
      if (!useGemv) { // the squares of x's rows, from the gemm that stored x
        const RowSquares &sq = rowSquaresOf.at(x);
        pro = Prologue::rmsRowSquares();
        ea.rowSq = sq.buffer;
        ea.rowSqParts = sq.parts;
        reads(sq.buffer);
      }
    } else {
      pro.kind = norm.kind == OpKind::LayerNorm ? Prologue::Kind::Layer : Prologue::Kind::Rms;
      pro.weights = m.weights[norm.operands[1].id].type.dtype;
      ea.gamma = weight(norm.operands[1]);
      if (norm.kind == OpKind::LayerNorm) ea.beta = weight(norm.operands[2]);
    }
  } else {
    x = use(xv);
  }

  std::shared_ptr<KernelSpec> spec;
  int64_t rowsHint = gemvRows();
  if (useGemv) {
    GemvTile tile = defaultGemvTile(plan.target, rowsHint, n, k, 0, pro.kind);
    if (epi.pairs() && tile.fma() && tile.rowsPerWarp % 2) tile.rowsPerWarp = std::min(tile.rowsPerWarp * 2, 8);
    // Greedy decode: the logits' gemv also folds each row's argmax, so the step needs no argmax launch. The
    // FMA and wgmma kernels do it, on the plain product, in a fused module (--no-fuse keeps one kernel per
    // op); a tuned tile that cannot take it (the mma.sync kernel) is refused by the spec, leaving this default.
    if (decode && plan.fused && op.results[0] == m.outputs[0] && op.kind == OpKind::Matmul && epi == Epilogue::None &&
        !tile.mma) {
      epi.argmax = true;
      PlanBuffer keys = named("argmax_keys", BufferKind::Workspace);
      keys.fixedBytes = plan.options.maxBatch * 8;
      keys.zeroed = true;
      ea.argmax = sharedBuffer(std::move(keys));
      argmaxFused = true;
    }
    spec = std::make_shared<GemvSpec>(n, k, epi, tile, pro);
  } else {
    // A norm folded across two gemms: the residual gemm writes its rows' squares for the one after it.
    if (op.kind == OpKind::MatmulResidual && gemmRowSquares() && n % 2 == 0 && !pro.rowSquares) epi.rowSquares = true;
    auto gemm = std::make_shared<GemmSpec>(n, k, epi, defaultGemmTile(plan.target, rowsHint, n, k), pro);
    gemm->smCount = plan.target.nominalSmCount();
    spec = std::move(gemm);
  }
  spec = tuned(std::move(spec), decode || fewOutRows, rowsHint); // a few output rows: the decode bucket of as many
  int w = matmulWeight(op.operands[wi], layout, epi);
  if (gains >= 0) plan.buffers[w].gains = gains;
  if (bias) ea.bias = matmulWeight(op.operands[bi], layout, epi);
  if (op.kind == OpKind::MatmulResidual) ea.residual = use(op.operands[2].id);
  if (op.kind == OpKind::Qkv) {
    // q to an activation; k and v into the KV caches of the attention that reads them.
    const ir::Op *attn = attentionReading(op.results[1]);
    if (!attn || attentionReading(op.results[2]) != attn)
      return m.error(op.loc, "qkv's k and v must feed one attention op (its kernel writes them into that op's KV cache)");
    ea.kCache = kvCache(*attn, false);
    ea.vCache = kvCache(*attn, true);
    ea.positions = input("positions");
    ea.seqOf = input("seq_of");
    ea.maxSeq = plan.options.maxSeq;
    if (epi.rope != QkvRope::None) ea.rope = rotationTable(op);
  }
  // The residual stream's rows' squares for a norm the next gemm folds, a partial per tile of columns.
  RowSquares squares;
  if (epi.rowSquares) {
    squares.parts = llvm::divideCeil(n, static_cast<const GemmSpec &>(*spec).tile.bn);
    squares.buffer = scratchActivation("%" + m.value(op.results[0]).name + ":row_squares", squares.parts * 4);
    ea.rowSq = squares.buffer;
    ea.rowSqParts = squares.parts;
  }
  int y = define(op.results[0], epi.outCols(n));
  if (epi.rowSquares) rowSquaresOf[y] = squares;
  V epiValue = of(V::Epilogue);
  epiValue.epi = ea;
  emit(kernel(spec), {{"C", buf(y)}, {"A", buf(x)}, {"W", buf(w)}, {"rows", rows()}, {"epi", epiValue}}, op);
  return llvm::Error::success();
}

llvm::Error Lowering::lowerAttention(const ir::Op &op) {
  int heads = static_cast<int>(op.intAttr(ir::Attr::Heads)), kvHeads = static_cast<int>(op.intAttr(ir::Attr::KvHeads));
  int headDim = static_cast<int>(op.intAttr(ir::Attr::HeadDim));
  double scale = op.floatAttr(ir::Attr::Scale, 1.0 / std::sqrt(static_cast<double>(headDim)));
  int kc = kvCache(op, false), vc = kvCache(op, true);
  if (!fromQkv(op.operands[1].id)) { // a qkv op wrote k and v into the caches already
    int k = use(op.operands[1].id), v = use(op.operands[2].id);
    int seqOf = input("seq_of"), posOf = input("positions");
    emit(kernel(std::make_shared<KvWriteSpec>(kvHeads, headDim)),
         {{"k", buf(k)},
          {"v", buf(v)},
          {"k_cache", buf(kc)},
          {"v_cache", buf(vc)},
          {"seq_of", buf(seqOf)},
          {"pos_of", buf(posOf)},
          {"rows", rows()},
          {"max_seq", integer(plan.options.maxSeq)}},
         op);
  }
  int q = use(op.operands[0].id); // live up to the attention launch, which `out` must not overlap
  int out = define(op.results[0], int64_t(heads) * headDim);
  if (!decode) {
    // Once per sequence: the runtime offsets q, out and the caches to the sequence, and gives its rows and
    // start position (its tokens already in the cache).
    std::shared_ptr<KernelSpec> spec =
        tuned(std::make_shared<AttentionPrefillSpec>(AttentionPrefillSpec::forTarget(heads, kvHeads, headDim, plan.target)),
              false, plan.options.maxPrefillRows);
    emit(kernel(spec),
         {{"q", buf(q)},
          {"k_cache", buf(kc)},
          {"v_cache", buf(vc)},
          {"out", buf(out)},
          {"rows", rows()},
          {"start_pos", of(V::SequenceStart)},
          {"scale", real(scale)}},
         op, /*perSequence=*/true);
    return llvm::Error::success();
  }
  // Its warps tuned where the session's contexts are one chunk (AttentionDecodeSpec::tuningKey); the split, and
  // so the workspace below, is forSession's either way.
  auto dec = std::static_pointer_cast<AttentionDecodeSpec>(
      tuned(std::make_shared<AttentionDecodeSpec>(AttentionDecodeSpec::forSession(
                heads, kvHeads, headDim, plan.options.maxSeq, plan.options.maxBatch, plan.target.nominalSmCount())),
            true, plan.options.maxBatch));
  // The split partials: [B, heads, splits, head_dim] fp32 outputs and [B, heads, splits] fp32 log-sum-exps,
  // scratch of this step only, so every layer shares them; and the chunks' arrival counters, zero from the
  // start and left zero by the kernel, shared too (one layer's attention ends before the next one's starts).
  int64_t lseOffset = static_cast<int64_t>(dec->partialLseOffset(plan.options.maxBatch, plan.options.maxSeq));
  PlanBuffer partOut = named("attn_partial_out", BufferKind::Workspace);
  partOut.fixedBytes = lseOffset;
  PlanBuffer partLse = named("attn_partial_lse", BufferKind::Workspace);
  partLse.fixedBytes = static_cast<int64_t>(dec->workspaceBytes(plan.options.maxBatch, plan.options.maxSeq)) - lseOffset;
  PlanBuffer arrivals = named("attn_arrivals", BufferKind::Workspace);
  arrivals.fixedBytes = static_cast<int64_t>(dec->arrivalsBytes(plan.options.maxBatch));
  arrivals.zeroed = true;
  int po = sharedBuffer(std::move(partOut)), pl = sharedBuffer(std::move(partLse)), ar = sharedBuffer(std::move(arrivals));
  emit(kernel(dec),
       {{"q", buf(q)},
        {"k_cache", buf(kc)},
        {"v_cache", buf(vc)},
        {"out", buf(out)},
        {"partial_out", buf(po)},
        {"partial_lse", buf(pl)},
        {"arrivals", buf(ar)},
        {"context_len", buf(input("context_len"))},
        {"max_seq", integer(plan.options.maxSeq)},
        {"scale", real(scale)}},
       op);
  return llvm::Error::success();
}

llvm::Error Lowering::lower(const ir::Op &op) {
  using ir::OpKind;
  switch (op.kind) {
  case OpKind::Embedding:
  case OpKind::EmbeddingSum: {
    // Gather i reads ids operand 2i and table operand 2i + 1. A table that is also a matmul weight (a tied
    // lm_head) is read as the bf16 copy the matmul needs.
    auto tableType = [&](size_t i) {
      int w = op.operands[i].id;
      return plan.matmulWeights.count(w) ? ir::DType::BF16 : m.weights[w].type.dtype;
    };
    auto ids = [&](size_t i) { return buf(input(operandValue(op, i).name == "tokens" ? "tokens" : "positions")); };
    auto tableRows = [&](size_t i) { return integer(m.weights[op.operands[i].id].type.shape[0].value); };
    bool sum = op.kind == OpKind::EmbeddingSum;
    int64_t dim = m.weights[op.operands[1].id].type.shape[1].value;
    std::vector<Field> fields = {{"ids", ids(0)},
                                 {"table", buf(weight(op.operands[1], tableType(1)))},
                                 {"out", buf(define(op.results[0], dim))},
                                 {"rows", rows()},
                                 {"table_rows", tableRows(1)}};
    if (sum) {
      fields.push_back({"ids2", ids(2)});
      fields.push_back({"table2", buf(weight(op.operands[3], tableType(3)))});
      fields.push_back({"table2_rows", tableRows(3)});
    }
    emit(kernel(std::make_shared<EmbeddingSpec>(dim, tableType(1), sum ? std::optional(tableType(3)) : std::nullopt)),
         std::move(fields), op);
    return llvm::Error::success();
  }
  case OpKind::AddLayerNorm:
  case OpKind::AddRmsNorm:
  case OpKind::LayerNorm:
  case OpKind::RmsNorm: {
    if (foldable(op)) { // computed by the gemv (prologue) or wgmma gemm (row scale) kernels that read it
      folded[op.results[0]] = &op;
      use(op.operands[0].id);
      return llvm::Error::success();
    }
    // y = norm(a), or with the residual add before it: sum = a + b, y = norm(sum).
    bool layerNorm = op.kind == OpKind::LayerNorm || op.kind == OpKind::AddLayerNorm;
    bool residual = op.kind == OpKind::AddLayerNorm || op.kind == OpKind::AddRmsNorm;
    size_t g = residual ? 2 : 1; // gamma's operand
    int64_t dim = cols(op.operands[0].id);
    const bool unit = gainsInW.count(&op) > 0; // its gamma rides in W: ones here
    auto spec = std::make_shared<NormSpec>(layerNorm ? NormKind::Layer : NormKind::Rms, dim,
                                           unit ? ir::DType::F32 : m.weights[op.operands[g].id].type.dtype,
                                           residual ? NormFusion::ResidualAdd : NormFusion::None);
    std::vector<Field> fields = {{"a", buf(use(op.operands[0].id))}};
    if (residual) fields.push_back({"b", buf(use(op.operands[1].id))});
    fields.push_back({"gamma", buf(unit ? unitGains(dim) : weight(op.operands[g]))});
    if (layerNorm) fields.push_back({"beta", buf(weight(op.operands[g + 1]))});
    if (residual) fields.push_back({"sum", buf(define(op.results[0], dim))});
    fields.push_back({"y", buf(define(op.results.back(), dim))});
    fields.push_back({"rows", rows()});
    fields.push_back({"eps", real(op.floatAttr(ir::Attr::Eps))});
    emit(kernel(spec), std::move(fields), op);
    return llvm::Error::success();
  }
  case OpKind::Matmul:
  case OpKind::MatmulResidual:
  case OpKind::GatedMatmul:
  case OpKind::Qkv: return lowerMatmul(op);
  case OpKind::Attention: return lowerAttention(op);
  case OpKind::Split: {
    std::vector<int64_t> sizes = op.intsAttr(ir::Attr::Sizes);
    static const char *const parts[] = {"y0", "y1", "y2", "y3"};
    std::vector<Field> fields = {{"x", buf(use(op.operands[0].id))}};
    for (size_t i = 0; i < sizes.size(); ++i) fields.push_back({parts[i], buf(define(op.results[i], sizes[i]))});
    fields.push_back({"rows", rows()});
    emit(kernel(std::make_shared<SplitSpec>(cols(op.operands[0].id), sizes)), std::move(fields), op);
    return llvm::Error::success();
  }
  case OpKind::Rope: {
    int64_t heads = op.intAttr(ir::Attr::Heads), headDim = op.intAttr(ir::Attr::HeadDim);
    int tb = ropeTable(op);
    int x = use(op.operands[0].id);
    int y = define(op.results[0], heads * headDim);
    emit(kernel(std::make_shared<RopeSpec>(heads, headDim, op.enumAttr<RopeStyle>(ir::Attr::Style))),
         {{"x", buf(x)}, {"y", buf(y)}, {"positions", buf(input("positions"))}, {"inv_freq", buf(tb)}, {"rows", rows()}},
         op);
    return llvm::Error::success();
  }
  default: {
    std::optional<PointwiseOp> pw = pointwiseOpOf(op.kind);
    if (!pw) return m.error(op.loc, "no kernel lowers '" + op.info().mnemonic + "'");
    int64_t c = cols(op.results[0]);
    std::vector<Field> fields = {{"a", buf(use(op.operands[0].id))}};
    if (isBinary(*pw)) fields.push_back({"b", buf(use(op.operands[1].id))});
    fields.push_back({"y", buf(define(op.results[0], c))});
    fields.push_back({"rows", rows()});
    if (!isBinary(*pw)) // the scale's factor; the activations take no argument
      fields.push_back({"arg", real(op.kind == ir::OpKind::Scale ? op.floatAttr(ir::Attr::Factor) : 0.0)});
    emit(kernel(std::make_shared<PointwiseSpec>(*pw, c)), std::move(fields), op);
    return llvm::Error::success();
  }
  }
}

// Prefill computes the ops after the layers (final norm, lm_head) only for the rows whose logits are wanted:
// the gather copies those rows (the input `out_rows` lists them) of each layer-loop result, with the
// embedding kernel reading the activation as its table.
void Lowering::gatherOutputRows(const ir::Repeat &r) {
  int outRows = input("out_rows");
  for (ir::ValueId v : r.results) {
    int64_t dim = cols(v);
    int x = use(v);
    std::string n = "%" + m.value(v).name + ":gathered";
    int y = buffer(named(n, BufferKind::Activation, dim * 2));
    live[y] = {static_cast<int>(phase.launches.size()), static_cast<int>(phase.launches.size())};
    env[v] = y;
    // The embedding kernel with the rows of x [rows, dim] as its table and out_rows as the ids.
    PlannedLaunch l = call(kernel(std::make_shared<EmbeddingSpec>(dim, ir::DType::BF16)),
                           {{"ids", buf(outRows)},
                            {"table", buf(x)},
                            {"out", buf(y)},
                            {"rows", of(V::OutRows)},
                            {"table_rows", of(V::Rows)}},
                           LaunchRole::Gather);
    l.overOutRows = true;
    l.op = "gather %" + m.value(v).name + " rows that produce logits";
    phase.launches.push_back(std::move(l));
  }
  gathered = true;
}

// The ops after the prefill's gather (the final norm, the lm_head), twice. A prefill usually wants one row's
// logits a sequence, so the first lowering is gemv kernels for up to kGemvMaxRows output rows, as decode's:
// the lm_head streams W once at the copy bandwidth with the final norm in its prologue, where the gemm ran a
// 128-row tile over one row after a norm launch. The second is today's gemm for more (a prefill that keeps
// every row's logits). Both write the same logits buffer; each launch says which output rows it runs for.
llvm::Error Lowering::lowerAfterGather(size_t from) {
  auto lowerAll = [&]() -> llvm::Error {
    for (size_t i = from; i < m.items.size(); ++i)
      if (auto e = lowerChecked(std::get<ir::Op>(m.items[i]))) return e;
    return llvm::Error::success();
  };
  const auto envAtGather = env;
  const auto foldedAtGather = folded;
  const size_t few = phase.launches.size();
  fewOutRows = true;
  if (auto e = lowerAll()) return e;
  fewOutRows = false;
  const size_t many = phase.launches.size();
  for (size_t i = few; i < many; ++i) phase.launches[i].maxOutRows = kGemvMaxRows;
  pinned[m.outputs[0]] = env.lookup(m.outputs[0]);
  env = envAtGather;
  folded = foldedAtGather;
  if (auto e = lowerAll()) return e;
  for (size_t i = many; i < phase.launches.size(); ++i) phase.launches[i].minOutRows = kGemvMaxRows + 1;
  return llvm::Error::success();
}

// The end of a decode step: pick each row's next token and feed it back, all on the device, so a captured
// step replays with no host work in between.
void Lowering::emitDecodeTail() {
  int logits = env.lookup(m.outputs[0]);
  int64_t vocab = cols(m.outputs[0]);
  int next = buffer(named("next_tokens", BufferKind::Output, 4));
  plan.io.nextTokens = next;
  PlannedLaunch select = call(kernel(std::make_shared<ArgmaxSpec>(vocab)),
                              {{"logits", buf(logits)}, {"out", buf(next)}, {"rows", rows()}}, LaunchRole::Select);
  select.op = argmaxFused ? "next tokens: sample when the session samples (greedy: the lm_head folded the argmax)"
                          : "next tokens: argmax of the logits (sample when the session samples)";
  select.skipWhenGreedy = argmaxFused;
  phase.launches.push_back(std::move(select));

  // The tokens generated so far, [max_seq, batch]: a sequence never holds more than max_seq tokens.
  PlanBuffer history = named("history", BufferKind::Workspace);
  history.fixedBytes = plan.options.maxSeq * plan.options.maxBatch * 4;
  PlanBuffer step = named("decode_step", BufferKind::Workspace);
  step.fixedBytes = 4;
  int h = sharedBuffer(std::move(history)), st = sharedBuffer(std::move(step));
  plan.io.history = h;
  plan.io.step = st;

  // Sampling: the draw of decode step s uses step s, read from the advance kernel's counter so that a
  // replayed graph draws fresh numbers.
  plan.sample = call(kernel(std::make_shared<SampleSpec>(vocab)), {{"logits", buf(logits)},
                                                                   {"out", buf(next)},
                                                                   {"rows", rows()},
                                                                   {"temperature", of(V::Temperature)},
                                                                   {"top_k", of(V::TopK)},
                                                                   {"top_p", of(V::TopP)},
                                                                   {"seed", of(V::Seed)},
                                                                   {"step", integer(0)},
                                                                   {"step_offset", buf(st)}},
                     LaunchRole::Select);
  plan.sample.op = "next tokens: sampled from the logits";

  V keys = buf(argmaxFused ? shared.byName.at("argmax_keys") : -1);
  keys.greedyOnly = true;
  PlannedLaunch adv = call(kernel(std::make_shared<AdvanceSpec>(AdvanceSpec::forBatch(plan.options.maxBatch))),
                           {{"next", buf(next)},
                            {"tokens", buf(input("tokens"))},
                            {"positions", buf(input("positions"))},
                            {"context_len", buf(input("context_len"))},
                            {"history", buf(h)},
                            {"step", buf(st)},
                            {"rows", rows()},
                            {"history_steps", integer(plan.options.maxSeq)},
                            {"keys", keys}},
                           LaunchRole::Advance);
  adv.op = "feed the next tokens back";
  phase.launches.push_back(std::move(adv));
}

llvm::Error Lowering::run() {
  int slots = 0;
  ir::forEachOp(m, [&](const ir::Op &op, int64_t count) {
    if (op.kind == ir::OpKind::Attention) {
      kvSlotBase[&op] = slots;
      slots += static_cast<int>(count ? count : 1);
    }
    for (const ir::Operand &o : op.operands)
      if (!o.isWeight) readers[o.id].push_back(&op);
    for (ir::ValueId r : op.results) producer[r] = &op;
  });
  for (const ir::Item &item : m.items)
    if (const ir::Repeat *r = std::get_if<ir::Repeat>(&item)) yielded.insert(r->yields.begin(), r->yields.end());
  yielded.insert(m.outputs.begin(), m.outputs.end());
  findGainsInWeights();
  for (const ir::Item &item : m.items) {
    if (const ir::Op *op = std::get_if<ir::Op>(&item)) {
      if (auto e = lowerChecked(*op)) return e;
      continue;
    }
    const ir::Repeat &r = std::get<ir::Repeat>(item);
    for (size_t i = 0; i < r.carried.size(); ++i) env[r.carried[i]] = use(r.inits[i]);
    phase.layers = r.count.value;
    for (layer = 0; layer < r.count.value; ++layer) {
      size_t before = phase.launches.size();
      for (const ir::Op &op : r.body)
        if (auto e = lowerChecked(op)) return e;
      if (layer == 0) phase.launchesPerLayer = static_cast<int64_t>(phase.launches.size() - before);
      for (size_t i = 0; i < r.carried.size(); ++i) env[r.carried[i]] = use(r.yields[i]);
    }
    layer = -1;
    for (size_t i = 0; i < r.carried.size(); ++i) env[r.results[i]] = env[r.carried[i]];
    if (decode) continue;
    gatherOutputRows(r);
    const size_t next = static_cast<size_t>(&item - m.items.data()) + 1;
    if (lowersTwiceAfterGather(next)) {
      if (auto e = lowerAfterGather(next)) return e;
      break;
    }
  }
  // The logits are the step's output; decode picks the next token on the GPU too.
  int logits = use(m.outputs[0]);
  plan.buffers[logits].kind = BufferKind::Output;
  phase.logits = logits;
  live.erase(logits);
  if (decode) emitDecodeTail();
  if (specProblem) return llvm::createStringError(llvm::inconvertibleErrorCode(), "plan: " + *specProblem);

  // Place the activations in the arena by liveness.
  std::vector<int> ids;
  std::vector<LiveRange> ranges;
  for (auto &[b, range] : live) {
    ids.push_back(b);
    ranges.push_back({plan.buffers[b].bytesPerRow, range.first, range.second});
  }
  ArenaLayout layout = planArena(ranges);
  for (size_t i = 0; i < ids.size(); ++i) plan.buffers[ids[i]].arenaOffsetPerRow = layout.offsetsPerRow[i];
  phase.arenaBytesPerRow = layout.bytesPerRow;
  phase.peakLiveBytesPerRow = layout.peakLiveBytesPerRow;
  return llvm::Error::success();
}

} // namespace

// The session sizes must fit the model: positions past a learned position table, or a prefill larger than
// the caches can hold, would fail silently on the GPU (NaN rows, skipped cache writes).
llvm::Error checkCapacity(const ir::Module &m, const PlanOptions &o) {
  if (o.maxBatch <= 0 || o.maxPrefillRows <= 0 || o.maxSeq <= 0)
    return ir::makeError("plan: batch, prefill rows and max_seq must be positive");
  if (o.maxSeq > ir::limits::kMaxSeq)
    return ir::makeError("max_seq " + llvm::Twine(o.maxSeq) + " exceeds minfer's limit of " +
                         llvm::Twine(ir::limits::kMaxSeq) + " cache positions a sequence (give a smaller --max-seq)");
  if (o.maxBatch > kMaxDecodeBatch)
    return ir::makeError("--max-batch " + llvm::Twine(o.maxBatch) + " exceeds " + llvm::Twine(kMaxDecodeBatch) +
                " (a decode step feeds its tokens back in one block of threads)");
  llvm::Error found = llvm::Error::success();
  ir::forEachOp(m, [&](const ir::Op &op, int64_t) {
    if (found || (op.kind != ir::OpKind::Embedding && op.kind != ir::OpKind::EmbeddingSum)) return;
    for (size_t i = 0; i + 1 < op.operands.size() && !found; i += 2) { // (ids, table) pairs
      if (m.value(op.operands[i].id).name != "positions") continue;
      const ir::WeightDecl &table = m.weights[op.operands[i + 1].id];
      if (o.maxSeq > table.type.shape[0].value)
        found = ir::makeError("--max-seq " + llvm::Twine(o.maxSeq) + " exceeds the " +
                              llvm::Twine(table.type.shape[0].value) + " rows of the learned position table @" + table.name);
    }
  });
  if (found) return found;
  if (o.maxPrefillRows > o.maxBatch * o.maxSeq)
    return ir::makeError("--max-prefill-tokens " + llvm::Twine(o.maxPrefillRows) + " exceeds what the caches hold (" +
                llvm::Twine(o.maxBatch) + " sequences of " + llvm::Twine(o.maxSeq) + " tokens)");
  return llvm::Error::success();
}

int Plan::tunedKernels() const {
  return static_cast<int>(llvm::count_if(tileSource, [](const auto &kv) { return kv.second == "tuned"; }));
}
const ParamValue *Plan::param(const PlannedLaunch &l, llvm::StringRef field) const {
  int f = kernels[l.kernel]->params().find(field);
  for (const ParamBinding &b : l.params)
    if (b.field == f && f >= 0) return &b.value;
  return nullptr;
}

int Plan::defaultTileKernels() const { return static_cast<int>(tileSource.size()) - tunedKernels(); }

std::vector<int> ParamValue::buffers() const {
  std::vector<int> out;
  auto add = [&](int b) {
    if (b >= 0) out.push_back(b);
  };
  if (kind == Buffer) add(buffer);
  if (kind == Epilogue)
    for (int b : {epi.bias, epi.residual, epi.positions, epi.seqOf, epi.rope, epi.kCache, epi.vCache, epi.gamma,
                  epi.beta, epi.argmax, epi.rowSq})
      add(b);
  return out;
}

bool sameWeightBuffers(const Plan &a, const Plan &b) {
  auto held = [](const Plan &p) {
    std::vector<const PlanBuffer *> out;
    for (const PlanBuffer &x : p.buffers)
      if (inWeightMemory(x)) out.push_back(&x);
    return out;
  };
  std::vector<const PlanBuffer *> x = held(a), y = held(b);
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i) {
    const PlanBuffer &p = *x[i], &q = *y[i];
    if (p.name != q.name || p.kind != q.kind || p.fixedBytes != q.fixedBytes || p.weight != q.weight ||
        p.dtype != q.dtype || p.transposed != q.transposed || p.layer != q.layer || p.constant != q.constant ||
        p.rotation != q.rotation || p.layout != q.layout || p.layoutHeadDim != q.layoutHeadDim ||
        p.layoutRows != q.layoutRows || p.fill != q.fill)
      return false;
    // The gains' buffer by what it holds: its index may differ between the two plans.
    if ((p.gains < 0) != (q.gains < 0)) return false;
    if (p.gains >= 0) {
      const PlanBuffer &g = a.buffers[static_cast<size_t>(p.gains)], &h = b.buffers[static_cast<size_t>(q.gains)];
      if (g.weight != h.weight || g.layer != h.layer) return false;
    }
  }
  return true;
}

std::vector<int64_t> rowOrder(const PlanBuffer &b, int64_t rows) {
  std::vector<int64_t> order;
  if (b.layout == PlanBuffer::Layout::AsIs) return order;
  order.resize(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) order[r] = r;
  if (b.layout == PlanBuffer::Layout::GateUp) {
    // Row 2j is gate row j, row 2j + 1 is up row j (the up rows are the second half).
    for (int64_t j = 0; j < rows / 2; ++j) {
      order[2 * j] = j;
      order[2 * j + 1] = rows / 2 + j;
    }
  } else {
    // Within each head of the first layoutRows rows: row 2i is i, row 2i + 1 is i + head_dim / 2.
    int64_t hd = b.layoutHeadDim;
    for (int64_t h0 = 0; h0 + hd <= std::min(rows, b.layoutRows); h0 += hd)
      for (int64_t i = 0; i < hd / 2; ++i) {
        order[h0 + 2 * i] = h0 + i;
        order[h0 + 2 * i + 1] = h0 + i + hd / 2;
      }
  }
  return order;
}

llvm::Expected<Plan> buildPlan(const ir::Module &m, const Target &target, const PlanOptions &opts) {
  Plan plan;
  plan.target = target;
  plan.options = opts;
  if (plan.options.maxSeq <= 0) {
    const ir::DimDecl *maxPos = m.findDim("max_pos");
    if (!maxPos)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "the model has no max_pos dim to size its KV cache: give --max-seq");
    plan.options.maxSeq = maxPos->value;
  }
  // 2048 tokens a prefill step by default: enough rows to keep the tensor-core GEMM busy.
  if (plan.options.maxPrefillRows == 0)
    plan.options.maxPrefillRows = std::min<int64_t>(2048, plan.options.maxBatch * plan.options.maxSeq);
  // Matmul weights and biases are read as bf16 (converted at load when stored otherwise).
  ir::forEachOp(m, [&](const ir::Op &op, int64_t) {
    // Fused ops, and the attributes only the fusion pass writes on plain ops.
    if (op.info().fused || op.hasIfDeclared(ir::Attr::Act) || op.hasIfDeclared(ir::Attr::Scale) ||
        op.hasIfDeclared(ir::Attr::Fold))
      plan.fused = true;
  });
  ir::forEachOp(m, [&](const ir::Op &op, int64_t count) {
    if (!ir::isMatmulFamily(op.kind)) return;
    bool first = true;
    for (const ir::Operand &o : op.operands) {
      if (!o.isWeight) continue;
      plan.matmulWeights.insert(o.id);
      const ir::WeightDecl &w = m.weights[o.id];
      if (first && w.type.rank() == 2) // the weight (the next one is a bias)
        plan.decodeFlopsPerToken += 2.0 * w.type.shape[0].value * w.type.shape[1].value * std::max<int64_t>(count, 1);
      first = false;
    }
  });
  if (auto e = checkCapacity(m, plan.options)) return e;
  plan.prefill.name = "prefill";
  plan.decode.name = "decode";
  SharedBuffers shared;
  if (auto e = Lowering(m, plan, plan.prefill, false, shared).run()) return e;
  if (auto e = Lowering(m, plan, plan.decode, true, shared).run()) return e;
  for (const PlanBuffer &b : plan.buffers)
    if (b.kind == BufferKind::Weight) plan.weightBytes += b.fixedBytes;
  planPersistentDecode(plan);
  return plan;
}

} // namespace minfer
