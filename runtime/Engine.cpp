// runtime/Engine.cpp — loading a model: the checks without a GPU first, then kernels, then weights.
#include "runtime/Engine.h"

#include "compiler/Pipeline.h"
#include "compiler/kernels/Epilogue.h"
#include "io/Safetensors.h"
#include "io/WeightLoader.h"
#include "ir/Diagnostics.h"
#include "runtime/Autotune.h"
#include "runtime/KernelLoader.h"
#include "runtime/Timing.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ThreadPool.h"

#include <cassert>
#include <chrono>
#include <cstring>
#include <optional>

namespace minfer::rt {
namespace {

using Clock = std::chrono::steady_clock;
double msBetween(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }
double msSince(Clock::time_point t) { return msBetween(t, Clock::now()); }


constexpr size_t kAlign = 256;

// Where each Weight and Constant buffer lies in the engine's one allocation: in plan order, each at a multiple
// of kAlign bytes (offsets by plan buffer index, 0 for the other kinds); `tables` is the rotation tables'
// share of `total`.
struct WeightLayout {
  std::vector<size_t> offsets;
  size_t total = 0, tables = 0;
};
WeightLayout weightLayout(const Plan &pl) {
  WeightLayout l;
  l.offsets.assign(pl.buffers.size(), 0);
  for (size_t i = 0; i < pl.buffers.size(); ++i) {
    const PlanBuffer &b = pl.buffers[i];
    if (!inWeightMemory(b)) continue;
    l.offsets[i] = l.total;
    l.total += llvm::alignTo(static_cast<size_t>(b.fixedBytes), kAlign);
    if (!b.rotation.empty()) l.tables += llvm::alignTo(static_cast<size_t>(b.fixedBytes), kAlign);
  }
  return l;
}

std::string gib(double bytes) { return llvm::formatv("{0:f2} GiB", bytes / double(1ull << 30)).str(); }

// Weights go to the GPU through kStagingSlots page-locked buffers of one chunk each, in turn: a chunk is
// filled by up to kStagingThreads threads, then copied to the device asynchronously on the upload stream
// while the next slot fills. Bytes that are a view of a checkpoint file's mapping are read from the file
// with pread (one copy in the kernel, from the page cache), never through the mapping, whose first touch
// faults every page in (that held 8 threads to ~8 GB/s); other bytes (converted or reordered on the host)
// are copied. Where page-locked memory cannot be had, each chunk is uploaded synchronously from where it is.
class StagedUpload {
public:
  static constexpr int kStagingSlots = 4;
  static constexpr unsigned kStagingThreads = 16;

  // `chunkBytes` is rounded up to whole pages (at least one): a slot never splits an f16 value.
  StagedUpload(size_t chunkBytes, const Checkpoint &ckpt) : pool(stagingThreads()) {
    chunkBytes = llvm::alignTo(std::max<size_t>(chunkBytes, 1), 4096);
    for (const SafetensorsFile *f : ckpt.files()) {
      auto fd = llvm::sys::fs::openNativeFileForRead(f->path());
      if (!fd) { // the mapping still serves
        llvm::consumeError(fd.takeError());
        continue;
      }
      files.push_back(OpenFile{f->path().str(), f->mapped(), *fd});
    }
    auto st = cuda::Stream::create();
    if (!st) {
      llvm::consumeError(st.takeError());
      return;
    }
    for (int i = 0; i < kStagingSlots; ++i) {
      auto b = cuda::PinnedBuffer::alloc(chunkBytes, kStagingThreads);
      auto ev = cuda::Event::create();
      if (!b || !ev) {
        if (!b) llvm::consumeError(b.takeError());
        if (!ev) llvm::consumeError(ev.takeError());
        slots.clear();
        return;
      }
      slots.push_back(Slot{std::move(*b), std::move(*ev), false});
    }
    stream = std::move(*st);
  }

  // Copies `bytes` to `mem` at `offset` (asynchronously: `bytes` may be reused as soon as this returns),
  // f16 converted to bf16 on the way when `f16ToBf16`.
  llvm::Error put(cuda::DeviceBuffer &mem, size_t offset, llvm::ArrayRef<uint8_t> bytes, bool f16ToBf16 = false) {
    if (slots.empty()) {
      assert(!f16ToBf16 && "the engine converts only through the staging buffers");
      return mem.upload(bytes.data(), bytes.size(), offset);
    }
    const size_t slotBytes = slots[0].host.size();
    for (size_t done = 0; done < bytes.size(); done += slotBytes) {
      size_t n = std::min(slotBytes, bytes.size() - done);
      Slot &s = slots[next];
      next = (next + 1) % slots.size();
      auto t0 = Clock::now();
      if (s.busy)
        if (auto e = s.copied.synchronize()) return e;
      auto t1 = Clock::now();
      waitMs += msBetween(t0, t1);
      if (auto e = fill(s.host.data(), bytes.data() + done, n, f16ToBf16)) return e;
      readMs += msSince(t1);
      if (auto e = mem.uploadAsync(s.host.data(), n, offset + done, stream.handle())) return e;
      if (auto e = s.copied.record(stream.handle())) return e;
      s.busy = true;
    }
    return llvm::Error::success();
  }

  bool pinned() const { return !slots.empty(); }
  cuda::StreamHandle handle() const { return stream.handle(); }

  // Waits for every copy put so far.
  llvm::Error finish() {
    if (slots.empty()) return llvm::Error::success();
    auto t0 = Clock::now();
    auto e = stream.synchronize();
    waitMs += msSince(t0);
    return e;
  }

  double readMs = 0; // in fill(): reading (or copying) and converting
  double waitMs = 0; // for a slot, or in finish()

  // No slot may be freed while a copy reads it (an upload that failed part-way).
  ~StagedUpload() {
    if (!slots.empty()) llvm::consumeError(stream.synchronize());
    for (OpenFile &f : files) llvm::sys::fs::closeFile(f.fd);
  }

private:
  struct Slot {
    cuda::PinnedBuffer host;
    cuda::Event copied; // the device has the slot's bytes: the slot may be filled again
    bool busy = false;
  };

  static llvm::ThreadPoolStrategy stagingThreads() {
    llvm::ThreadPoolStrategy s = llvm::hardware_concurrency(kStagingThreads);
    s.Limit = true;
    return s;
  }

  struct OpenFile {
    std::string path;
    llvm::ArrayRef<uint8_t> mapped; // the file as the checkpoint maps it
    llvm::sys::fs::file_t fd;
  };

  // `n` bytes at `src` into `dst`, in pieces of at least 256 KiB, one piece a thread: read from the file
  // when `src` lies in a checkpoint's mapping, else copied; with `f16ToBf16`, converted in place a 1 MiB
  // slice at a time, while the slice is in the core's cache. A failed read is an error naming the file.
  llvm::Error fill(uint8_t *dst, const uint8_t *src, size_t n, bool f16ToBf16) {
    const OpenFile *file = nullptr;
    for (const OpenFile &f : files)
      if (src >= f.mapped.begin() && src + n <= f.mapped.end()) file = &f;
    const size_t piece = llvm::alignTo(std::max<size_t>(256u << 10, llvm::divideCeil(n, pool.getThreadCount())), 4096);
    std::vector<std::string> failures(llvm::divideCeil(n, piece));
    auto one = [=, &failures](size_t off) {
      const size_t end = off + std::min(piece, n - off);
      constexpr size_t kSlice = 1u << 20; // even: f16 values are never split
      for (size_t at = off; at < end; at += kSlice) {
        const size_t len = std::min(kSlice, end - at);
        if (!file) {
          std::memcpy(dst + at, src + at, len);
        } else {
          const uint64_t fileAt = static_cast<uint64_t>(src + at - file->mapped.data());
          for (size_t got = 0; got < len;) {
            auto r = llvm::sys::fs::readNativeFileSlice(
                file->fd, llvm::MutableArrayRef<char>(reinterpret_cast<char *>(dst + at + got), len - got), fileAt + got);
            if (!r || *r == 0) {
              failures[off / piece] = file->path + ": " + (r ? "the file ended early" : llvm::toString(r.takeError()));
              return;
            }
            got += *r;
          }
        }
        if (f16ToBf16) convertF16ToBf16(dst + at, dst + at, len / 2);
      }
    };
    if (n <= piece) {
      one(0);
    } else {
      for (size_t off = 0; off < n; off += piece) pool.async([&one, off] { one(off); });
      pool.wait();
    }
    for (const std::string &f : failures)
      if (!f.empty()) return ir::makeError("reading the weights: " + f);
    return llvm::Error::success();
  }

  llvm::ThreadPool pool;
  std::vector<OpenFile> files;
  cuda::Stream stream;
  std::vector<Slot> slots;
  size_t next = 0;
};

// Whether the stored parts can go up as they are, with at most an f16 -> bf16 conversion on the way (the
// staging buffers do it): none transposed, each of the buffer's dtype or f16 for a bf16 buffer. The rows'
// order, where the plan wants another, is then made on the device.
bool uploadableAsStored(llvm::ArrayRef<StoredPart> parts, ir::DType dtype) {
  return llvm::all_of(parts, [&](const StoredPart &p) {
    return !p.transposed && (p.dtype == dtype || (p.dtype == ir::DType::F16 && dtype == ir::DType::BF16));
  });
}

// Plan.h rowOrder's layouts as strided device copies from `src` (the rows as stored, parts stacked) to
// `dst`: GateUp interleaves the two halves of the weight; RopePairs interleaves the two halves of each head
// of the first layoutRows rows and keeps the rest in place.
llvm::Error layOutRows(const PlanBuffer &b, int64_t rows, size_t rowBytes, cuda::DevicePtr dst, cuda::DevicePtr src,
                       cuda::StreamHandle stream) {
  auto interleave = [&](int64_t first, int64_t half) -> llvm::Error {
    if (auto e = cuda::copy2DDeviceToDeviceAsync(dst + first * rowBytes, 2 * rowBytes, src + first * rowBytes, rowBytes,
                                                 rowBytes, static_cast<size_t>(half), stream))
      return e;
    return cuda::copy2DDeviceToDeviceAsync(dst + (first + 1) * rowBytes, 2 * rowBytes, src + (first + half) * rowBytes,
                                           rowBytes, rowBytes, static_cast<size_t>(half), stream);
  };
  if (b.layout == PlanBuffer::Layout::GateUp) return interleave(0, rows / 2);
  const int64_t hd = b.layoutHeadDim;
  int64_t h0 = 0;
  for (; h0 + hd <= std::min(rows, b.layoutRows); h0 += hd)
    if (auto e = interleave(h0, hd / 2)) return e;
  return cuda::copyDeviceToDevice(dst + h0 * rowBytes, src + h0 * rowBytes, static_cast<size_t>(rows - h0) * rowBytes,
                                  stream);
}

} // namespace

// Builds an engine step by step over the compiler's Pipeline; each step's failure leaves nothing on the device.
struct EngineLoader {
  explicit EngineLoader(const EngineOptions &o) : opts(o) {}

  const EngineOptions &opts;
  std::unique_ptr<Engine> engine{new Engine};
  std::optional<Pipeline> pipeline;
  std::string weightsPath;

  llvm::Error load(llvm::StringRef model) {
    // The cheap check first: an .ir file or a bundle names no weights of its own.
    weightsPath = opts.weights;
    if (weightsPath.empty() && !opts.syntheticWeights && llvm::sys::fs::exists(model) &&
        !llvm::sys::fs::is_directory(model))
      return ir::makeError("model '" + model + "' is " + (isBundleFile(model) ? "a bundle" : "an IR file") +
                           "; give its weights (a .safetensors file, an index.json or a directory)");
    PipelineOptions po;
    po.fuse = opts.fuse;
    po.plan = opts.plan;
    po.jobs = opts.jobs;
    po.cache = opts.cache;
    po.progress = opts.compileProgress;
    auto t0 = Clock::now();
    auto p = Pipeline::load(model, po);
    if (!p) return p.takeError();
    engine->st.loadMs = msSince(t0);
    pipeline.emplace(std::move(*p));
    if (weightsPath.empty() && !opts.syntheticWeights) weightsPath = model.str(); // a checkpoint directory holds its weights
    engine->st.source = pipeline->sourceName().str();
    t0 = Clock::now();
    if (auto e = pipeline->runPasses()) return e;
    engine->st.passesMs = msSince(t0);
    engine->st.fused = pipeline->fused();
    return llvm::Error::success();
  }

  // The target: a bundle's own, the option, or (only when neither says) the device's.
  llvm::Expected<Target> target() {
    if (const Bundle *b = pipeline->bundle()) return parseTarget(opts.target.empty() ? b->target : opts.target);
    if (!opts.target.empty()) return parseTarget(opts.target);
    return deviceTarget();
  }

  llvm::Error plan(const Target &t) {
    // The device's tuning database, when the driver can say which device this is (a bundle has its own).
    if (!pipeline->bundle() && opts.tuned && opts.tuning) {
      pipeline->useTuning(*opts.tuning, "in memory");
    } else if (!pipeline->bundle() && opts.tuned && cuda::available()) {
      if (auto fp = deviceFingerprint()) {
        std::string path = TuningDb::pathFor(KernelCache::openDefault().dir(), *fp);
        pipeline->useTuning(TuningDb::load(path, *fp, &engine->st.warning), path);
      } else {
        llvm::consumeError(fp.takeError());
      }
    }
    auto t0 = Clock::now();
    auto p = pipeline->plan(t);
    if (!p) return p.takeError();
    engine->st.planMs = msSince(t0);
    engine->st.tuningDb = pipeline->tuningFrom();
    engine->st.tunedKernels = (*p)->tunedKernels();
    engine->st.defaultTileKernels = (*p)->defaultTileKernels();
    return llvm::Error::success();
  }

  llvm::Error checkWeightsExist() {
    if (opts.syntheticWeights) return llvm::Error::success();
    auto t0 = Clock::now();
    auto ckpt = Checkpoint::open(weightsPath);
    if (!ckpt) return ckpt.takeError();
    if (auto e = checkWeights(pipeline->module(), *ckpt)) return e;
    engine->st.checkMs = msSince(t0);
    return llvm::Error::success();
  }

  llvm::Expected<std::vector<CompiledKernel>> kernels(const Target &t) {
    auto t0 = Clock::now();
    auto compiled = pipeline->compile(t, &engine->st.compile);
    if (compiled && !pipeline->bundle()) engine->st.compileMs = msSince(t0);
    return compiled;
  }

  llvm::Error checkDevice(const Target &t) {
    auto info = cuda::deviceInfo();
    if (!info) return info.takeError();
    engine->info = *info;
    auto devTarget = deviceTarget();
    if (!devTarget) return devTarget.takeError();
    if (devTarget->smVersion() != t.smVersion()) // sm_90 and sm_90a code both run on a 9.0 device
      return ir::makeError("the GPU (" + info->name + ") is " + devTarget->name + ", but the kernels are built for " + t.name +
                  (pipeline->bundle() ? "; rebuild the bundle with --target " + devTarget->name : ""));
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

llvm::Error Engine::uploadConstant(const PlanBuffer &b, size_t offset) {
  // A rotation table is built here, not carried in the plan (Plan.h PlanBuffer::rotation).
  std::vector<float> table;
  if (!b.rotation.empty()) table = rotationTable(b.rotation, pl.options.maxSeq);
  else if (b.fill) table.assign(static_cast<size_t>(b.fixedBytes / 4), *b.fill);
  const std::vector<float> &values = b.rotation.empty() && !b.fill ? b.constant : table;
  return weightMemory->upload(values.data(), values.size() * 4, offset);
}

llvm::Error Engine::fillSyntheticWeights(const std::vector<size_t> &offsets) {
  // Pseudo-random values uniform in [-0.035, 0.035) (a standard deviation of 0.02, as an initialised model's
  // weights; norms' gains too, so no activation grows layer after layer into inf or NaN): 1 MiB of each
  // element type, uploaded once and copied over every weight buffer from a start that moves with the buffer.
  // Not a repeated pattern: the in-step tuner times the model on these weights, and a Hopper tensor core fed
  // a repeated value draws less power than on real weights, so it would rank tiles on clocks a real model
  // does not get (timing::filled).
  constexpr size_t kBlockBytes = size_t(1) << 20;
  std::optional<cuda::DeviceBuffer> blocks[3]; // bf16, f16, f32
  for (size_t i = 0; i < pl.buffers.size(); ++i) {
    const PlanBuffer &b = pl.buffers[i];
    if (b.kind != BufferKind::Weight) continue;
    const ir::DType dtype = b.dtype == ir::DType::F32 || b.dtype == ir::DType::F16 ? b.dtype : ir::DType::BF16;
    const int type = dtype == ir::DType::F32 ? 2 : dtype == ir::DType::F16 ? 1 : 0;
    const size_t elementBytes = ir::dtypeSize(dtype);
    if (!blocks[type]) {
      std::vector<uint8_t> values = timing::randomElements(kBlockBytes / elementBytes, dtype, 0.035f, 0xC0FFEE + type);
      auto block = cuda::DeviceBuffer::alloc(kBlockBytes);
      if (!block) return block.takeError();
      if (auto e = block->upload(values.data(), kBlockBytes)) return e;
      blocks[type] = std::move(*block);
    }
    const size_t bytes = static_cast<size_t>(b.fixedBytes);
    const size_t start = (i * 4099 * elementBytes) % kBlockBytes;
    for (size_t at = 0; at < bytes;) {
      const size_t from = (start + at) % kBlockBytes, len = std::min(bytes - at, kBlockBytes - from);
      if (auto e = cuda::copyDeviceToDevice(weightMemory->ptr() + offsets[i] + at, blocks[type]->ptr() + from, len))
        return e;
      at += len;
    }
  }
  return cuda::synchronize(); // the blocks go when this returns
}

llvm::Error Engine::uploadWeights(const std::string &weightsPath, size_t chunkBytes, bool synthetic) {
  auto t0 = Clock::now();
  weightsSource = synthetic ? std::string() : weightsPath;
  syntheticWeights = synthetic;
  std::optional<Checkpoint> ckpt;
  if (!synthetic) {
    auto opened = Checkpoint::open(weightsPath);
    if (!opened) return opened.takeError();
    ckpt.emplace(std::move(*opened));
  }
  const WeightLayout layout = weightLayout(pl);
  const std::vector<size_t> &offsets = layout.offsets;
  const size_t total = layout.total;
  auto mem = cuda::memoryInfo();
  if (!mem) return mem.takeError();
  if (total > mem->free)
    return ir::makeError("out of device memory: the weights need " + gib(double(total)) + " but " + info.name + " has " +
                gib(double(mem->free)) + " free of " + gib(double(mem->total)));
  auto buf = cuda::DeviceBuffer::alloc(total);
  if (!buf) return buf.takeError();
  weightMemory = std::make_shared<cuda::DeviceBuffer>(std::move(*buf));
  setPointers(offsets);
  auto uploadConstants = [&]() -> llvm::Error {
    for (size_t i = 0; i < pl.buffers.size(); ++i)
      if (pl.buffers[i].kind == BufferKind::Constant)
        if (auto e = uploadConstant(pl.buffers[i], offsets[i])) return e;
    return llvm::Error::success();
  };
  st.weightBytes = total - layout.tables;
  if (synthetic) {
    if (auto e = uploadConstants()) return e;
    if (auto e = fillSyntheticWeights(offsets)) return e;
    st.weightsMs = st.weightsSetupMs = msSince(t0);
    return llvm::Error::success();
  }
  cuda::DeviceBuffer stacked; // a packed weight's parts as stored, before layOutRows (outlives `staging`'s copies)
  StagedUpload staging(chunkBytes, *ckpt);
  st.weightsSetupMs = msSince(t0);
  if (auto e = uploadConstants()) return e;
  std::vector<uint8_t> scratch; // streamWeight's chunk buffer for reordered and converted weights, kept throughout
  for (size_t i = 0; i < pl.buffers.size(); ++i) {
    const PlanBuffer &b = pl.buffers[i];
    if (b.kind != BufferKind::Weight) continue;
    size_t written = 0;
    auto sink = [&](llvm::ArrayRef<uint8_t> bytes, size_t offset) -> llvm::Error {
      written += bytes.size();
      return staging.put(*weightMemory, offsets[i] + offset, bytes);
    };
    const ir::WeightDecl &w = mod->weights[b.weight];
    const int64_t rows = w.type.shape[0].value;
    std::vector<int64_t> order = rowOrder(b, rows);
    // An RMS norm's gamma multiplied into the columns (Plan.h PlanBuffer::gains): read as fp32 first, then
    // the weight goes through the host's conversion below (which checks its length against the columns).
    std::vector<float> gains;
    if (b.gains >= 0) {
      const PlanBuffer &g = pl.buffers[static_cast<size_t>(b.gains)];
      auto values = loadWeightF32(*mod, *ckpt, g.weight, g.layer);
      if (!values) return values.takeError();
      gains = std::move(*values);
    }
    bool laidOutOnDevice = false; // the packed layout was made by strided device copies from `stacked`
    // The fast path: the stored parts go up as they are (f16 converted in the staging buffers), stacked, to
    // the weight's place, or, where the plan orders the rows otherwise, to `stacked`, from which strided
    // device copies lay the rows out, rather than the host gathering them row by row.
    auto parts = storedParts(*mod, *ckpt, b.weight, b.layer);
    if (!parts) return parts.takeError();
    if (staging.pinned() && gains.empty() && uploadableAsStored(*parts, b.dtype)) {
      if (!order.empty() && stacked.size() < static_cast<size_t>(b.fixedBytes)) {
        if (auto e = staging.finish()) return e; // the old buffer may still be read
        stacked = cuda::DeviceBuffer();
        auto sb = cuda::DeviceBuffer::alloc(static_cast<size_t>(b.fixedBytes));
        if (sb) stacked = std::move(*sb);
        else llvm::consumeError(sb.takeError()); // no room: the host lays the rows out below
      }
      if (order.empty() || stacked.size() >= static_cast<size_t>(b.fixedBytes)) {
        cuda::DeviceBuffer &to = order.empty() ? *weightMemory : stacked;
        size_t at = order.empty() ? offsets[i] : 0;
        for (const StoredPart &part : *parts) {
          if (auto e = staging.put(to, at + written, part.bytes, part.dtype != b.dtype)) return e;
          written += part.bytes.size();
        }
        size_t rowBytes = static_cast<size_t>(b.fixedBytes / rows);
        if (!order.empty())
          if (auto e = layOutRows(b, rows, rowBytes, pointers[i], stacked.ptr(), staging.handle())) return e;
        laidOutOnDevice = true;
      }
    }
    if (!laidOutOnDevice)
      if (auto e = streamWeight(*mod, *ckpt, b.weight, b.layer, b.dtype, chunkBytes, sink, order, &scratch, gains))
        return e;
    if (written != static_cast<size_t>(b.fixedBytes))
      return ir::makeError("weight " + b.name + ": " + std::to_string(written) + " bytes loaded, the plan expects " +
                  std::to_string(b.fixedBytes));
  }
  if (auto e = staging.finish()) return e;
  st.weightsReadMs = staging.readMs;
  st.weightsWaitMs = staging.waitMs;
  st.weightsMs = msSince(t0);
  return llvm::Error::success();
}

void Engine::setPointers(const std::vector<size_t> &offsets) {
  pointers.assign(pl.buffers.size(), 0);
  for (size_t i = 0; i < pl.buffers.size(); ++i)
    if (inWeightMemory(pl.buffers[i])) pointers[i] = weightMemory->ptr() + offsets[i];
}

bool Engine::shareWeights(const Engine &from, const std::string &path, bool synthetic) {
  if (!from.weightMemory || from.syntheticWeights != synthetic || (!synthetic && from.weightsSource != path) ||
      !sameWeightBuffers(from.pl, pl))
    return false;
  // The same buffers in the same order: the same layout as `from`'s.
  const WeightLayout layout = weightLayout(pl);
  weightMemory = from.weightMemory;
  setPointers(layout.offsets);
  weightsSource = from.weightsSource;
  syntheticWeights = from.syntheticWeights;
  st.weightBytes = layout.total - layout.tables;
  st.weightsShared = true;
  return true;
}

llvm::Expected<std::unique_ptr<Engine>> Engine::load(llvm::StringRef model, const EngineOptions &options) {
  auto t0 = Clock::now();
  EngineLoader L{options};
  if (auto e = L.load(model)) return e;
  if (auto e = L.checkWeightsExist()) return e;
  if (options.checkModel)
    if (auto e = options.checkModel(L.pipeline->module())) return e;
  // Without a target given (or a bundle's), the device says which: the driver may load from here on.
  auto target = L.target();
  if (!target) return target.takeError();
  if (auto e = L.plan(*target)) return e;
  L.engine->st.parseMs = msSince(t0);
  auto compiled = L.kernels(*target);
  if (!compiled) return compiled.takeError();
  L.engine->pl = L.pipeline->takePlan();
  L.engine->mod = L.pipeline->takeModule();
  // The GPU from here on.
  if (auto e = L.checkDevice(*target)) return e;
  if (auto e = L.loadModules(*compiled)) return e;
  if (!options.weightsFrom || !L.engine->shareWeights(*options.weightsFrom, L.weightsPath, options.syntheticWeights))
    if (auto e = L.engine->uploadWeights(L.weightsPath, options.uploadChunkBytes, options.syntheticWeights)) return e;
  return std::move(L.engine);
}

int64_t Engine::vocab() const { return *mod->value(mod->outputs[0]).type.lastDim(); }

Engine::~Engine() = default;

} // namespace minfer::rt
