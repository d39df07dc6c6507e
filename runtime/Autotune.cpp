// runtime/Autotune.cpp — compile, time and pick tiles on the GPU (Autotune.h).
#include "runtime/Autotune.h"

#include "jit/KernelCache.h"
#include "jit/Nvrtc.h"
#include "jit/ParallelCompile.h"
#include "compiler/Plan.h"
#include "compiler/kernels/Attention.h"
#include "compiler/kernels/Epilogue.h"
#include "compiler/kernels/Gemm.h"
#include "compiler/kernels/Gemv.h"
#include "ir/Diagnostics.h"
#include "runtime/Driver.h"
#include "runtime/KernelLoader.h"
#include "runtime/Session.h"
#include "runtime/Timing.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <optional>

namespace minfer::rt {
namespace {

// One tunable kernel at one bucket: the plan's spec (the heuristic default tile) and the rows it is timed at.
struct Work {
  std::string key, bucket;
  std::shared_ptr<KernelSpec> spec;
  int64_t rows = 0;
  std::vector<std::shared_ptr<KernelSpec>> candidates; // the default first
};

// The plan options that make a plan run its matmuls at `bucket`'s rows.
PlanOptions optionsFor(const ir::Module &m, llvm::StringRef bucket) {
  PlanOptions po;
  int64_t rows = bucketRows(bucket);
  const ir::DimDecl *maxPos = m.findDim("max_pos");
  int64_t positions = maxPos ? maxPos->value : 4096;
  if (bucket.startswith("decode")) {
    po.maxBatch = rows;
    po.maxSeq = std::min<int64_t>(positions, 256); // the matmuls do not depend on it; keeps the caches small
  } else {
    po.maxBatch = 1;
    po.maxSeq = positions;
    po.maxPrefillRows = std::min(rows, positions);
  }
  return po;
}

// The device buffers a matmul launch reads and writes, sized for `w`: the weights in several copies (rotated
// so L2 does not hold them between runs), the activations, and everything an epilogue or prologue reads.
struct MatmulBuffers {
  std::vector<cuda::DeviceBuffer> weights;
  cuda::DeviceBuffer a, c, residual, bias, positions, seqOf, floats, norm, cache, keys, rowSq;
  size_t cacheHalf = 0; // the V cache's offset in `cache`
};

llvm::Expected<MatmulBuffers> buffersFor(int64_t n, int64_t k, int64_t rows, int64_t kvCols) {
  MatmulBuffers b;
  size_t wBytes = static_cast<size_t>(n * k * 2);
  int copies = timing::copiesFor(double(wBytes));
  for (int i = 0; i < copies; ++i) {
    auto w = timing::filled(wBytes);
    if (!w) return w.takeError();
    b.weights.push_back(std::move(*w));
  }
  auto make = [](size_t bytes, cuda::DeviceBuffer &out) -> llvm::Error {
    auto buf = timing::filled(bytes);
    if (!buf) return buf.takeError();
    out = std::move(*buf);
    return llvm::Error::success();
  };
  if (auto e = make(static_cast<size_t>(rows * k * 2), b.a)) return e;
  if (auto e = make(static_cast<size_t>(rows * n * 2), b.c)) return e;
  if (auto e = make(static_cast<size_t>(rows * n * 2), b.residual)) return e;
  if (auto e = make(static_cast<size_t>(n * 2), b.bias)) return e;
  if (auto e = make(static_cast<size_t>(k * 4), b.norm)) return e;    // gamma / beta of any element type
  // The qkv epilogue as a step runs it: row r of one sequence at position r, so each row reads its own row of
  // the rotation table ([rows, head_dim / 2] float2, head_dim <= 256) and writes its own rows of the K and V
  // caches (kvCols columns each; 0: not a qkv), max_seq = rows. (Until session 27 every row read the table's
  // row 0 and wrote one cache row.)
  const int64_t seqRows = std::max<int64_t>(rows, 1);
  if (auto e = make(static_cast<size_t>(kvCols ? seqRows * 256 * 4 : 16), b.floats)) return e;
  b.cacheHalf = static_cast<size_t>(std::max<int64_t>(seqRows * kvCols * 2, 16));
  if (auto e = make(2 * b.cacheHalf, b.cache)) return e;
  // Row squares: a partial per 16 columns at most (the narrowest wgmma tile), and the reader's 8, each what
  // A's rows give (timing::rowSquarePartial), so a folded norm scales the products as a model's would.
  auto rowSq = timing::filledRowSquares(
      static_cast<size_t>(std::max<int64_t>(rows, 1) * std::max<int64_t>((n + 15) / 16, 8) * 4), k, 8);
  if (!rowSq) return rowSq.takeError();
  b.rowSq = std::move(*rowSq);
  auto keys = cuda::DeviceBuffer::alloc(static_cast<size_t>(std::max<int64_t>(rows, 1) * 8));
  if (!keys) return keys.takeError();
  if (auto e = keys->fill(0)) return e; // the lm_head's argmax keys (EpiArgmax)
  b.keys = std::move(*keys);
  std::vector<int32_t> iota(static_cast<size_t>(seqRows));
  for (size_t i = 0; i < iota.size(); ++i) iota[i] = static_cast<int32_t>(i);
  auto positions = cuda::DeviceBuffer::alloc(iota.size() * 4), seqOf = cuda::DeviceBuffer::alloc(iota.size() * 4);
  if (!positions) return positions.takeError();
  if (!seqOf) return seqOf.takeError();
  if (auto e = positions->upload(iota.data(), iota.size() * 4)) return e;
  if (auto e = seqOf->fill(0)) return e; // sequence 0
  b.positions = std::move(*positions);
  b.seqOf = std::move(*seqOf);
  return b;
}

// How many launches a gemv's and a gemm's timed runs chain (timing::timeMedianChained).
constexpr int kGemvChain = 8;
constexpr int kGemmChain = 4;

// Median microseconds of `spec` at `rows` rows.
llvm::Expected<double> timeCandidate(const KernelSpec &spec, const Target &target, KernelCache &cache,
                                     MatmulBuffers &b, int64_t rows, const AutotuneOptions &opts) {
  auto kernel = loadKernel(spec, target, &cache);
  if (!kernel) return kernel.takeError();
  MatmulParams p;
  p.C = b.c.ptr();
  p.A = b.a.ptr();
  p.rows = static_cast<int32_t>(rows);
  EpiParams &epi = p.epi;
  epi.bias = b.bias.ptr();
  epi.residual = b.residual.ptr();
  epi.scale = 1.f;
  epi.max_seq = static_cast<int32_t>(std::max<int64_t>(rows, 1));
  epi.positions = b.positions.ptr();
  epi.seq_of = b.seqOf.ptr();
  epi.rope = b.floats.ptr();
  epi.k_cache = b.cache.ptr();
  epi.v_cache = b.cache.ptr() + b.cacheHalf;
  epi.gamma = b.norm.ptr();
  epi.beta = b.norm.ptr();
  epi.eps = 1e-5f;
  epi.argmax = b.keys.ptr();
  epi.row_sq = b.rowSq.ptr(); // written by a residual gemm with row squares, read by one that folds a norm
  epi.row_sq_parts = 8;
  auto launch = [&](int i, bool dependent) {
    p.W = b.weights[static_cast<size_t>(i) % b.weights.size()].ptr();
    return launchKernel(kernel->fn, spec, rows, p, nullptr, dependent);
  };
  // A gemv runs in the decode step behind the kernel before it, under programmatic dependent launch, and
  // loads its weights before it waits: timed alone, that overlap is lost and the ranking changes (H200,
  // bench/results/session19: at one row alone the FMA kernel led the wgmma one on every TinyLlama matrix,
  // 6.9 against 8.4 us on 2048 x 2048, and the tuner picked it, but TinyLlama's step took 0.850 ms with the
  // wgmma gemvs and 0.867 with the tuner's). So a gemv is timed in a chain of such launches.
  // A wgmma gemm, too, asks for its first slices of W before it waits, and a prefill runs its kernels as
  // programmatic dependents (runtime/Session.cpp): so it is timed in a (shorter) chain as well.
  const bool gemv = dynamic_cast<const GemvSpec *>(&spec) != nullptr;
  auto ms = timing::timeMedianChained(launch, gemv ? kGemvChain : kGemmChain, opts.warmup, opts.iters);
  if (!ms) return ms.takeError();
  if (auto e = cuda::synchronize()) return e; // a launch that faulted shows here, not in the next candidate
  return *ms * 1e3;
}

// Median microseconds of `launch` run alone, back to back (timing::timeMedian), then a synchronize: a launch
// that faulted shows here, not in the next candidate.
llvm::Expected<double> medianMicroseconds(const std::function<llvm::Error(int)> &launch, const AutotuneOptions &opts) {
  auto ms = timing::timeMedian(launch, opts.warmup, opts.iters);
  if (!ms) return ms.takeError();
  if (auto e = cuda::synchronize()) return e;
  return *ms * 1e3;
}

// Median microseconds of a prefill attention tile over one sequence of `rows` tokens (its whole cache).
llvm::Expected<double> timeAttentionPrefill(const AttentionPrefillSpec &spec, const Target &target, KernelCache &cache,
                                            int64_t rows, const AutotuneOptions &opts) {
  auto kernel = loadKernel(spec, target, &cache);
  if (!kernel) return kernel.takeError();
  size_t qBytes = static_cast<size_t>(rows * spec.heads * spec.headDim * 2);
  size_t kvBytes = static_cast<size_t>(rows * spec.kvHeads * spec.headDim * 2);
  auto q = timing::filled(qBytes), k = timing::filled(kvBytes), v = timing::filled(kvBytes), o = timing::filled(qBytes);
  for (auto *b : {&q, &k, &v, &o})
    if (!*b) return b->takeError();
  AttentionPrefillParams p;
  p.q = q->ptr();
  p.k_cache = k->ptr();
  p.v_cache = v->ptr();
  p.out = o->ptr();
  p.rows = static_cast<int32_t>(rows);
  p.scale = 1.f / std::sqrt(float(spec.headDim));
  return medianMicroseconds([&](int) { return launchKernel(kernel->fn, spec, rows, p); }, opts);
}

// Median microseconds of a decode attention tile over `batch` sequences whose contexts fill the spec's cache
// (maxSeq positions each: the decode buckets plan min(max_pos, 256)). Its own time only: the in-step pass
// ranks its warp counts in the step (AttentionDecodeSpec::stepNeighbours).
llvm::Expected<double> timeAttentionDecode(const AttentionDecodeSpec &spec, const Target &target, KernelCache &cache,
                                           int64_t batch, const AutotuneOptions &opts) {
  auto kernel = loadKernel(spec, target, &cache);
  if (!kernel) return kernel.takeError();
  const size_t qBytes = static_cast<size_t>(batch * spec.heads * spec.headDim * 2);
  const size_t kvBytes = static_cast<size_t>(batch * spec.maxSeq * spec.kvHeads * spec.headDim * 2);
  auto q = timing::filled(qBytes), k = timing::filled(kvBytes), v = timing::filled(kvBytes), o = timing::filled(qBytes);
  auto ws = timing::filled(spec.workspaceBytes(batch, spec.maxSeq));
  for (auto *b : {&q, &k, &v, &o, &ws})
    if (!*b) return b->takeError();
  auto arrivals = cuda::DeviceBuffer::alloc(spec.arrivalsBytes(batch)); // zero, and left zero by every launch
  auto contexts = cuda::DeviceBuffer::alloc(static_cast<size_t>(batch) * 4);
  if (!arrivals) return arrivals.takeError();
  if (!contexts) return contexts.takeError();
  if (auto e = arrivals->fill(0)) return e;
  std::vector<int32_t> context(static_cast<size_t>(batch), static_cast<int32_t>(spec.maxSeq));
  if (auto e = contexts->upload(context.data(), context.size() * 4)) return e;
  AttentionDecodeParams p;
  p.q = q->ptr();
  p.k_cache = k->ptr();
  p.v_cache = v->ptr();
  p.out = o->ptr();
  p.partial_out = ws->ptr();
  p.partial_lse = ws->ptr() + spec.partialLseOffset(batch, spec.maxSeq);
  p.arrivals = arrivals->ptr();
  p.context_len = contexts->ptr();
  p.max_seq = static_cast<int32_t>(spec.maxSeq);
  p.scale = 1.f / std::sqrt(float(spec.headDim));
  return medianMicroseconds([&](int) { return launchKernel(kernel->fn, spec, batch, p); }, opts);
}

// W's shape of a gemm or gemv spec.
// A matmul's W [n, k], and the columns its epilogue writes to each of the K and V caches (kv heads x head
// dim for a qkv, else 0).
struct MatmulShape {
  int64_t n = 0, k = 0, kvCols = 0;
};
MatmulShape matmulShape(const KernelSpec &s) {
  auto of = [](int64_t n, int64_t k, const Epilogue &epi) {
    return MatmulShape{n, k, epi.kind == Epilogue::Kind::Qkv ? int64_t(epi.kvHeads) * epi.headDim : 0};
  };
  if (auto *g = dynamic_cast<const GemmSpec *>(&s)) return of(g->n, g->k, g->epi);
  if (auto *g = dynamic_cast<const GemvSpec *>(&s)) return of(g->n, g->k, g->epi);
  return {};
}

} // namespace

llvm::Expected<DeviceFingerprint> deviceFingerprint() {
  auto info = cuda::deviceInfo();
  if (!info) return info.takeError();
  DeviceFingerprint d;
  d.name = info->name;
  d.smCount = info->smCount;
  d.ccMajor = info->major;
  d.ccMinor = info->minor;
  d.driverVersion = info->driverVersion;
  d.nvrtcVersion = nvrtcVersion();
  return d;
}

namespace {

// The target of device 0, once `db` is known to be its database (`who` names the caller in the error).
llvm::Expected<Target> deviceTargetFor(const TuningDb &db, llvm::StringRef who) {
  auto fp = deviceFingerprint();
  if (!fp) return fp.takeError();
  if (!(db.device == *fp))
    return ir::makeError(who + ": the tuning database is for " + db.device.id() + ", the device is " + fp->id());
  return parseTarget(fp->target());
}

} // namespace

llvm::Expected<AutotuneReport> autotune(const ir::Module &m, TuningDb &db, const AutotuneOptions &opts) {
  using Clock = std::chrono::steady_clock;
  auto target = deviceTargetFor(db, "autotune");
  if (!target) return target.takeError();
  AutotuneReport report;

  // Every tunable (kernel, bucket) of the plans, once.
  std::vector<Work> work;
  llvm::StringSet<> seen;
  for (const std::string &bucket : opts.buckets) {
    if (!isTuningBucket(bucket)) return ir::makeError("autotune: unknown bucket '" + bucket + "'");
    auto plan = buildPlan(m, *target, optionsFor(m, bucket));
    if (!plan) return plan.takeError();
    bool decode = llvm::StringRef(bucket).startswith("decode");
    const PhasePlan &phase = decode ? plan->decode : plan->prefill;
    int64_t rows = decode ? plan->options.maxBatch : plan->options.maxPrefillRows;
    for (const PlannedLaunch &l : phase.launches) {
      // The gemvs after a prefill's gather cover a few output rows, not the bucket's: they keep their default.
      if (!decode && l.maxOutRows) continue;
      const std::shared_ptr<KernelSpec> &spec = plan->kernels[l.kernel];
      std::string key = spec->tuningKey();
      if (key.empty() || !seen.insert(TuningDb::entryKey(key, bucket)).second) continue;
      ++report.kernels;
      // An entry timed against another default than today's is timed again (TuningEntry::defaultMoved), and
      // so is one that lacks step neighbours today's tuner keeps (missingStepNeighbours).
      const TuningEntry *had = db.find(key, bucket);
      if (!opts.retune && had && !had->defaultMoved(spec->tileName()) &&
          missingStepNeighbours(*had, *spec, *target).empty()) {
        ++report.skipped;
        continue;
      }
      if (had && !opts.retune) ++report.stale;
      Work w{key, bucket, spec, rows, {spec}};
      for (auto &c : spec->tuningCandidates(*target, rows))
        if (c->name() != spec->name()) w.candidates.push_back(std::move(c));
      work.push_back(std::move(w));
    }
  }

  // Compile every candidate at once, in parallel, into the cache; a candidate that fails here fails again
  // (and is counted) when it is timed.
  auto t0 = Clock::now();
  KernelCache cache = KernelCache::openDefault();
  std::vector<KernelSource> sources;
  llvm::StringSet<> names;
  for (const Work &w : work)
    for (const auto &c : w.candidates)
      if (names.insert(c->name()).second) sources.push_back(kernelSource(*c));
  unsigned jobs = opts.jobs ? opts.jobs : defaultJobs();
  if (!sources.empty())
    if (auto compiled = compileAll(sources, *target, {}, cache, jobs); !compiled)
      llvm::consumeError(compiled.takeError()); // each candidate is compiled (or fails) again below, alone
  report.compileSeconds = std::chrono::duration<double>(Clock::now() - t0).count();

  auto t1 = Clock::now();
  for (size_t i = 0; i < work.size(); ++i) {
    Work &w = work[i];
    AutotuneProgress p;
    p.index = i + 1;
    p.total = work.size();
    p.kernel = TuningDb::entryKey(w.key, w.bucket);
    p.candidates = static_cast<int>(w.candidates.size());
    p.defaultTile = w.spec->tileName();
    double elapsed = std::chrono::duration<double>(Clock::now() - t1).count();
    p.secondsLeft = i ? elapsed / double(i) * double(work.size() - i) : 0;
    if (opts.progress) opts.progress(p);

    std::function<llvm::Expected<double>(const KernelSpec &)> timeOne;
    std::optional<MatmulBuffers> bufs;
    if (dynamic_cast<const AttentionPrefillSpec *>(w.spec.get())) {
      timeOne = [&](const KernelSpec &c) {
        return timeAttentionPrefill(static_cast<const AttentionPrefillSpec &>(c), *target, cache, w.rows, opts);
      };
    } else if (dynamic_cast<const AttentionDecodeSpec *>(w.spec.get())) {
      timeOne = [&](const KernelSpec &c) {
        return timeAttentionDecode(static_cast<const AttentionDecodeSpec &>(c), *target, cache, w.rows, opts);
      };
    } else {
      MatmulShape shape = matmulShape(*w.spec);
      auto made = buffersFor(shape.n, shape.k, w.rows, shape.kvCols);
      if (!made) return made.takeError();
      bufs = std::move(*made);
      timeOne = [&](const KernelSpec &c) { return timeCandidate(c, *target, cache, *bufs, w.rows, opts); };
    }
    SearchResult r = searchFastest(w.candidates.size(), [&](size_t c) { return timeOne(*w.candidates[c]); });
    // The winner's step neighbours that are not candidates already, timed now (compiled one by one), so that
    // the in-step pass can try them too.
    std::vector<std::shared_ptr<KernelSpec>> neighbours = w.spec->stepNeighbours(*target);
    if (r.best > 0)
      for (auto &n : w.candidates[static_cast<size_t>(r.best)]->stepNeighbours(*target)) {
        bool listed = false;
        for (const auto &c : w.candidates) listed = listed || c->tileName() == n->tileName();
        if (listed) {
          neighbours.push_back(std::move(n));
          continue;
        }
        auto us = timeOne(*n);
        if (!us) r.failures.push_back(llvm::toString(us.takeError())); // counted with the candidates, as a failed one
        w.candidates.push_back(n);
        r.us.push_back(us ? *us : -1);
        neighbours.push_back(std::move(n));
      }
    report.candidates += static_cast<int>(w.candidates.size());
    report.failed += static_cast<int>(r.failures.size());
    if (r.best < 0)
      return ir::makeError("autotune: no candidate of " + p.kernel + " ran; the first failure: " +
                           (r.failures.empty() ? std::string("none") : r.failures[0]));
    TuningEntry e;
    e.tile = w.candidates[static_cast<size_t>(r.best)]->tileName();
    e.us = r.us[static_cast<size_t>(r.best)];
    e.defaultTile = p.defaultTile;
    e.defaultUs = r.us[0];
    e.candidates = static_cast<int>(w.candidates.size()) - static_cast<int>(r.failures.size());
    e.failed = static_cast<int>(r.failures.size());
    for (size_t c = 0; c < w.candidates.size(); ++c)
      if (!(r.us[c] > 0)) e.failedTiles.push_back(w.candidates[c]->tileName());
    // The next fastest, for the in-step pass: neither the winner nor the default (candidate 0).
    std::vector<size_t> order;
    for (size_t c = 1; c < w.candidates.size(); ++c)
      if (r.us[c] > 0 && static_cast<int>(c) != r.best) order.push_back(c);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return r.us[a] < r.us[b]; });
    for (size_t c : order) {
      if (e.runnersUp.size() == TuningEntry::kRunnersUp) break;
      e.runnersUp.push_back({w.candidates[c]->tileName(), r.us[c]});
    }
    // Then the step neighbours of the default and of the winner, whatever their own time, where they ran.
    for (const auto &n : neighbours)
      for (size_t c : order)
        if (w.candidates[c]->tileName() == n->tileName() &&
            std::none_of(e.runnersUp.begin(), e.runnersUp.end(), [&](const TuningEntry::Timed &t) { return t.tile == n->tileName(); }))
          e.runnersUp.push_back({n->tileName(), r.us[c]});
    db.entries[TuningDb::entryKey(w.key, w.bucket)] = e;
    ++report.tuned;
    p.done = true;
    p.bestTile = e.tile;
    p.bestUs = e.us;
    p.defaultUs = e.defaultUs;
    elapsed = std::chrono::duration<double>(Clock::now() - t1).count();
    p.secondsLeft = elapsed / double(i + 1) * double(work.size() - i - 1);
    if (opts.progress) opts.progress(p);
  }
  report.timeSeconds = std::chrono::duration<double>(Clock::now() - t1).count();
  return report;
}

namespace {

// Milliseconds a decode step of `rows` sequences takes with `db`'s tiles: the median over `repeats` generates
// of `steps` greedy steps each after a prompt of `context` tokens per sequence (fewer where the plan's positions
// would not hold the steps), after one warm-up generate that captures the step's graph. A prefill bucket's: the
// median over `repeats` of the mean of kPrefillRuns prefills of one sequence of the plan's prefill rows, back to
// back as a server's would run (a sustained prefill runs under the GPU's power cap, at lower clocks than the
// kernels' own short timings see: bench/NOTES.md, session 28), after one warm-up prefill.
constexpr int kPrefillRuns = 4;
// `last` is the engine of the configuration timed before (null at first): the new one shares its weights where
// their layouts agree (EngineOptions::weightsFrom), so a configuration costs its kernels, not a checkpoint read,
// and it becomes `last` in turn.
llvm::Expected<double> stepMilliseconds(const ir::Module &m, const TuningDb &db, llvm::StringRef bucket,
                                        const StepTuneOptions &opts, std::unique_ptr<Engine> &last) {
  EngineOptions eo = opts.engine;
  eo.tuned = true;
  eo.tuning = db;
  eo.plan = optionsFor(m, bucket);
  eo.weightsFrom = last.get();
  auto loaded = Engine::load(opts.model, eo);
  if (!loaded && last) {
    // Not shared, and perhaps no room for a second copy beside `last`'s: once more, alone.
    llvm::consumeError(loaded.takeError());
    last.reset();
    eo.weightsFrom = nullptr;
    loaded = Engine::load(opts.model, eo);
  }
  if (!loaded) return loaded.takeError();
  last = std::move(*loaded);
  auto session = Session::create(*last);
  if (!session) return session.takeError();
  const bool decode = bucket.startswith("decode");
  std::vector<std::vector<int32_t>> prompts;
  if (decode) {
    int64_t context = std::max<int64_t>(1, std::min<int64_t>(opts.context, eo.plan.maxSeq - opts.steps - 2));
    prompts.assign(static_cast<size_t>(bucketRows(bucket)), std::vector<int32_t>(static_cast<size_t>(context), 1));
  }
  if (!decode) prompts.assign(1, std::vector<int32_t>(static_cast<size_t>(eo.plan.maxPrefillRows), 1));
  GenerateOptions go;
  go.maxNewTokens = decode ? opts.steps + 1 : 0;
  std::vector<double> ms;
  for (int r = 0; r <= opts.repeats; ++r) {
    double sum = 0;
    int runs = 0;
    for (int i = 0; i < (decode || r == 0 ? 1 : kPrefillRuns); ++i) {
      auto g = (*session)->generate(prompts, go);
      if (!g) return g.takeError();
      if (decode && g->decodeSteps > 0) sum += g->decodeMs / double(g->decodeSteps), ++runs;
      if (!decode) sum += g->prefillMs, ++runs;
    }
    if (r > 0 && runs > 0) ms.push_back(sum / runs);
  }
  if (ms.empty()) return ir::makeError("in-step tuning: nothing ran for " + bucket);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

} // namespace

llvm::Expected<StepTuneReport> tuneInStep(const ir::Module &m, TuningDb &db, const StepTuneOptions &opts) {
  if (opts.steps < 1 || opts.repeats < 1 || opts.context < 1)
    return ir::makeError("in-step tuning: need steps >= 1, repeats >= 1 and a context of >= 1 token");
  auto target = deviceTargetFor(db, "in-step tuning");
  if (!target) return target.takeError();
  StepTuneReport report;
  for (const std::string &bucket : opts.buckets) {
    if (!isTuningBucket(bucket)) return ir::makeError("in-step tuning: unknown bucket '" + bucket + "'");
    const bool decode = llvm::StringRef(bucket).startswith("decode");
    const char *const what = decode ? "a step" : "a prefill";
    // The step's (or the prefill's) tuned kernels that have alternatives to their tile: the default where it
    // is another tile, then the runners-up of their own timing (where an earlier pass moved a kernel, the
    // tile its own timing picked is the first of them). A prefill's gemvs after the gather cover a few output
    // rows and keep their default, as in autotune.
    auto plan = buildPlan(m, *target, optionsFor(m, bucket));
    if (!plan) return plan.takeError();
    std::vector<std::string> keys, touched;
    std::vector<std::vector<TuningEntry::Timed>> alternatives; // per key: options 1..
    llvm::StringSet<> seen;
    for (const PlannedLaunch &l : (decode ? plan->decode : plan->prefill).launches) {
      if (!decode && l.maxOutRows) continue;
      std::string key = plan->kernels[l.kernel]->tuningKey();
      if (key.empty() || !seen.insert(key).second) continue;
      const TuningEntry *e = db.find(key, bucket);
      if (!e) continue;
      touched.push_back(TuningDb::entryKey(key, bucket));
      std::vector<TuningEntry::Timed> alt;
      auto add = [&](const TuningEntry::Timed &t) {
        if (t.tile.empty() || t.tile == e->tile) return;
        for (const TuningEntry::Timed &a : alt)
          if (a.tile == t.tile) return;
        alt.push_back(t);
      };
      add({e->defaultTile, e->defaultUs});
      for (const TuningEntry::Timed &t : e->runnersUp) add(t);
      if (alt.empty()) continue;
      keys.push_back(touched.back());
      alternatives.push_back(std::move(alt));
    }
    if (keys.empty()) continue;
    ++report.buckets;
    std::vector<int> options;
    for (const auto &alt : alternatives) options.push_back(1 + static_cast<int>(alt.size()));
    // Kernel i's tile under `choice` where it moves it off its tuned tile, and a configuration in words.
    auto altOf = [&](size_t i, const std::vector<int> &choice) -> const TuningEntry::Timed & {
      return alternatives[i][static_cast<size_t>(choice[i] - 1)];
    };
    auto describe = [&](const std::vector<int> &choice) {
      std::string which;
      for (size_t i = 0; i < keys.size(); ++i)
        if (choice[i] > 0) which += (which.empty() ? "" : ", ") + keys[i] + " on " + altOf(i, choice).tile;
      return which.empty() ? std::string("every tuned tile") : which;
    };
    // Every kernel on its default tile (option 0 where the tuned tile is the default): a second start.
    std::vector<int> defaults(keys.size(), 0);
    for (size_t i = 0; i < keys.size(); ++i)
      for (size_t a = 0; a < alternatives[i].size(); ++a)
        if (alternatives[i][a].tile == db.entries[keys[i]].defaultTile) defaults[i] = static_cast<int>(a) + 1;
    std::unique_ptr<Engine> last; // the engine of the configuration timed last, whose weights the next shares
    auto r = searchInStep(options, [&](const std::vector<int> &choice) -> llvm::Expected<double> {
      TuningDb trial = db;
      for (size_t i = 0; i < keys.size(); ++i)
        if (choice[i] > 0) trial.entries[keys[i]].tile = altOf(i, choice).tile;
      auto ms = stepMilliseconds(m, trial, bucket, opts, last);
      if (ms && opts.log) opts.log(llvm::formatv("{0}: {1:f3} ms {2} with {3}", bucket, *ms, what, describe(choice)).str());
      return ms;
    }, opts.noise, defaults);
    if (!r) return r.takeError();
    if (opts.log)
      opts.log(llvm::formatv("{0}: keeps {1:f3} ms {5} (every tuned tile: {2:f3}; every default: {3:f3}) with {4}",
                             bucket, r->bestMs, r->firstMs, r->startMs > 0 ? r->startMs : r->firstMs,
                             describe(r->choice), what)
                   .str());
    report.timed += r->timed;
    for (size_t i = 0; i < keys.size(); ++i)
      if (r->choice[i] > 0) {
        TuningEntry &e = db.entries[keys[i]];
        const TuningEntry::Timed kept = altOf(i, r->choice);
        if (e.kernelTile.empty()) e.kernelTile = e.tile;
        // The tile it leaves stays an alternative for a later pass.
        e.runnersUp.erase(std::remove_if(e.runnersUp.begin(), e.runnersUp.end(),
                                         [&](const TuningEntry::Timed &t) { return t.tile == kept.tile; }),
                          e.runnersUp.end());
        if (e.tile != e.defaultTile) e.runnersUp.insert(e.runnersUp.begin(), {e.tile, e.us});
        e.tile = kept.tile;
        e.us = kept.us;
        if (e.tile == e.kernelTile) e.kernelTile.clear(); // back on its own timing's pick
        ++report.moved;
      }
    for (const std::string &k : touched) db.entries[k].stepMs = r->bestMs;
  }
  return report;
}

} // namespace minfer::rt
