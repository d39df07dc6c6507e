// compiler/PlanJson.cpp — a Plan as JSON: --emit=plan, --dump-dir's plan.json and a bundle's manifest.
#include "compiler/Plan.h"
#include "compiler/kernels/Persistent.h"

#include <algorithm>

namespace minfer {

llvm::StringRef bufferKindName(BufferKind k) {
  switch (k) {
  case BufferKind::Input: return "input";
  case BufferKind::Activation: return "activation";
  case BufferKind::Weight: return "weight";
  case BufferKind::Constant: return "constant";
  case BufferKind::KvCache: return "kv_cache";
  case BufferKind::Workspace: return "workspace";
  case BufferKind::Output: return "output";
  }
  return "?";
}

llvm::StringRef launchRoleName(LaunchRole r) {
  switch (r) {
  case LaunchRole::Op: return "op";
  case LaunchRole::Gather: return "gather";
  case LaunchRole::Select: return "select";
  case LaunchRole::Advance: return "advance";
  }
  return "?";
}

namespace {

// A bound value: a buffer's name, a constant, or what the runtime supplies ("rows", "sequence_start", ...).
llvm::json::Value valueJSON(const Plan &plan, const ParamValue &v) {
  switch (v.kind) {
  case ParamValue::Buffer: return v.buffer < 0 ? llvm::json::Value(nullptr) : llvm::json::Value(plan.buffers[v.buffer].name);
  case ParamValue::Int: return v.i;
  case ParamValue::Float: return v.f;
  case ParamValue::Rows: return "rows";
  case ParamValue::OutRows: return "out_rows";
  case ParamValue::SequenceStart: return "sequence_start";
  case ParamValue::Temperature: return "temperature";
  case ParamValue::TopK: return "top_k";
  case ParamValue::TopP: return "top_p";
  case ParamValue::Seed: return "seed";
  case ParamValue::Epilogue: {
    const EpilogueArgs &e = v.epi;
    llvm::json::Object o;
    auto put = [&](const char *key, int b) {
      if (b >= 0) o[key] = plan.buffers[b].name;
    };
    put("bias", e.bias);
    put("residual", e.residual);
    if (e.scale != 1) o["scale"] = e.scale;
    put("positions", e.positions);
    put("seq_of", e.seqOf);
    put("rope", e.rope);
    put("k_cache", e.kCache);
    put("v_cache", e.vCache);
    if (e.kCache >= 0) o["max_seq"] = e.maxSeq;
    put("norm_gamma", e.gamma);
    put("norm_beta", e.beta);
    if (e.gamma >= 0) o["norm_eps"] = e.eps;
    put("argmax_keys", e.argmax);
    put("row_squares", e.rowSq);
    if (e.rowSq >= 0 && e.rowSqParts > 0) o["row_squares_parts"] = e.rowSqParts;
    return o;
  }
  }
  return nullptr;
}

// The launch's bound fields in the Params' order, each as {field: value}.
llvm::json::Array paramsJSON(const Plan &plan, const PlannedLaunch &l) {
  const ParamsLayout &layout = plan.kernels[l.kernel]->params();
  std::vector<const ParamBinding *> bound(layout.fields.size(), nullptr);
  for (const ParamBinding &b : l.params) bound[b.field] = &b;
  llvm::json::Array args;
  for (size_t f = 0; f < bound.size(); ++f)
    if (bound[f]) args.push_back(llvm::json::Object{{layout.fields[f].name, valueJSON(plan, bound[f]->value)}});
  return args;
}

llvm::json::Object phaseJSON(const Plan &plan, const PhasePlan &p) {
  llvm::json::Array steps;
  for (const PlannedLaunch &l : p.launches) {
    llvm::json::Object s{{"kernel", plan.kernels[l.kernel]->name()}, {"op", l.op}, {"args", paramsJSON(plan, l)}};
    if (l.layer >= 0) s["layer"] = l.layer;
    if (l.perSequence) s["per_sequence"] = true;
    if (l.role != LaunchRole::Op) s["role"] = launchRoleName(l.role).str();
    if (l.skipWhenGreedy) s["skip_when_greedy"] = true;
    if (l.minOutRows) s["min_out_rows"] = l.minOutRows;
    if (l.maxOutRows) s["max_out_rows"] = l.maxOutRows;
    steps.push_back(std::move(s));
  }
  return llvm::json::Object{{"launches", static_cast<int64_t>(p.launches.size())},
                            {"launches_per_layer", p.launchesPerLayer},
                            {"layers", p.layers},
                            {"arena_bytes_per_row", p.arenaBytesPerRow},
                            {"peak_live_bytes_per_row", p.peakLiveBytesPerRow},
                            {"steps", std::move(steps)}};
}

// The persistent decode kernel's task graph: each task, the launch it replaces, its tiles at the plan's
// batch, what it waits for, and the weight bytes it streams (per SM when spread over the target's SMs).
llvm::json::Object persistentJSON(const Plan &plan) {
  const PersistentDecode &pd = plan.persistent;
  if (!pd.built()) return llvm::json::Object{{"path", "launches"}, {"why", pd.why}};
  llvm::json::Array tasks;
  int64_t total = 0;
  for (size_t i = 0; i < pd.tasks.size(); ++i) {
    const PersistentDecode::Task &t = pd.tasks[i];
    const PlannedLaunch &l = plan.decode.launches[t.launch];
    LaunchDims d = t.spec->launch(plan.options.maxBatch);
    // The matmul weight (Params field W): what the task streams whole; an embedding reads a row of its table.
    int64_t weightBytes = 0;
    const ParamsLayout &layout = t.spec->params();
    for (const ParamBinding &b : l.params)
      if (llvm::StringRef(layout.fields[b.field].name) == "W" && b.value.kind == ParamValue::Buffer && b.value.buffer >= 0)
        weightBytes += plan.buffers[b.value.buffer].fixedBytes;
    total += weightBytes;
    llvm::json::Object o{{"task", static_cast<int64_t>(i)},
                         {"op", l.op},
                         {"kind", t.kind},
                         {"spec", t.spec->name()},
                         {"tiles", static_cast<int64_t>(d.grid[0]) * d.grid[1] * d.grid[2]},
                         {"weight_bytes", weightBytes}};
    if (i > 0) o["waits_for"] = static_cast<int64_t>(i - 1);
    if (l.layer >= 0) o["layer"] = l.layer;
    tasks.push_back(std::move(o));
  }
  llvm::json::Object ring{{"bytes", static_cast<const PersistentDecodeSpec &>(*plan.kernels[pd.kernel]).ringBytes}};
  if (!pd.ringWhy.empty()) ring["why_not"] = pd.ringWhy;
  return llvm::json::Object{{"path", "persistent"},
                            {"kernel", plan.kernels[pd.kernel]->name()},
                            {"weight_ring", std::move(ring)},
                            {"threads", pd.threads},
                            {"weight_bytes", total},
                            {"weight_bytes_per_sm", total / std::max(plan.target.nominalSmCount(), 1)},
                            {"launches_after", static_cast<int64_t>(plan.decode.launches.size() - pd.tasks.size())},
                            {"tasks", std::move(tasks)}};
}

} // namespace


llvm::json::Object Plan::toJSON() const {
  llvm::json::Object decodeJSON = phaseJSON(*this, decode);
  decodeJSON["weight_bytes"] = weightBytes;
  decodeJSON["flops_per_token"] = decodeFlopsPerToken;
  decodeJSON["persistent"] = persistentJSON(*this);
  llvm::json::Array ks;
  for (const auto &k : kernels) {
    llvm::json::Object o = k->toJSON();
    o["name"] = k->name();
    auto src = tileSource.find(k->name());
    if (src != tileSource.end()) o["tile_source"] = src->second;
    ks.push_back(std::move(o));
  }
  llvm::json::Array bufs;
  for (const PlanBuffer &b : buffers) {
    llvm::json::Object o{{"name", b.name}, {"kind", bufferKindName(b.kind)}};
    if (b.bytesPerRow) o["bytes_per_row"] = b.bytesPerRow;
    if (b.fixedBytes) o["bytes"] = b.fixedBytes;
    if (b.arenaOffsetPerRow >= 0) o["arena_offset_per_row"] = b.arenaOffsetPerRow;
    if (b.kind == BufferKind::Weight) {
      o["weight"] = b.weight;
      o["layer"] = b.layer;
      o["dtype"] = ir::dtypeName(b.dtype).str();
      if (b.transposed) o["transposed"] = true;
      if (b.layout == PlanBuffer::Layout::RopePairs) o["layout"] = "rope_pairs";
      if (b.layout == PlanBuffer::Layout::GateUp) o["layout"] = "gate_up";
      if (b.gains >= 0) o["column_gains"] = buffers[static_cast<size_t>(b.gains)].name;
    }
    if (b.fill) o["fill"] = static_cast<double>(*b.fill);
    if (b.kind == BufferKind::KvCache) {
      o["kv_slot"] = b.kvSlot;
      o["value"] = b.isValue;
    }
    if (!b.constant.empty()) {
      llvm::json::Array values;
      for (float f : b.constant) values.push_back(static_cast<double>(f));
      o["values"] = std::move(values);
    }
    if (!b.rotation.empty()) {
      llvm::json::Array freqs;
      for (double f : b.rotation) freqs.push_back(f);
      o["rotation"] = llvm::json::Object{{"rows", options.maxSeq}, {"inv_freq", std::move(freqs)}};
    }
    bufs.push_back(std::move(o));
  }
  return llvm::json::Object{{"target", target.name},
                            {"fused", fused},
                            {"max_batch", options.maxBatch},
                            {"max_prefill_rows", options.maxPrefillRows},
                            {"max_seq", options.maxSeq},
                            {"gains_in_weights", options.gainsInWeights},
                            {"gemm_folds_norm", options.gemmFoldsNorm},
                            {"weight_ring_requested", options.weightRing},
                            {"prefill", phaseJSON(*this, prefill)},
                            {"decode", std::move(decodeJSON)},
                            {"kernels", std::move(ks)},
                            {"sample", llvm::json::Object{{"kernel", kernels[sample.kernel]->name()}, {"args", paramsJSON(*this, sample)}}},
                            {"tuned_tiles", [&] {
                               llvm::json::Object o;
                               for (const auto &[k, v] : tunedTiles) o[k] = v;
                               return o;
                             }()},
                            {"buffers", std::move(bufs)}};
}


} // namespace minfer
