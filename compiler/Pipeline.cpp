// compiler/Pipeline.cpp — load → passes → tuning → plan → sources → compile, for the Engine and minferc.
#include "compiler/Pipeline.h"

#include "compiler/Fuse.h"
#include "io/HFImport.h"
#include "ir/Diagnostics.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

#include <chrono>

#ifndef MINFER_VERSION
#define MINFER_VERSION "unknown"
#endif

namespace minfer {
namespace {


llvm::Expected<std::unique_ptr<ir::Module>> parseVerified(std::unique_ptr<llvm::MemoryBuffer> buf) {
  auto m = ir::parseModule(std::move(buf));
  if (!m) return m.takeError();
  if (auto e = ir::verifyModule(**m)) return e;
  return m;
}

// A bundle's plan sizes, read back from its plan JSON.
llvm::Expected<PlanOptions> bundlePlanOptions(const Bundle &b, llvm::StringRef path) {
  PlanOptions o;
  auto batch = b.plan.getInteger("max_batch"), rows = b.plan.getInteger("max_prefill_rows"),
       seq = b.plan.getInteger("max_seq");
  if (!batch || !rows || !seq) return ir::makeError(path + ": the bundle's plan lacks max_batch, max_prefill_rows or max_seq");
  o.maxBatch = *batch;
  o.maxPrefillRows = *rows;
  o.maxSeq = *seq;
  // Whether the RMS norms' gains ride in W (the kernels' prologues depend on it); absent: the default.
  if (auto gains = b.plan.getBoolean("gains_in_weights")) o.gainsInWeights = *gains;
  // Likewise whether the prefill's gemms fold those norms (their epilogues and prologues depend on it), and
  // whether the persistent kernel streams its weights through a ring (its tasks depend on it).
  if (auto folds = b.plan.getBoolean("gemm_folds_norm")) o.gemmFoldsNorm = *folds;
  if (auto ring = b.plan.getBoolean("weight_ring_requested")) o.weightRing = *ring;
  return o;
}

// The tuned tiles a bundle's plan was built with, as a database the plan can read.
TuningDb bundleTuning(const Bundle &b) {
  TuningDb db;
  if (const llvm::json::Object *tiles = b.plan.getObject("tuned_tiles"))
    for (const auto &[key, v] : *tiles)
      if (auto tile = v.getAsString()) db.entries[key.str()].tile = tile->str();
  return db;
}

} // namespace

llvm::Expected<Pipeline> Pipeline::load(llvm::StringRef path, PipelineOptions options) {
  if (!llvm::sys::fs::exists(path)) return ir::makeError("model '" + path + "' does not exist");
  if (llvm::sys::fs::is_directory(path)) {
    auto m = importHF(path);
    if (!m) return m.takeError();
    Pipeline p(std::move(*m), Source::Checkpoint, std::move(options));
    p.path_ = path.str();
    return p;
  }
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buf) return ir::makeError("cannot read '" + path + "': " + buf.getError().message());
  if (isBundleFile(path)) {
    auto b = readBundle(path);
    if (!b) return b.takeError();
    auto m = parseVerified(llvm::MemoryBuffer::getMemBufferCopy(b->irText, path.str() + ":ir"));
    if (!m) return m.takeError();
    auto sizes = bundlePlanOptions(*b, path);
    if (!sizes) return sizes.takeError();
    options.plan = *sizes;
    Pipeline p(std::move(*m), Source::Bundle, std::move(options));
    p.path_ = path.str();
    p.fused_ = b->plan.getBoolean("fused").getValueOr(true);
    p.tuning_ = bundleTuning(*b);
    p.tuningFrom_ = "bundle";
    p.bundle_ = std::move(*b);
    return p;
  }
  auto m = parseVerified(std::move(*buf));
  if (!m) return m.takeError();
  Pipeline p(std::move(*m), Source::Ir, std::move(options));
  p.path_ = path.str();
  return p;
}

Pipeline Pipeline::fromModule(std::unique_ptr<ir::Module> module, PipelineOptions options) {
  return Pipeline(std::move(module), Source::Ir, std::move(options));
}

llvm::StringRef Pipeline::sourceName() const {
  switch (source_) {
  case Source::Ir: return "ir";
  case Source::Bundle: return "bundle";
  case Source::Checkpoint: return "checkpoint";
  }
  return "?";
}

llvm::Error Pipeline::runPasses() {
  if (source_ != Source::Bundle) {
    fused_ = options_.fuse;
    if (options_.fuse)
      if (auto stats = fuseModule(*module_); !stats) return stats.takeError();
  }
  if (options_.afterPasses) options_.afterPasses(*module_);
  return llvm::Error::success();
}

void Pipeline::useTuning(TuningDb db, std::string from) {
  if (bundle_) return; // a bundle is planned with the tiles it was built with
  tuning_ = std::move(db);
  tuningFrom_ = std::move(from);
}

void Pipeline::useNewestTuningFor(const Target &target) {
  auto path = TuningDb::newestFor(KernelCache::openDefault().dir(), target.name);
  if (!path) return;
  auto db = TuningDb::read(*path);
  if (!db) return llvm::consumeError(db.takeError()); // unreadable: plan with the defaults, as without one
  useTuning(std::move(*db), *path);
}

llvm::Expected<const Plan *> Pipeline::plan(const Target &target) {
  if (bundle_ && bundle_->target != target.name)
    return ir::makeError(path_ + ": the bundle was built for " + bundle_->target + ", but the target is " + target.name +
                "; rebuild it with `minferc MODEL.ir --target " + target.name + " -o " + path_ + "`");
  PlanOptions po = options_.plan;
  po.tuning = tuning_ ? &*tuning_ : nullptr;
  auto p = buildPlan(*module_, target, po);
  if (!p) return p.takeError();
  p->options.tuning = nullptr; // the database may go; the plan keeps its choices
  plan_ = std::move(*p);
  return &*plan_;
}

std::vector<KernelSource> Pipeline::sources() const {
  std::vector<KernelSource> out;
  for (const auto &k : plan_->kernels) out.push_back(kernelSource(*k));
  return out;
}

llvm::Expected<std::vector<CompiledKernel>> Pipeline::compile(const Target &target, CompileStats *stats) {
  std::vector<CompiledKernel> out;
  if (bundle_) { // the bundle's cubins, by the plan's kernel names; the bundle is not needed afterwards
    for (const auto &spec : plan_->kernels) {
      std::string n = spec->name();
      auto it = llvm::find_if(bundle_->kernels, [&](const BundleKernel &k) { return k.name == n; });
      if (it == bundle_->kernels.end())
        return ir::makeError(path_ + ": the bundle has no kernel '" + n +
                    "' that its plan needs (built by another minfer version? rebuild it)");
      CompiledKernel k;
      k.name = it->name;
      k.loweredName = it->loweredName;
      k.cubin = std::move(it->cubin);
      out.push_back(std::move(k));
    }
    return out;
  }
  std::vector<KernelSource> srcs = sources();
  if (!options_.cache) {
    CompileStats local;
    CompileStats &st = stats ? *stats : local;
    st = CompileStats{};
    auto start = std::chrono::steady_clock::now();
    for (const KernelSource &s : srcs) {
      auto t0 = std::chrono::steady_clock::now();
      auto k = compileKernel(s, target, options_.compile);
      if (!k) return k.takeError();
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      st.compiled.push_back({s.name, ms});
      if (options_.progress) options_.progress({s.name, out.size() + 1, srcs.size(), ms, false});
      out.push_back(std::move(*k));
    }
    st.kernels = st.misses = static_cast<unsigned>(srcs.size());
    st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return out;
  }
  unsigned jobs = options_.jobs ? options_.jobs : defaultJobs();
  KernelCache cache = KernelCache::openDefault();
  return compileAll(srcs, target, options_.compile, cache, jobs, stats, options_.progress);
}

Bundle Pipeline::makeBundle(std::vector<CompiledKernel> compiled) const {
  Bundle b;
  b.irText = ir::printModule(*module_);
  b.target = plan_->target.name;
  b.nvrtcVersion = nvrtcVersion();
  b.minferVersion = MINFER_VERSION;
  b.plan = plan_->toJSON();
  for (CompiledKernel &k : compiled)
    b.kernels.push_back(BundleKernel{k.name, k.loweredName, std::move(k.cubin), std::move(k.ptx)});
  return b;
}

} // namespace minfer
