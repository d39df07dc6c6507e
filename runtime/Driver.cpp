// runtime/Driver.cpp — the driver's objects (device memory, modules, streams, events, graphs), launches and
// copies, over the entry points DriverLoader.cpp resolved. Each wrapper owns its handle (RAII), so an early
// return leaks nothing; destructors free through loadedDriver() and report to nobody.
#include "runtime/DriverApi.h"

#include "ir/Diagnostics.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/MathExtras.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace minfer::cuda {

using namespace detail;

// ---- DeviceBuffer ----

llvm::Expected<DeviceBuffer> DeviceBuffer::alloc(size_t bytes) {
  auto d = driver();
  if (!d) return d.takeError();
  DeviceBuffer b;
  if (bytes == 0) return b; // cuMemAlloc rejects 0; an empty buffer has ptr() == 0
  CUdeviceptr p = 0;
  if (llvm::Error e = CU_IN(*d, "allocating " + num(bytes) + " bytes", cuMemAlloc, &p, bytes))
    return e;
  b.p = p;
  b.n = bytes;
  return b;
}

DeviceBuffer::DeviceBuffer(DeviceBuffer &&o) noexcept : p(o.p), n(o.n) { o.p = 0, o.n = 0; }

// Frees device memory from a destructor or a move: there is nobody to report an error to.
static void freeDevice(DevicePtr p) {
  if (p)
    if (const Api *api = loadedDriver()) api->cuMemFree_(p);
}

DeviceBuffer &DeviceBuffer::operator=(DeviceBuffer &&o) noexcept {
  if (this != &o) {
    freeDevice(p);
    p = o.p, n = o.n;
    o.p = 0, o.n = 0;
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() { freeDevice(p); }

static llvm::Error checkRange(llvm::StringRef what, size_t bytes, size_t offset, size_t size) {
  if (offset > size || bytes > size - offset)
    return ir::makeError(what + " of " + num(bytes) + " bytes at offset " + num(offset) +
                         " overruns a device buffer of " + num(size) + " bytes");
  return llvm::Error::success();
}

llvm::Error DeviceBuffer::upload(const void *src, size_t bytes, size_t offset) {
  if (llvm::Error e = checkRange("upload", bytes, offset, n)) return e;
  if (bytes == 0) return llvm::Error::success();
  auto d = driver();
  if (!d) return d.takeError();
  return CU(*d, cuMemcpyHtoD, p + offset, src, bytes);
}

llvm::Error DeviceBuffer::uploadAsync(const void *src, size_t bytes, size_t offset, StreamHandle stream) {
  if (llvm::Error e = checkRange("upload", bytes, offset, n)) return e;
  return copyHostToDeviceAsync(p + offset, src, bytes, stream);
}

llvm::Error DeviceBuffer::download(void *dst, size_t bytes, size_t offset) const {
  if (llvm::Error e = checkRange("download", bytes, offset, n)) return e;
  if (bytes == 0) return llvm::Error::success();
  auto d = driver();
  if (!d) return d.takeError();
  return CU(*d, cuMemcpyDtoH, dst, p + offset, bytes);
}

llvm::Error DeviceBuffer::fill(uint8_t byte) {
  if (n == 0) return llvm::Error::success();
  auto d = driver();
  if (!d) return d.takeError();
  return CU(*d, cuMemsetD8, p, byte, n);
}

llvm::Error DeviceBuffer::fillWords(size_t offset, size_t bytes, uint32_t word) {
  if (offset > n || bytes > n - offset || offset % 4 || bytes % 2)
    return ir::makeError("fillWords: " + std::to_string(bytes) + " bytes at " + std::to_string(offset) +
                         " of a " + std::to_string(n) + "-byte buffer (4-byte aligned, whole half words)");
  auto d = driver();
  if (!d) return d.takeError();
  if (bytes >= 4)
    if (auto e = CU(*d, cuMemsetD32, p + offset, word, bytes / 4)) return e;
  if (bytes % 4) return CU(*d, cuMemsetD16, p + offset + bytes / 4 * 4, static_cast<unsigned short>(word & 0xFFFFu), 1);
  return llvm::Error::success();
}

// ---- Module ----

llvm::Expected<Module> Module::load(llvm::ArrayRef<char> cubin, llvm::StringRef name) {
  auto d = driver();
  if (!d) return d.takeError();
  if (cubin.empty()) return ir::makeError("module '" + name + "': no bytes to load");
  CUmodule m = nullptr;
  if (llvm::Error e = CU_IN(*d, "module '" + name + "'", cuModuleLoadData, &m, cubin.data())) return e;
  Module mod;
  mod.handle = m;
  mod.name = name.str();
  return mod;
}

Module::Module(Module &&o) noexcept : handle(o.handle), name(std::move(o.name)) { o.handle = nullptr; }

static void unloadModule(void *handle) {
  if (handle)
    if (const Api *api = loadedDriver()) api->cuModuleUnload_(static_cast<CUmodule>(handle));
}

Module &Module::operator=(Module &&o) noexcept {
  if (this != &o) {
    unloadModule(handle);
    handle = o.handle;
    name = std::move(o.name);
    o.handle = nullptr;
  }
  return *this;
}

Module::~Module() { unloadModule(handle); }

llvm::Expected<Function> Module::function(llvm::StringRef loweredName) const {
  if (!handle) return ir::makeError("cuModuleGetFunction(" + loweredName + "): no module loaded");
  auto d = driver();
  if (!d) return d.takeError();
  std::string fnName = loweredName.str();
  CUfunction f = nullptr;
  if (llvm::Error e = check(**d, (*d)->cuModuleGetFunction_(&f, static_cast<CUmodule>(handle), fnName.c_str()),
                            "cuModuleGetFunction(" + fnName + ")", "module '" + name + "'"))
    return e;
  Function fn;
  fn.handle = f;
  fn.name = fnName;
  fn.maxSharedOptin = state().info.maxSharedPerBlockOptin;
  if (llvm::Error e = CU_IN(*d, "kernel '" + fnName + "'", cuFuncGetAttribute, &fn.staticSharedBytes,
                            CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f))
    return e;
  return fn;
}

// ---- launches ----

llvm::Error reserveDynamicShared(const Function &fn, unsigned bytes) {
  // The default limit is on static and dynamic together: a kernel with __shared__ arrays must opt in for
  // less dynamic memory (48 KiB of rings and 16 static bytes: CUDA_ERROR_INVALID_VALUE at launch otherwise).
  if (long(bytes) + fn.staticSharedBytes <= long(kDefaultDynamicSharedLimit)) return llvm::Error::success();
  if (!fn.handle) return ir::makeError("kernel '" + fn.name + "': no function (default-constructed Function)");
  auto d = driver();
  if (!d) return d.takeError();
  const Api &api = **d;
  auto f = static_cast<CUfunction>(fn.handle);
  std::string where = "kernel '" + fn.name + "'";
  // Raise the function's dynamic limit when it is below the need; only raised, under a lock, so threads
  // launching the same function with different sizes cannot lower it under each other. Reading it back each
  // time (not caching per handle) stays right when a module is unloaded and a new function reuses the handle.
  std::lock_guard<std::mutex> lock(state().sharedOptinMutex);
  int current = 0;
  if (llvm::Error e = CU_IN(&api, where, cuFuncGetAttribute, &current, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f))
    return e;
  if (current < int(bytes))
    if (llvm::Error e = CU_IN(&api, where, cuFuncSetAttribute, f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(bytes)))
      return e;
  return llvm::Error::success();
}

llvm::Expected<int> residentBlocksPerSm(const Function &fn, unsigned threads, unsigned sharedBytes) {
  if (!fn.handle) return ir::makeError("kernel '" + fn.name + "': no function (default-constructed Function)");
  if (llvm::Error e = reserveDynamicShared(fn, sharedBytes)) return e;
  auto d = driver();
  if (!d) return d.takeError();
  const Api &api = **d;
  int blocks = 0;
  if (llvm::Error e = CU_IN(&api, "kernel '" + fn.name + "'", cuOccupancyMaxActiveBlocksPerMultiprocessor, &blocks,
                            static_cast<CUfunction>(fn.handle), int(threads), size_t(sharedBytes)))
    return e;
  return blocks;
}

llvm::Error launch(const Function &fn, const LaunchDims &dims, void **args, StreamHandle stream, bool dependent,
                   bool cooperative) {
  if (!fn.handle) return ir::makeError("launch of kernel '" + fn.name + "': no function (default-constructed Function)");
  auto d = driver();
  if (!d) return d.takeError();
  const Api &api = **d;
  auto f = static_cast<CUfunction>(fn.handle);
  std::string where = "launch of kernel '" + fn.name + "'";

  // The whole block's shared memory (dynamic + static) must fit the device's opt-in limit; the driver
  // would fail the launch less clearly, so refuse before launching.
  long allowed = fn.maxSharedOptin ? fn.maxSharedOptin : state().info.maxSharedPerBlockOptin;
  long wanted = long(dims.sharedBytes) + fn.staticSharedBytes;
  if (wanted > allowed)
    return ir::makeError(where + ": asks for " + num(dims.sharedBytes) + " bytes of dynamic shared memory (+ " +
                         num(fn.staticSharedBytes) + " static) but the device allows " + num(allowed) +
                         " bytes per block");
  if (llvm::Error e = reserveDynamicShared(fn, dims.sharedBytes)) return e;
  const bool pdl = dependent && state().info.major >= 9;
  if (pdl || cooperative) {
    CUlaunchAttribute attrs[2] = {};
    unsigned n = 0;
    if (pdl) {
      // Programmatic dependent launch: the kernel may start while the previous one in the stream finishes;
      // it waits for it in griddepcontrol.wait (templates/common.cuh gridDependencyWait).
      attrs[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      attrs[n++].value.programmaticStreamSerializationAllowed = 1;
    }
    if (cooperative) {
      // Every block resident at once, or the launch fails (CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE): never
      // a grid whose blocks wait on blocks that cannot start, e.g. beside another kernel of the same kind.
      attrs[n].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
      attrs[n++].value.cooperative = 1;
    }
    CUlaunchConfig cfg{};
    cfg.gridDimX = dims.grid[0];
    cfg.gridDimY = dims.grid[1];
    cfg.gridDimZ = dims.grid[2];
    cfg.blockDimX = dims.block[0];
    cfg.blockDimY = dims.block[1];
    cfg.blockDimZ = dims.block[2];
    cfg.sharedMemBytes = dims.sharedBytes;
    cfg.hStream = toStream(stream);
    cfg.attrs = attrs;
    cfg.numAttrs = n;
    return CU_IN(&api, where, cuLaunchKernelEx, &cfg, f, args, nullptr);
  }
  return CU_IN(&api, where, cuLaunchKernel, f, dims.grid[0], dims.grid[1], dims.grid[2], dims.block[0],
               dims.block[1], dims.block[2], dims.sharedBytes, toStream(stream), args, nullptr);
}

llvm::Expected<TensorMap> encodeTensorMap2D(DevicePtr base, int64_t inner, int64_t outer, int boxInner, int boxOuter) {
  std::string where = "tensor map of a " + num(outer) + " x " + num(inner) + " bf16 matrix (box " + num(boxOuter) +
                      " x " + num(boxInner) + ")";
  // The driver's own rules (cuTensorMapEncodeTiled), refused here with the numbers in the message.
  if (base % 16 != 0 || inner < 1 || inner % 8 != 0 || outer < 1 || inner > (int64_t(1) << 32) ||
      outer > (int64_t(1) << 32) || boxInner < 1 || boxInner * 2 > 128 || boxOuter < 1 || boxOuter > 256)
    return ir::makeError(where + ": needs a 16-byte aligned base, rows of a positive multiple of 8 elements, at "
                                 "most 2^32 in each dimension, and a box of at most 64 x 256");
  auto d = driver();
  if (!d) return d.takeError();
  const Api &api = **d;
  CUtensorMap map;
  cuuint64_t dims[2] = {static_cast<cuuint64_t>(inner), static_cast<cuuint64_t>(outer)};
  cuuint64_t strides[1] = {static_cast<cuuint64_t>(inner) * 2}; // bytes between rows
  cuuint32_t box[2] = {static_cast<cuuint32_t>(boxInner), static_cast<cuuint32_t>(boxOuter)};
  cuuint32_t elementStrides[2] = {1, 1};
  if (auto e = CU_IN(&api, where, cuTensorMapEncodeTiled, &map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2,
                     reinterpret_cast<void *>(static_cast<uintptr_t>(base)), dims, strides, box, elementStrides,
                     CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                     CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE))
    return e;
  static_assert(sizeof(CUtensorMap) == sizeof(TensorMap), "CUtensorMap is 128 bytes");
  TensorMap out;
  std::memcpy(out.bytes, &map, sizeof map);
  return out;
}

llvm::Error synchronize() {
  auto d = driver();
  if (!d) return d.takeError();
  return CU(*d, cuCtxSynchronize);
}

llvm::Expected<PinnedBuffer> PinnedBuffer::alloc(size_t bytes, unsigned threads) {
  auto d = driver();
  if (!d) return d.takeError();
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t mapped = llvm::alignTo(std::max<size_t>(bytes, 1), page);
  void *p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return ir::makeError("page-locked buffer of " + num(int64_t(bytes)) + " bytes: mmap: " + std::strerror(errno));
  // A fork (the compile workers) must not make the registered pages copy-on-write under the GPU's copies.
  madvise(p, mapped, MADV_DONTFORK);
  // Fault the pages in on `threads` threads first: the driver's register faults them in one at a time, and
  // zeroing the pages is the most of the cost (256 MB: 76 ms that way, ~25 ms in parallel on an H200 host).
  // Where a thread cannot be started, this one touches the rest.
  auto touch = [p, page](size_t from, size_t to) {
    for (size_t at = from; at < to; at += page) static_cast<volatile uint8_t *>(p)[at] = 0;
  };
  const size_t share = llvm::alignTo(llvm::divideCeil(mapped, std::max(threads, 1u)), page);
  std::vector<std::thread> touching;
  size_t begin = 0;
  for (; threads > 1 && begin < mapped; begin += share) {
    try {
      touching.emplace_back(touch, begin, std::min(mapped, begin + share));
    } catch (const std::system_error &) {
      break;
    }
  }
  for (std::thread &t : touching) t.join();
  if (threads > 1) touch(begin, mapped);
  if (llvm::Error e = CU(*d, cuMemHostRegister, p, mapped, 0u)) {
    munmap(p, mapped);
    return e;
  }
  PinnedBuffer b;
  b.p = static_cast<uint8_t *>(p);
  b.n = bytes;
  b.mapped = mapped;
  return b;
}

PinnedBuffer::PinnedBuffer(PinnedBuffer &&o) noexcept
    : p(std::exchange(o.p, nullptr)), n(std::exchange(o.n, 0)), mapped(std::exchange(o.mapped, 0)) {}

PinnedBuffer &PinnedBuffer::operator=(PinnedBuffer &&o) noexcept {
  if (this != &o) {
    PinnedBuffer old(std::move(*this)); // frees what this held
    p = std::exchange(o.p, nullptr);
    n = std::exchange(o.n, 0);
    mapped = std::exchange(o.mapped, 0);
  }
  return *this;
}

PinnedBuffer::~PinnedBuffer() {
  if (!p) return;
  if (const Api *api = loadedDriver()) api->cuMemHostUnregister_(p);
  munmap(p, mapped);
}

llvm::Error copyDeviceToDevice(DevicePtr dst, DevicePtr src, size_t bytes, StreamHandle stream) {
  if (bytes == 0) return llvm::Error::success();
  auto d = driver();
  if (!d) return d.takeError();
  return CU(*d, cuMemcpyDtoDAsync, dst, src, bytes, toStream(stream));
}

llvm::Error copy2DDeviceToDeviceAsync(DevicePtr dst, size_t dstPitch, DevicePtr src, size_t srcPitch, size_t widthBytes,
                                      size_t height, StreamHandle stream) {
  if (widthBytes == 0 || height == 0) return llvm::Error::success();
  auto d = driver();
  if (!d) return d.takeError();
  CUDA_MEMCPY2D c{};
  c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  c.srcDevice = src;
  c.srcPitch = srcPitch;
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.dstDevice = dst;
  c.dstPitch = dstPitch;
  c.WidthInBytes = widthBytes;
  c.Height = height;
  return CU(*d, cuMemcpy2DAsync, &c, toStream(stream));
}

llvm::Error copyHostToDeviceAsync(DevicePtr dst, const void *src, size_t bytes, StreamHandle stream) {
  if (bytes == 0) return llvm::Error::success();
  auto d = driver();
  if (!d) return d.takeError();
  return CU(*d, cuMemcpyHtoDAsync, dst, src, bytes, toStream(stream));
}

llvm::Error copyDeviceToHost(void *dst, DevicePtr src, size_t bytes, StreamHandle stream) {
  if (bytes == 0) return llvm::Error::success();
  auto d = driver();
  if (!d) return d.takeError();
  if (llvm::Error e = CU(*d, cuMemcpyDtoHAsync, dst, src, bytes, toStream(stream))) return e;
  return CU(*d, cuStreamSynchronize, toStream(stream));
}

llvm::Error fillAsync(DevicePtr dst, uint8_t byte, size_t bytes, StreamHandle stream) {
  if (bytes == 0) return llvm::Error::success();
  auto d = driver();
  if (!d) return d.takeError();
  return CU(*d, cuMemsetD8Async, dst, byte, bytes, toStream(stream));
}

llvm::Expected<MemoryInfo> memoryInfo() {
  auto d = driver();
  if (!d) return d.takeError();
  MemoryInfo m;
  if (llvm::Error e = CU(*d, cuMemGetInfo, &m.free, &m.total)) return e;
  return m;
}

// ---- streams and graphs ----

llvm::Expected<Stream> Stream::create() {
  auto d = driver();
  if (!d) return d.takeError();
  CUstream st = nullptr;
  if (llvm::Error e = CU(*d, cuStreamCreate, &st, CU_STREAM_NON_BLOCKING)) return e;
  Stream s;
  s.h = st;
  return s;
}

Stream::Stream(Stream &&o) noexcept : h(o.h) { o.h = nullptr; }

static void destroyStream(void *&h) {
  if (h)
    if (const Api *api = loadedDriver()) api->cuStreamDestroy_(static_cast<CUstream>(h));
  h = nullptr;
}

Stream &Stream::operator=(Stream &&o) noexcept {
  if (this != &o) {
    destroyStream(h);
    h = o.h;
    o.h = nullptr;
  }
  return *this;
}

Stream::~Stream() { destroyStream(h); }

llvm::Error Stream::synchronize() const {
  auto d = driver();
  if (!d) return d.takeError();
  return CU(*d, cuStreamSynchronize, toStream(h));
}

llvm::Expected<Graph> Graph::capture(const Stream &stream, llvm::function_ref<llvm::Error()> enqueue) {
  auto d = driver();
  if (!d) return d.takeError();
  const Api &api = **d;
  CUstream st = toStream(stream.handle());
  if (!st) return ir::makeError("graph capture needs a stream of its own, not the legacy default stream");
  // Thread-local mode: other threads' work (an embedding host's) is neither captured nor made illegal.
  if (llvm::Error e = CU(&api, cuStreamBeginCapture, st, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)) return e;
  llvm::Error enqueued = enqueue();
  CUgraph graph = nullptr;
  CUresult ended = api.cuStreamEndCapture_(st, &graph); // always end the capture, even after a failure
  auto destroyGraph = llvm::make_scope_exit([&] {
    if (graph) api.cuGraphDestroy_(graph);
  });
  if (enqueued) return enqueued;
  if (llvm::Error e = check(api, ended, "cuStreamEndCapture")) return e;
  CUgraphExec exec = nullptr;
  if (llvm::Error e = CU(&api, cuGraphInstantiateWithFlags, &exec, graph, 0)) return e;
  Graph g;
  g.exec = exec;
  return g;
}

Graph::Graph(Graph &&o) noexcept : exec(o.exec) { o.exec = nullptr; }

static void destroyGraphExec(void *&exec) {
  if (exec)
    if (const Api *api = loadedDriver()) api->cuGraphExecDestroy_(static_cast<CUgraphExec>(exec));
  exec = nullptr;
}

Graph &Graph::operator=(Graph &&o) noexcept {
  if (this != &o) {
    destroyGraphExec(exec);
    exec = o.exec;
    o.exec = nullptr;
  }
  return *this;
}

Graph::~Graph() { destroyGraphExec(exec); }

llvm::Error Graph::launch(const Stream &stream) const {
  if (!exec) return ir::makeError("cuGraphLaunch: no graph captured");
  auto d = driver();
  if (!d) return d.takeError();
  return CU(*d, cuGraphLaunch, static_cast<CUgraphExec>(exec), toStream(stream.handle()));
}

// ---- events ----

static llvm::Expected<CUevent> createEvent() {
  auto d = driver();
  if (!d) return d.takeError();
  CUevent ev = nullptr;
  if (llvm::Error e = CU(*d, cuEventCreate, &ev, CU_EVENT_DEFAULT)) return e;
  return ev;
}

static void destroyEvent(void *&ev) {
  if (ev)
    if (const Api *api = loadedDriver()) api->cuEventDestroy_(static_cast<CUevent>(ev));
  ev = nullptr;
}

static llvm::Expected<float> elapsedBetween(void *from, void *to) {
  if (!from || !to) return ir::makeError("cuEventElapsedTime: event not created");
  auto d = driver();
  if (!d) return d.takeError();
  float ms = 0;
  if (llvm::Error e = CU(*d, cuEventElapsedTime, &ms, static_cast<CUevent>(from), static_cast<CUevent>(to)))
    return e;
  return ms;
}

static llvm::Error recordEvent(void *ev, StreamHandle stream) {
  if (!ev) return ir::makeError("cuEventRecord: event not created");
  auto d = driver();
  if (!d) return d.takeError();
  return CU(*d, cuEventRecord, static_cast<CUevent>(ev), toStream(stream));
}

static llvm::Error synchronizeEvent(void *ev) {
  if (!ev) return ir::makeError("cuEventSynchronize: event not created");
  auto d = driver();
  if (!d) return d.takeError();
  return CU(*d, cuEventSynchronize, static_cast<CUevent>(ev));
}

llvm::Expected<EventTimer> EventTimer::create() {
  EventTimer t;
  auto b = createEvent();
  if (!b) return b.takeError();
  t.begin = *b;
  auto e = createEvent();
  if (!e) return e.takeError(); // t's destructor frees `begin`
  t.end = *e;
  return t;
}

EventTimer::EventTimer(EventTimer &&o) noexcept : begin(o.begin), end(o.end) { o.begin = o.end = nullptr; }

EventTimer &EventTimer::operator=(EventTimer &&o) noexcept {
  if (this != &o) {
    destroyEvent(begin);
    destroyEvent(end);
    begin = o.begin, end = o.end;
    o.begin = o.end = nullptr;
  }
  return *this;
}

EventTimer::~EventTimer() {
  destroyEvent(begin);
  destroyEvent(end);
}

llvm::Error EventTimer::start() { return recordEvent(begin, nullptr); }

llvm::Expected<float> EventTimer::stop() {
  if (llvm::Error e = recordEvent(end, nullptr)) return e;
  if (llvm::Error e = synchronizeEvent(end)) return e;
  return elapsedBetween(begin, end);
}

llvm::Expected<Event> Event::create() {
  auto ev = createEvent();
  if (!ev) return ev.takeError();
  Event e;
  e.handle = *ev;
  return e;
}

Event::Event(Event &&o) noexcept : handle(o.handle) { o.handle = nullptr; }

Event &Event::operator=(Event &&o) noexcept {
  if (this != &o) {
    destroyEvent(handle);
    handle = o.handle;
    o.handle = nullptr;
  }
  return *this;
}

Event::~Event() { destroyEvent(handle); }

llvm::Error Event::record(StreamHandle stream) { return recordEvent(handle, stream); }

llvm::Expected<bool> Event::done() const {
  if (!handle) return ir::makeError("cuEventQuery: event not created");
  auto d = driver();
  if (!d) return d.takeError();
  CUresult r = (*d)->cuEventQuery_(static_cast<CUevent>(handle));
  if (r == CUDA_ERROR_NOT_READY) return false;
  if (llvm::Error e = check(**d, r, "cuEventQuery")) return e;
  return true;
}

llvm::Error Event::synchronize() const { return synchronizeEvent(handle); }

llvm::Expected<float> Event::elapsedMs(const Event &from, const Event &to) {
  return elapsedBetween(from.handle, to.handle);
}

} // namespace minfer::cuda
