// runtime/Engine.cpp — loading a model: the checks without a GPU first, then kernels, then weights.
#include "runtime/Engine.h"

#include "jit/Bundle.h"
#include "compiler/Fuse.h"
#include "compiler/Tuning.h"
#include "runtime/Autotune.h"
#include "io/HFImport.h"
#include "jit/KernelCache.h"
#include "io/Safetensors.h"
#include "io/WeightLoader.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "runtime/KernelLoader.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"

#include <chrono>
#include <thread>

namespace minfer::rt {
namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

llvm::Error fail(const llvm::Twine &msg) { return llvm::createStringError(llvm::inconvertibleErrorCode(), msg); }

constexpr size_t kAlign = 256;
size_t alignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

std::string gib(double bytes) { return llvm::formatv("{0:f2} GiB", bytes / double(1ull << 30)).str(); }

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
  if (!batch || !rows || !seq)
    return fail(path + ": the bundle's plan lacks max_batch, max_prefill_rows or max_seq");
  o.maxBatch = *batch;
  o.maxPrefillRows = *rows;
  o.maxSeq = *seq;
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

// Builds an engine step by step; each step's failure leaves nothing on the device.
struct EngineLoader {
  const EngineOptions &opts;
  std::unique_ptr<Engine> engine{new Engine};
  std::optional<Bundle> bundle;
  std::string weightsPath;

  llvm::Error parse(llvm::StringRef model) {
    if (!llvm::sys::fs::exists(model)) return fail("model '" + model + "' does not exist");
    weightsPath = opts.weights;
    if (llvm::sys::fs::is_directory(model)) {
      auto m = importHF(model);
      if (!m) return m.takeError();
      engine->mod = std::move(*m);
      engine->st.source = "checkpoint";
      if (weightsPath.empty()) weightsPath = model.str();
      return fuse();
    }
    if (weightsPath.empty())
      return fail("model '" + model + "' is " + (isBundleFile(model) ? "a bundle" : "an IR file") +
                  "; give its weights (a .safetensors file, an index.json or a directory)");
    if (isBundleFile(model)) {
      auto b = readBundle(model);
      if (!b) return b.takeError();
      auto m = parseVerified(llvm::MemoryBuffer::getMemBufferCopy(b->irText, model.str() + ":ir"));
      if (!m) return m.takeError();
      engine->mod = std::move(*m);
      engine->st.source = "bundle";
      engine->st.fused = b->plan.getBoolean("fused").getValueOr(true);
      bundle = std::move(*b);
      return llvm::Error::success();
    }
    auto buf = llvm::MemoryBuffer::getFile(model, /*IsText=*/true);
    if (!buf) return fail("cannot read '" + model + "': " + buf.getError().message());
    auto m = parseVerified(std::move(*buf));
    if (!m) return m.takeError();
    engine->mod = std::move(*m);
    engine->st.source = "ir";
    return fuse();
  }

  // The fusion pass (a bundle's IR is already what its plan was built from).
  llvm::Error fuse() {
    engine->st.fused = opts.fuse;
    if (!opts.fuse) return llvm::Error::success();
    auto stats = fuseModule(*engine->mod);
    if (!stats) return stats.takeError();
    return llvm::Error::success();
  }

  // The target: a bundle's own, the option, or (only when neither says) the device's.
  llvm::Expected<Target> target(llvm::StringRef model) {
    if (bundle) {
      auto t = parseTarget(bundle->target);
      if (!t) return t.takeError();
      if (!opts.target.empty() && opts.target != bundle->target)
        return fail(model + ": the bundle was built for " + bundle->target + ", but the target is " + opts.target +
                    "; rebuild it with `minferc MODEL.ir --target " + opts.target + " -o " + model + "`");
      return *t;
    }
    if (!opts.target.empty()) return parseTarget(opts.target);
    return deviceTarget();
  }

  llvm::Error plan(llvm::StringRef model, const Target &t) {
    PlanOptions po = opts.plan;
    TuningDb tuning;
    if (bundle) {
      auto o = bundlePlanOptions(*bundle, model);
      if (!o) return o.takeError();
      po = *o;
      tuning = bundleTuning(*bundle);
      po.tuning = &tuning;
      engine->st.tuningDb = "bundle";
    } else if (opts.tuned && cuda::available()) {
      // The device's database, when the driver can say which device this is.
      if (auto fp = deviceFingerprint()) {
        std::string path = TuningDb::pathFor(KernelCache::openDefault().dir(), *fp);
        tuning = TuningDb::load(path, *fp, &engine->st.warning);
        po.tuning = &tuning;
        engine->st.tuningDb = path;
      } else {
        llvm::consumeError(fp.takeError());
      }
    }
    auto p = buildPlan(*engine->mod, t, po);
    if (!p) return p.takeError();
    engine->pl = std::move(*p);
    engine->pl.options.tuning = nullptr; // `tuning` ends here; the plan keeps its choices
    engine->st.tunedKernels = engine->pl.tunedKernels();
    engine->st.defaultTileKernels = engine->pl.defaultTileKernels();
    return llvm::Error::success();
  }

  llvm::Error checkWeightsExist() {
    auto ckpt = Checkpoint::open(weightsPath);
    if (!ckpt) return ckpt.takeError();
    return checkWeights(*engine->mod, *ckpt);
  }

  // Cubins by plan kernel index: from the bundle, or compiled through the cache.
  llvm::Expected<std::vector<CompiledKernel>> kernels(llvm::StringRef model, const Target &t) {
    const Plan &p = engine->pl;
    std::vector<CompiledKernel> out;
    if (bundle) {
      for (const auto &spec : p.kernels) {
        std::string n = spec->name();
        auto it = llvm::find_if(bundle->kernels, [&](const BundleKernel &k) { return k.name == n; });
        if (it == bundle->kernels.end())
          return fail(model + ": the bundle has no kernel '" + n +
                      "' that its plan needs (built by another minfer version? rebuild it)");
        CompiledKernel k;
        k.name = it->name;
        k.loweredName = it->loweredName;
        k.cubin = std::move(it->cubin); // the bundle is not needed after loading
        out.push_back(std::move(k));
      }
      return out;
    }
    std::vector<KernelSource> sources;
    for (const auto &k : p.kernels) sources.push_back(kernelSource(*k));
    unsigned jobs = opts.jobs ? opts.jobs : std::max(1u, std::thread::hardware_concurrency());
    auto t0 = Clock::now();
    if (opts.cache) {
      KernelCache cache = KernelCache::openDefault();
      auto compiled = compileAll(sources, t, {}, cache, jobs, &engine->st.compile);
      if (!compiled) return compiled.takeError();
      out = std::move(*compiled);
    } else {
      for (const KernelSource &s : sources) {
        auto k = compileKernel(s, t);
        if (!k) return k.takeError();
        out.push_back(std::move(*k));
      }
      engine->st.compile.kernels = engine->st.compile.misses = static_cast<unsigned>(sources.size());
    }
    engine->st.compileMs = msSince(t0);
    return out;
  }

  llvm::Error checkDevice(const Target &t) {
    auto info = cuda::deviceInfo();
    if (!info) return info.takeError();
    engine->info = *info;
    auto devTarget = deviceTarget();
    if (!devTarget) return devTarget.takeError();
    if (devTarget->name != t.name)
      return fail("the GPU (" + info->name + ") is " + devTarget->name + ", but the kernels are built for " + t.name +
                  (bundle ? "; rebuild the bundle with --target " + devTarget->name : ""));
    return llvm::Error::success();
  }

  // Every module loaded and every kernel's shared-memory opt-in set now, before a session captures a graph.
  llvm::Error loadModules(std::vector<CompiledKernel> &compiled) {
    auto t0 = Clock::now();
    const Plan &p = engine->pl;
    int64_t maxRows = std::max(p.options.maxPrefillRows, p.options.maxBatch);
    for (size_t i = 0; i < compiled.size(); ++i) {
      CompiledKernel &k = compiled[i];
      auto mod = cuda::Module::load(k.cubin, k.name);
      if (!mod) return mod.takeError();
      auto fn = mod->function(k.loweredName);
      if (!fn) return fn.takeError();
      if (auto e = cuda::reserveDynamicShared(*fn, p.kernels[i]->launch(maxRows).sharedBytes)) return e;
      engine->functions.push_back(LoadedFunction{std::move(*mod), *fn});
    }
    engine->st.modulesMs = msSince(t0);
    return llvm::Error::success();
  }
};

llvm::Error Engine::uploadWeights(const std::string &weightsPath, size_t chunkBytes) {
  auto t0 = Clock::now();
  auto ckpt = Checkpoint::open(weightsPath);
  if (!ckpt) return ckpt.takeError();
  pointers.assign(pl.buffers.size(), 0);
  size_t total = 0;
  std::vector<size_t> offsets(pl.buffers.size(), 0);
  for (size_t i = 0; i < pl.buffers.size(); ++i) {
    const PlanBuffer &b = pl.buffers[i];
    if (b.kind != BufferKind::Weight && b.kind != BufferKind::Constant) continue;
    offsets[i] = total;
    total += alignUp(static_cast<size_t>(b.fixedBytes));
  }
  auto mem = cuda::memoryInfo();
  if (!mem) return mem.takeError();
  if (total > mem->free)
    return fail("out of device memory: the weights need " + gib(double(total)) + " but " + info.name + " has " +
                gib(double(mem->free)) + " free of " + gib(double(mem->total)));
  auto buf = cuda::DeviceBuffer::alloc(total);
  if (!buf) return buf.takeError();
  weightMemory = std::move(*buf);
  for (size_t i = 0; i < pl.buffers.size(); ++i) {
    const PlanBuffer &b = pl.buffers[i];
    if (b.kind != BufferKind::Weight && b.kind != BufferKind::Constant) continue;
    pointers[i] = weightMemory.ptr() + offsets[i];
    if (b.kind == BufferKind::Constant) {
      if (auto e = weightMemory.upload(b.constant.data(), b.constant.size() * 4, offsets[i])) return e;
      continue;
    }
    size_t written = 0;
    auto sink = [&](llvm::ArrayRef<uint8_t> bytes, size_t offset) -> llvm::Error {
      written += bytes.size();
      return weightMemory.upload(bytes.data(), bytes.size(), offsets[i] + offset);
    };
    std::vector<int64_t> order = rowOrder(b, mod->weights[b.weight].type.shape[0].value);
    if (auto e = streamWeight(*mod, *ckpt, b.weight, b.layer, b.dtype, chunkBytes, sink, order)) return e;
    if (written != static_cast<size_t>(b.fixedBytes))
      return fail("weight " + b.name + ": " + std::to_string(written) + " bytes loaded, the plan expects " +
                  std::to_string(b.fixedBytes));
  }
  st.weightBytes = total;
  st.weightsMs = msSince(t0);
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<Engine>> Engine::load(llvm::StringRef model, const EngineOptions &options) {
  auto t0 = Clock::now();
  EngineLoader L{options, std::unique_ptr<Engine>(new Engine), std::nullopt, {}};
  if (auto e = L.parse(model)) return e;
  if (auto e = L.checkWeightsExist()) return e;
  auto target = L.target(model);
  if (!target) return target.takeError();
  if (auto e = L.plan(model, *target)) return e;
  L.engine->st.parseMs = msSince(t0);
  auto compiled = L.kernels(model, *target);
  if (!compiled) return compiled.takeError();
  // The GPU from here on.
  if (auto e = L.checkDevice(*target)) return e;
  if (auto e = L.loadModules(*compiled)) return e;
  if (auto e = L.engine->uploadWeights(L.weightsPath, options.uploadChunkBytes)) return e;
  return std::move(L.engine);
}

int64_t Engine::vocab() const { return *mod->value(mod->outputs[0]).type.lastDim(); }

Engine::~Engine() = default;

} // namespace minfer::rt
