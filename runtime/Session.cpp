// runtime/Session.cpp — a batch of sequences through prefill and decode.
#include "runtime/Session.h"

#include "compiler/kernels/Persistent.h"
#include "runtime/KernelLoader.h"

#include "compiler/kernels/Epilogue.h"
#include "ir/Diagnostics.h"
#include "ir/Limits.h"

#include "io/Safetensors.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <array>
#include <cstdlib>
#include <cstring>
#include <map>

namespace minfer::rt {
namespace {


constexpr size_t kAlign = 256;
std::string gib(double bytes) { return llvm::formatv("{0:f2} GiB", bytes / double(1ull << 30)).str(); }

// Decode steps between two reads of the recorded tokens (to stop at a stop token): reading syncs the stream,
// so fewer reads keep the GPU fed; a stopped batch computes at most this many steps too many.
constexpr int64_t kStopCheckInterval = 8;

} // namespace

struct Session::PhaseState {
  const PhasePlan *phase = nullptr;
  int64_t rows = 0;         // the rows the arena and inputs are sized for
  cuda::DevicePtr arena = 0;
  std::map<int, cuda::DevicePtr> own; // the phase's Input and Output buffers
};

struct Session::Segment {
  int64_t seq = 0;   // cache slot
  int64_t start = 0; // position of its first row (tokens of the sequence already in the cache)
  int64_t count = 0; // rows
  int64_t row = 0;   // its first row in the chunk
};

llvm::Expected<std::unique_ptr<Session>> Session::create(const Engine &engine, const SessionOptions &options) {
  std::unique_ptr<Session> s(new Session(engine, options));
  if (auto e = s->allocate()) return e;
  return s;
}

Session::Session(const Engine &engine, const SessionOptions &options) : engine(engine), options(options) {}
Session::~Session() = default;

llvm::Error Session::allocate() {
  const Plan &plan = engine.plan();
  const PlanOptions &po = plan.options;
  prefillState = std::make_unique<PhaseState>();
  decodeState = std::make_unique<PhaseState>();
  prefillState->phase = &plan.prefill;
  prefillState->rows = po.maxPrefillRows;
  decodeState->phase = &plan.decode;
  decodeState->rows = po.maxBatch;
  prefillLogitsRows = options.keepLogits ? po.maxPrefillRows : po.maxBatch;

  // Sizes first, then one allocation carved into parts.
  std::vector<std::pair<cuda::DevicePtr *, size_t>> parts;
  std::map<int, size_t> sharedBytes;
  shared.assign(plan.buffers.size(), 0);
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    const PlanBuffer &b = plan.buffers[i];
    if (b.kind == BufferKind::KvCache) mem.kvCache += llvm::alignTo(b.fixedBytes, kAlign);
    if (b.kind == BufferKind::Workspace) mem.workspaces += llvm::alignTo(b.fixedBytes, kAlign);
    if (b.kind == BufferKind::KvCache || b.kind == BufferKind::Workspace)
      sharedBytes[int(i)] = llvm::alignTo(b.fixedBytes, kAlign);
  }
  std::map<std::pair<PhaseState *, int>, size_t> ownBytes;
  for (PhaseState *ph : {prefillState.get(), decodeState.get()}) {
    mem.arenas += llvm::alignTo(static_cast<size_t>(ph->phase->arenaBytesPerRow * ph->rows), kAlign);
    for (const PlannedLaunch &l : ph->phase->launches)
      for (const ParamBinding &a : l.params)
        for (int id : a.value.buffers()) {
          const PlanBuffer &b = plan.buffers[id];
          if (b.kind != BufferKind::Input && b.kind != BufferKind::Output) continue;
          bool logits = id == ph->phase->logits;
          int64_t rows = logits && ph == prefillState.get() ? prefillLogitsRows : ph->rows;
          size_t bytes = llvm::alignTo(static_cast<size_t>(b.bytesPerRow * rows), kAlign);
          if (ownBytes.emplace(std::make_pair(ph, id), bytes).second) mem.io += bytes;
        }
  }
  if (plan.prefill.logits < 0 || plan.decode.logits < 0) return ir::makeError("the plan has no logits output");

  auto info = cuda::memoryInfo();
  if (!info) return info.takeError();
  if (mem.total() > info->free)
    return ir::makeError("out of device memory: the session needs " + gib(double(mem.total())) + " (KV cache " +
                gib(double(mem.kvCache)) + ", arenas " + gib(double(mem.arenas)) + ", workspaces and I/O " +
                gib(double(mem.workspaces + mem.io)) + ") but " + gib(double(info->free)) +
                " is free; lower --max-seq, --max-batch or --max-prefill-tokens");
  auto buf = cuda::DeviceBuffer::alloc(mem.total());
  if (!buf) return buf.takeError();
  memory_ = std::move(*buf);
  cuda::DevicePtr next = memory_.ptr();
  for (auto &[i, bytes] : sharedBytes) shared[i] = next, next += bytes;
  for (PhaseState *ph : {prefillState.get(), decodeState.get()}) {
    ph->arena = next;
    next += llvm::alignTo(static_cast<size_t>(ph->phase->arenaBytesPerRow * ph->rows), kAlign);
  }
  for (auto &[key, bytes] : ownBytes) {
    key.first->own[key.second] = next;
    next += bytes;
  }
  // Poison once: a kernel reading what nobody wrote shows up as NaN, not as plausible stale numbers. The
  // caches need no clearing: attention reads only positions below each sequence's context length.
  auto st = cuda::Stream::create();
  if (!st) return st.takeError();
  stream = std::move(*st);
  if (auto e = cuda::fillAsync(memory_.ptr(), 0xFF, memory_.size(), stream.handle())) return e;
  // Except the workspaces that must start at zero (the lm_head's argmax keys, maxed atomically).
  for (size_t i = 0; i < plan.buffers.size(); ++i)
    if (plan.buffers[i].zeroed)
      if (auto e = cuda::fillAsync(shared[i], 0, static_cast<size_t>(plan.buffers[i].fixedBytes), stream.handle()))
        return e;
  if (auto e = stream.synchronize()) return e;
  return sizePersistentGrid();
}

llvm::Error Session::sizePersistentGrid() {
  const Plan &plan = engine.plan();
  const PersistentDecode &pd = plan.persistent;
  if (!pd.built()) return llvm::Error::success();
  // As many blocks as the device holds at once, never more: a block spinning on a tile no resident block
  // will run would hang the step (the launch is cooperative too, so the driver refuses such a grid).
  const LaunchDims dims = plan.kernels[pd.kernel]->launch(1);
  auto perSm = cuda::residentBlocksPerSm(engine.function(pd.kernel), dims.block[0], dims.sharedBytes);
  if (!perSm) return perSm.takeError();
  auto info = cuda::deviceInfo();
  if (!info) return info.takeError();
  if (*perSm < 1) {
    persistentRefused = "its kernel " + plan.kernels[pd.kernel]->name() + " does not fit an SM of " + info->name +
                        " (" + std::to_string(dims.block[0]) + " threads, " + std::to_string(dims.sharedBytes) +
                        " bytes of shared memory a block)";
    return llvm::Error::success();
  }
  persistentBlocks = *perSm * info->smCount;
  return llvm::Error::success();
}

cuda::DevicePtr Session::address(const PhaseState &ph, int buffer) const {
  if (buffer < 0) return 0;
  const PlanBuffer &b = engine.plan().buffers[buffer];
  switch (b.kind) {
  case BufferKind::Weight:
  case BufferKind::Constant: return engine.weightPointer(buffer);
  case BufferKind::KvCache:
  case BufferKind::Workspace: return shared[buffer];
  case BufferKind::Activation: return ph.arena + static_cast<cuda::DevicePtr>(b.arenaOffsetPerRow * ph.rows);
  case BufferKind::Input:
  case BufferKind::Output: {
    auto it = ph.own.find(buffer);
    return it == ph.own.end() ? 0 : it->second;
  }
  }
  return 0;
}

cuda::DevicePtr Session::address(const PhaseState &ph, int buffer, const Segment *seg) const {
  cuda::DevicePtr p = address(ph, buffer);
  if (!seg || buffer < 0) return p;
  // One sequence's rows, and its slab of the caches.
  const PlanBuffer &b = engine.plan().buffers[buffer];
  if (b.kind == BufferKind::Activation) p += static_cast<cuda::DevicePtr>(seg->row * b.bytesPerRow);
  if (b.kind == BufferKind::KvCache) p += static_cast<cuda::DevicePtr>(seg->seq * (b.fixedBytes / engine.plan().options.maxBatch));
  return p;
}

void Session::fillParams(const PlannedLaunch &l, const PhaseState &ph, int64_t rows, int64_t outRows,
                         const GenerateOptions *sampling, const Segment *seg, bool greedyKeys, uint8_t *blob) const {
  const Plan &plan = engine.plan();
  const ParamsLayout &layout = plan.kernels[l.kernel]->params();
  for (const ParamBinding &b : l.params) {
    const ParamField &f = layout.fields[b.field];
    const ParamValue &v = b.value;
    switch (v.kind) {
    case ParamValue::Buffer: writeParam(blob, f, v.greedyOnly && !greedyKeys ? 0 : address(ph, v.buffer, seg)); break;
    case ParamValue::Int: writeParam(blob, f, v.i); break;
    case ParamValue::Float: writeParam(blob, f, v.f); break;
    case ParamValue::Rows: writeParam(blob, f, seg ? seg->count : rows); break;
    case ParamValue::OutRows: writeParam(blob, f, outRows); break;
    case ParamValue::SequenceStart: writeParam(blob, f, seg ? seg->start : int64_t(0)); break;
    case ParamValue::Temperature: writeParam(blob, f, double(sampling ? sampling->temperature : 0.f)); break;
    case ParamValue::TopK: writeParam(blob, f, int64_t(sampling ? sampling->topK : 0)); break;
    case ParamValue::TopP: writeParam(blob, f, double(sampling ? sampling->topP : 1.f)); break;
    case ParamValue::Seed: writeParam(blob, f, uint64_t(sampling ? sampling->seed : 0)); break;
    case ParamValue::Epilogue: {
      const EpilogueArgs &e = v.epi;
      EpiParams p;
      p.bias = address(ph, e.bias);
      p.residual = address(ph, e.residual);
      p.scale = static_cast<float>(e.scale);
      p.max_seq = static_cast<int32_t>(e.maxSeq);
      p.positions = address(ph, e.positions);
      p.seq_of = address(ph, e.seqOf);
      p.rope = address(ph, e.rope);
      p.k_cache = address(ph, e.kCache);
      p.v_cache = address(ph, e.vCache);
      p.gamma = address(ph, e.gamma);
      p.beta = address(ph, e.beta);
      p.eps = static_cast<float>(e.eps);
      p.argmax = greedyKeys ? address(ph, e.argmax) : 0;
      p.row_sq = address(ph, e.rowSq);
      p.row_sq_parts = static_cast<int32_t>(e.rowSqParts);
      std::memcpy(blob + f.offset, &p, sizeof p);
      break;
    }
    }
  }
}

llvm::Error Session::enqueueLaunch(const PlannedLaunch &l, const PhaseState &ph, int64_t rows, int64_t outRows,
                                   const GenerateOptions *sampling, const Segment *seg, bool greedyKeys) {
  const KernelSpec &spec = *engine.plan().kernels[l.kernel];
  std::array<uint8_t, kMaxParamsBytes> blob{};
  fillParams(l, ph, rows, outRows, sampling, seg, greedyKeys, blob.data());
  int64_t launchRows = seg ? seg->count : l.overOutRows ? outRows : rows;
  // Kernels are launched as programmatic dependents (sm_90+): each may start while the one before it drains,
  // loading its weights, and waits for that kernel's outputs in griddepcontrol.wait (every template does,
  // before it reads or writes anything an earlier kernel touches). MINFER_NO_PDL=1 turns it off, and
  // MINFER_NO_PREFILL_PDL=1 for the prefill only (to measure what it brings).
  static const bool pdl = !std::getenv("MINFER_NO_PDL");
  static const bool prefillPdl = !std::getenv("MINFER_NO_PREFILL_PDL");
  bool dependent = pdl && (prefillPdl || &ph == decodeState.get());
  return launchSpec(engine.function(l.kernel), spec, launchRows, blob.data(), stream.handle(), dependent);
}

const char *Session::traceFile() {
  static const char *path = std::getenv("MINFER_PERSISTENT_TRACE");
  return path && *path ? path : nullptr;
}

llvm::Error Session::writeTrace(const char *path) const {
  const Plan &plan = engine.plan();
  const PersistentDecode &pd = plan.persistent;
  std::vector<uint64_t> t(pd.tasks.size() + 1);
  if (auto e = cuda::copyDeviceToHost(t.data(), shared[pd.trace], t.size() * 8, stream.handle())) return e;
  std::string out = "task\tlayer\top\tspec\ttiles\tend_us\ttook_us\n";
  uint64_t start = t.back(), prev = start;
  for (size_t i = 0; i < pd.tasks.size(); ++i) {
    const PlannedLaunch &l = plan.decode.launches[pd.tasks[i].launch];
    LaunchDims d = pd.tasks[i].spec->launch(tableKey.rows);
    out += llvm::formatv("{0}\t{1}\t{2}\t{3}\t{4}\t{5:f2}\t{6:f2}\n", i, l.layer, l.op, pd.tasks[i].spec->name(),
                         uint64_t(d.grid[0]) * d.grid[1] * d.grid[2], (t[i] - start) / 1e3,
                         (int64_t(t[i]) - int64_t(prev)) / 1e3)
               .str();
    prev = t[i];
  }
  std::error_code ec;
  llvm::raw_fd_ostream f(path, ec);
  if (ec) return ir::makeError(std::string("MINFER_PERSISTENT_TRACE: cannot write ") + path + ": " + ec.message());
  f << out;
  return llvm::Error::success();
}

const char *Session::prefillTraceFile() {
  static const char *path = std::getenv("MINFER_PREFILL_TRACE");
  return path && *path ? path : nullptr;
}

struct Session::PrefillTrace {
  struct Mark {
    const PlannedLaunch *launch;
    int64_t rows;
    cuda::Event event;
  };
  std::vector<Mark> marks; // the last mark ends the chunk's last launch

  llvm::Error mark(const PlannedLaunch *l, int64_t rows, cuda::StreamHandle stream) {
    auto e = cuda::Event::create();
    if (!e) return e.takeError();
    if (auto err = e->record(stream)) return err;
    marks.push_back({l, rows, std::move(*e)});
    return llvm::Error::success();
  }

  llvm::Error write(const Plan &plan, const char *path) const {
    if (marks.empty()) return llvm::Error::success();
    if (auto e = marks.back().event.synchronize()) return e;
    std::string out = "launch\tlayer\top\tspec\trows\tstart_us\ttook_us\n";
    for (size_t i = 0; i + 1 < marks.size(); ++i) {
      const Mark &m = marks[i];
      if (!m.launch) continue; // a chunk boundary (uploads and logits copies)
      auto start = cuda::Event::elapsedMs(marks[0].event, m.event);
      auto took = cuda::Event::elapsedMs(m.event, marks[i + 1].event);
      if (!start) return start.takeError();
      if (!took) return took.takeError();
      out += llvm::formatv("{0}\t{1}\t{2}\t{3}\t{4}\t{5:f1}\t{6:f1}\n", i, m.launch->layer, m.launch->op,
                           plan.kernels[m.launch->kernel]->name(), m.rows, *start * 1e3, *took * 1e3)
                 .str();
    }
    auto total = cuda::Event::elapsedMs(marks.front().event, marks.back().event);
    if (!total) return total.takeError();
    out += llvm::formatv("total\t\t\t\t\t\t{0:f1}\n", *total * 1e3).str();
    std::error_code ec;
    llvm::raw_fd_ostream f(path, ec);
    if (ec) return ir::makeError(std::string("MINFER_PREFILL_TRACE: cannot write ") + path + ": " + ec.message());
    f << out;
    return llvm::Error::success();
  }
};

bool Session::usePersistent(const GenerateOptions &opts) const {
  // checkPrompts refused DecodePath::Persistent where the plan has no persistent kernel.
  return opts.decode == DecodePath::Persistent && engine.plan().persistent.built();
}

llvm::Error Session::preparePersistent(int64_t rows, bool greedyKeys) {
  const Plan &plan = engine.plan();
  const PersistentDecode &pd = plan.persistent;
  TableKey key{rows, greedyKeys};
  if (tableKey == key) return llvm::Error::success();
  std::vector<PersistentTaskHost> table(pd.tasks.size());
  for (size_t i = 0; i < pd.tasks.size(); ++i) {
    const PersistentDecode::Task &t = pd.tasks[i];
    const LaunchDims d = t.spec->launch(rows);
    table[i].kind = t.kind;
    table[i].nx = static_cast<int32_t>(d.grid[0]);
    table[i].ny = static_cast<int32_t>(d.grid[1]);
    table[i].nz = static_cast<int32_t>(d.grid[2]);
    fillParams(plan.decode.launches[t.launch], *decodeState, rows, rows, nullptr, nullptr, greedyKeys, table[i].params);
  }
  if (auto e = cuda::copyHostToDeviceAsync(shared[pd.table], table.data(), table.size() * sizeof(PersistentTaskHost),
                                           stream.handle()))
    return e;
  if (auto e = stream.synchronize()) return e; // the host table goes out of scope
  tableKey = key;
  return llvm::Error::success();
}

llvm::Error Session::enqueueDecodeStep(int64_t rows, const GenerateOptions &opts, bool tailOnly) {
  // A whole greedy step whose lm_head folds the argmax skips the select launch and hands the keys to the
  // advance kernel; after a prefill (tailOnly) and when sampling, the select kernel picks from the logits.
  bool greedyKeys = !tailOnly && !(opts.temperature > 0.f);
  const PersistentDecode &pd = engine.plan().persistent;
  size_t first = 0; // the first launch not covered by the persistent kernel
  if (!tailOnly && usePersistent(opts)) {
    // The op launches as one kernel (its task table written by preparePersistent), then select and advance.
    PersistentParams p;
    p.tasks = shared[pd.table];
    p.counters = shared[pd.counters];
    p.num_tasks = static_cast<int32_t>(pd.tasks.size());
    p.trace = traceFile() ? shared[pd.trace] : 0;
    LaunchDims dims = engine.plan().kernels[pd.kernel]->launch(rows);
    dims.grid = {static_cast<unsigned>(persistentBlocks), 1, 1};
    void *args[] = {&p};
    static const bool pdl = !std::getenv("MINFER_NO_PDL");
    if (auto e = cuda::launch(engine.function(pd.kernel), dims, args, stream.handle(), pdl, /*cooperative=*/true))
      return e;
    first = pd.tasks.size();
  }
  const std::vector<PlannedLaunch> &launches = decodeState->phase->launches;
  for (size_t i = first; i < launches.size(); ++i) {
    const PlannedLaunch &l = launches[i];
    if (tailOnly && l.role != LaunchRole::Select && l.role != LaunchRole::Advance) continue;
    if (greedyKeys && l.skipWhenGreedy) continue;
    // The select launch's argmax becomes the sample launch when the session samples.
    bool sample = l.role == LaunchRole::Select && opts.temperature > 0.f;
    if (auto e = enqueueLaunch(sample ? engine.plan().sample : l, *decodeState, rows, rows, &opts, nullptr, greedyKeys))
      return e;
  }
  return llvm::Error::success();
}

llvm::Error Session::checkPrompts(const std::vector<std::vector<int32_t>> &prompts, const GenerateOptions &opts) const {
  const PlanOptions &po = engine.plan().options;
  int64_t vocab = engine.vocab();
  if (prompts.empty()) return ir::makeError("generate: no prompts");
  if (static_cast<int64_t>(prompts.size()) > po.maxBatch)
    return ir::makeError("generate: " + std::to_string(prompts.size()) + " prompts, but the engine was planned for a batch of " +
                std::to_string(po.maxBatch) + " (raise --max-batch / EngineOptions::plan.maxBatch)");
  if (opts.maxNewTokens < 0 || opts.maxNewTokens > ir::limits::kMaxNewTokens)
    return ir::makeError("generate: max_new_tokens must be in 0.." + std::to_string(ir::limits::kMaxNewTokens) +
                         ", got " + std::to_string(opts.maxNewTokens));
  if (opts.decode == DecodePath::Persistent && !engine.plan().persistent.built())
    return ir::makeError("generate: the persistent decode kernel was not built for this plan: " +
                         engine.plan().persistent.why + " (decode with launches instead)");
  if (opts.decode == DecodePath::Persistent && !persistentRefused.empty())
    return ir::makeError("generate: the persistent decode kernel cannot run here: " + persistentRefused +
                         " (decode with launches instead)");
  if (opts.temperature > 0.f && !(opts.topP > 0.f && opts.topP <= 1.f))
    return ir::makeError("generate: top_p must be in (0, 1], got " + std::to_string(opts.topP));
  if (!opts.forcedTokens.empty() && opts.forcedTokens.size() != prompts.size())
    return ir::makeError("generate: " + std::to_string(opts.forcedTokens.size()) + " lists of forced tokens for " +
                         std::to_string(prompts.size()) + " prompts: give one list per prompt, or none");
  for (size_t i = 0; i < opts.forcedTokens.size(); ++i) {
    const auto &f = opts.forcedTokens[i];
    if (static_cast<int64_t>(f.size()) > std::max<int64_t>(opts.maxNewTokens - 1, 0))
      return ir::makeError("generate: prompt " + std::to_string(i) + " has " + std::to_string(f.size()) +
                           " forced tokens, but only max_new_tokens - 1 = " +
                           std::to_string(std::max<int64_t>(opts.maxNewTokens - 1, 0)) + " tokens are fed back");
    for (int32_t t : f)
      if (t < 0 || t >= vocab)
        return ir::makeError("generate: prompt " + std::to_string(i) + " has forced token id " + std::to_string(t) +
                             ", outside the vocabulary [0, " + std::to_string(vocab) + ")");
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto &p = prompts[i];
    std::string which = "prompt " + std::to_string(i);
    if (p.empty()) return ir::makeError("generate: " + which + " is empty");
    // The last generated token is not fed back, so it needs no cache position.
    int64_t needed = static_cast<int64_t>(p.size()) + std::max<int64_t>(opts.maxNewTokens - 1, 0);
    if (needed > po.maxSeq)
      return ir::makeError("generate: " + which + " has " + std::to_string(p.size()) + " tokens; with " +
                  std::to_string(opts.maxNewTokens) + " new tokens it needs " + std::to_string(needed) +
                  " cache positions, but max_seq is " + std::to_string(po.maxSeq));
    for (int32_t t : p)
      if (t < 0 || t >= vocab)
        return ir::makeError("generate: " + which + " has token id " + std::to_string(t) + ", outside the vocabulary [0, " +
                    std::to_string(vocab) + ")");
  }
  return llvm::Error::success();
}

llvm::Error Session::prefill(const std::vector<std::vector<int32_t>> &prompts, Generation &out) {
  PhaseState &ph = *prefillState;
  const int64_t vocab = engine.vocab(), capacity = ph.rows;
  const size_t rowBytes = static_cast<size_t>(vocab) * 2;
  const Plan::StepBuffers &io = engine.plan().io;
  const cuda::DevicePtr tokensPtr = address(ph, io.tokens), positionsPtr = address(ph, io.positions),
                        seqPtr = address(ph, io.seqOf), outRowsPtr = address(ph, io.outRows);
  const cuda::DevicePtr prefillLogits = address(ph, ph.phase->logits),
                        decodeLogits = address(*decodeState, decodeState->phase->logits);
  std::unique_ptr<PrefillTrace> trace;
  if (prefillTraceFile()) trace = std::make_unique<PrefillTrace>();
  size_t seq = 0, pos = 0;
  while (seq < prompts.size()) {
    // One chunk: as many rows as fit, sequence after sequence.
    std::vector<Segment> segs;
    std::vector<int32_t> tokens, positions, seqOf, outRows;
    std::vector<std::pair<int64_t, int64_t>> lastRows; // (sequence, index among the output rows)
    while (seq < prompts.size() && static_cast<int64_t>(tokens.size()) < capacity) {
      const auto &p = prompts[seq];
      int64_t n = std::min<int64_t>(static_cast<int64_t>(p.size() - pos), capacity - static_cast<int64_t>(tokens.size()));
      Segment s{static_cast<int64_t>(seq), static_cast<int64_t>(pos), n, static_cast<int64_t>(tokens.size())};
      for (int64_t i = 0; i < n; ++i) {
        tokens.push_back(p[pos + i]);
        positions.push_back(static_cast<int32_t>(pos + i));
        seqOf.push_back(static_cast<int32_t>(seq));
        if (options.keepLogits) outRows.push_back(static_cast<int32_t>(s.row + i));
      }
      segs.push_back(s);
      pos += n;
      if (pos == p.size()) {
        if (!options.keepLogits) outRows.push_back(static_cast<int32_t>(s.row + n - 1));
        lastRows.push_back({static_cast<int64_t>(seq), static_cast<int64_t>(outRows.size()) - 1});
        ++seq, pos = 0;
      }
    }
    int64_t rows = static_cast<int64_t>(tokens.size()), nOut = static_cast<int64_t>(outRows.size());
    auto upload = [&](cuda::DevicePtr dst, const std::vector<int32_t> &v) {
      return cuda::copyHostToDeviceAsync(dst, v.data(), v.size() * 4, stream.handle());
    };
    if (auto e = upload(tokensPtr, tokens)) return e;
    if (auto e = upload(positionsPtr, positions)) return e;
    if (auto e = upload(seqPtr, seqOf)) return e;
    if (outRowsPtr)
      if (auto e = upload(outRowsPtr, outRows)) return e;
    for (const PlannedLaunch &l : ph.phase->launches) {
      if (!l.runsFor(nOut)) continue; // the other lowering of the ops after the gather (Plan.h)
      if (l.perSequence) {
        for (const Segment &s : segs) {
          if (trace)
            if (auto e = trace->mark(&l, s.count, stream.handle())) return e;
          if (auto e = enqueueLaunch(l, ph, rows, nOut, nullptr, &s)) return e;
        }
        continue;
      }
      if (trace)
        if (auto e = trace->mark(&l, l.overOutRows ? nOut : rows, stream.handle())) return e;
      if (auto e = enqueueLaunch(l, ph, rows, nOut, nullptr, nullptr)) return e;
    }
    if (trace)
      if (auto e = trace->mark(nullptr, 0, stream.handle())) return e;
    for (auto [b, r] : lastRows)
      if (auto e = cuda::copyDeviceToDevice(decodeLogits + b * rowBytes, prefillLogits + r * rowBytes, rowBytes,
                                            stream.handle()))
        return e;
    if (options.keepLogits) {
      std::vector<uint16_t> host(static_cast<size_t>(nOut * vocab));
      if (auto e = cuda::copyDeviceToHost(host.data(), prefillLogits, host.size() * 2, stream.handle())) return e;
      for (const Segment &s : segs) {
        auto &dst = out.logits[s.seq];
        for (int64_t i = 0; i < s.count * vocab; ++i) dst.push_back(bf16ToFloat(host[s.row * vocab + i]));
      }
    }
  }
  if (trace) return trace->write(engine.plan(), prefillTraceFile());
  return llvm::Error::success();
}

llvm::Expected<Generation> Session::generate(const std::vector<std::vector<int32_t>> &prompts,
                                             const GenerateOptions &opts) {
  if (auto e = checkPrompts(prompts, opts)) return e;
  const Plan &plan = engine.plan();
  const int64_t B = static_cast<int64_t>(prompts.size()), vocab = engine.vocab();
  Generation out;
  out.tokens.resize(B);
  if (options.keepLogits) out.logits.resize(B);
  for (const auto &p : prompts) out.promptTokens += static_cast<int64_t>(p.size());

  auto t0 = cuda::Event::create(), t1 = cuda::Event::create(), t2 = cuda::Event::create();
  if (!t0) return t0.takeError();
  if (!t1) return t1.takeError();
  if (!t2) return t2.takeError();
  if (auto e = t0->record(stream.handle())) return e;
  if (auto e = prefill(prompts, out)) return e;
  if (opts.maxNewTokens == 0) {
    if (auto e = t1->record(stream.handle())) return e;
    if (auto e = t1->synchronize()) return e;
    auto ms = cuda::Event::elapsedMs(*t0, *t1);
    if (!ms) return ms.takeError();
    out.prefillMs = *ms;
    return out;
  }

  // Decode state: each sequence's last prompt token is "current"; the tail selects the first new token and
  // advances positions to the prompt length.
  const Plan::StepBuffers &io = plan.io;
  PhaseState &dph = *decodeState;
  std::vector<int32_t> positions(B), context(B), seqOf(B), zeros(B, 0);
  for (int64_t b = 0; b < B; ++b) {
    positions[b] = static_cast<int32_t>(prompts[b].size()) - 1;
    context[b] = static_cast<int32_t>(prompts[b].size());
    seqOf[b] = static_cast<int32_t>(b);
  }
  auto put = [&](cuda::DevicePtr dst, const std::vector<int32_t> &v) {
    return dst ? cuda::copyHostToDeviceAsync(dst, v.data(), v.size() * 4, stream.handle()) : llvm::Error::success();
  };
  if (auto e = put(address(dph, io.tokens), zeros)) return e;
  if (auto e = put(address(dph, io.positions), positions)) return e;
  if (auto e = put(address(dph, io.contextLen), context)) return e;
  if (auto e = put(address(dph, io.seqOf), seqOf)) return e;
  if (auto e = put(address(dph, io.step), {0})) return e; // the decode steps recorded so far
  if (auto e = enqueueDecodeStep(B, opts, /*tailOnly=*/true)) return e;
  // Teacher forcing: after step k's advance wrote the chosen tokens as the next input, sequence b's input
  // becomes forcedTokens[b][k] (history keeps what the model chose).
  const cuda::DevicePtr inputTokens = address(dph, io.tokens);
  auto force = [&](int64_t k) -> llvm::Error {
    for (int64_t b = 0; b < static_cast<int64_t>(opts.forcedTokens.size()); ++b)
      if (k < static_cast<int64_t>(opts.forcedTokens[b].size()))
        if (auto e = cuda::copyHostToDeviceAsync(inputTokens + b * 4, &opts.forcedTokens[b][k], 4, stream.handle()))
          return e;
    return llvm::Error::success();
  };
  if (auto e = force(0)) return e;
  if (auto e = t1->record(stream.handle())) return e;

  // The decode steps, read back every few steps to stop at a stop token.
  const bool persistent = usePersistent(opts);
  if (persistent)
    if (auto e = preparePersistent(B, !(opts.temperature > 0.f))) return e;
  GraphKey key{B, opts.temperature, opts.topP, opts.topK, opts.seed, persistent};
  if (opts.graph && !(graph.valid() && graphKey == key)) {
    graph = cuda::Graph();
    auto g = cuda::Graph::capture(stream, [&] { return enqueueDecodeStep(B, opts, false); });
    if (!g) return g.takeError();
    graph = std::move(*g);
    graphKey = key;
  }
  const cuda::DevicePtr history = address(dph, io.history);
  const cuda::DevicePtr decodeLogits = address(dph, dph.phase->logits);
  std::vector<int32_t> recorded; // history rows read so far, [rows read, B]
  std::vector<bool> done(B, false);
  int64_t steps = 0, maxSteps = opts.maxNewTokens - 1;
  auto readTokens = [&]() -> llvm::Error { // the rows recorded since the last read
    size_t have = recorded.size(), want = static_cast<size_t>((steps + 1) * B);
    recorded.resize(want);
    if (auto e = cuda::copyDeviceToHost(recorded.data() + have, history + have * 4, (want - have) * 4, stream.handle()))
      return e;
    for (int64_t b = 0; b < B; ++b) {
      auto &toks = out.tokens[b];
      while (!done[b] && static_cast<int64_t>(toks.size()) < steps + 1) {
        int32_t t = recorded[toks.size() * B + b];
        toks.push_back(t);
        if (llvm::is_contained(opts.stopTokens, t)) done[b] = true;
        if (opts.onToken && !opts.onToken(b, t)) done[b] = true;
      }
      if (static_cast<int64_t>(toks.size()) >= opts.maxNewTokens) done[b] = true;
    }
    return llvm::Error::success();
  };
  auto allDone = [&] { return llvm::all_of(done, [](bool d) { return d; }); };
  auto keepStepLogits = [&]() -> llvm::Error {
    std::vector<uint16_t> host(static_cast<size_t>(B * vocab));
    if (auto e = cuda::copyDeviceToHost(host.data(), decodeLogits, host.size() * 2, stream.handle())) return e;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < vocab; ++i) out.logits[b].push_back(bf16ToFloat(host[b * vocab + i]));
    return llvm::Error::success();
  };
  if (auto e = readTokens()) return e;
  while (steps < maxSteps && !allDone()) {
    if (opts.graph) {
      if (auto e = graph.launch(stream)) return e;
    } else if (auto e = enqueueDecodeStep(B, opts, false)) {
      return e;
    }
    ++steps;
    if (auto e = force(steps)) return e;
    if (options.keepLogits)
      if (auto e = keepStepLogits()) return e;
    if (steps % kStopCheckInterval == 0 || steps == maxSteps || options.keepLogits || opts.onToken)
      if (auto e = readTokens()) return e;
  }
  if (auto e = t2->record(stream.handle())) return e;
  if (auto e = t2->synchronize()) return e;
  if (auto e = readTokens()) return e;
  if (persistent && steps > 0 && traceFile())
    if (auto e = writeTrace(traceFile())) return e;
  auto pre = cuda::Event::elapsedMs(*t0, *t1), dec = cuda::Event::elapsedMs(*t1, *t2);
  if (!pre) return pre.takeError();
  if (!dec) return dec.takeError();
  out.prefillMs = *pre;
  out.decodeMs = *dec;
  out.decodeSteps = steps;
  // Keep the logits rows of the tokens that were fed back, as the reference does: one per generated token
  // before the last of its sequence.
  if (options.keepLogits)
    for (int64_t b = 0; b < B; ++b) {
      size_t keepRows = prompts[b].size() + (out.tokens[b].empty() ? 0 : out.tokens[b].size() - 1);
      out.logits[b].resize(keepRows * static_cast<size_t>(vocab));
    }
  return out;
}

} // namespace minfer::rt
