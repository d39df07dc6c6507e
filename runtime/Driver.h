// runtime/Driver.h — the CUDA driver API, loaded at run time.
//
// minfer never links libcuda: the first call to cuda::init() dlopens libcuda.so.1 and resolves the entry
// points it needs (cuGetProcAddress), so minferc and the CPU tests run where no driver exists. Every
// failure is an llvm::Error naming the driver call and cuGetErrorName's answer (`cuModuleLoadData:
// CUDA_ERROR_INVALID_IMAGE`). The wrappers own what they create (RAII), so an early return leaks nothing.
#pragma once

#include "compiler/kernels/KernelSpec.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace minfer::cuda {

using DevicePtr = uint64_t; // CUdeviceptr
using StreamHandle = void *; // CUstream; nullptr is the legacy default stream

// Loads the driver (once), initialises it and makes device 0's primary context current on this thread.
// Errors: "no CUDA driver: cannot load libcuda.so.1: <dlerror>", a driver too old for minfer (needs CUDA
// 12.0+; the message gives found and needed), no device. $MINFER_LIBCUDA overrides the library path (tests
// use it to simulate a missing driver). Later calls are cheap: the first answer (success or the error) is
// kept for the life of the process, and each new calling thread only makes the context current. Every other
// function here calls init() itself, so none needs it called first; without a driver each returns init()'s
// error.
llvm::Error init();
// True when init() succeeds; otherwise `why` says what is missing. For tests that skip without a GPU.
bool available(std::string *why = nullptr);

// Loads the driver library at `libraryPath` on its own, checks its version and resolves every entry point
// minfer uses, then unloads it; returns the driver version (e.g. 13000). It neither initialises the driver
// nor touches init()'s process-wide state, so tests can check the messages for a missing or foreign
// library even after init() has run (init() caches its first answer for the life of the process).
llvm::Expected<int> probeDriver(llvm::StringRef libraryPath);

// The driver's version (e.g. 13000), from the library init() would load ($MINFER_LIBCUDA or libcuda.so.1),
// without initialising it (minferc --version); init()'s driver when it has run.
llvm::Expected<int> driverVersion();
// The CUDA version of the headers minfer was built with (CUDA_VERSION, e.g. 12080).
int headerCudaVersion();
// 12080 -> "12.8".
std::string versionString(int version);
// The name of a CUresult ("CUDA_ERROR_STUB_LIBRARY" for 34) from minfer's own table of the common ones, for
// when the driver cannot name it (cuGetErrorName needs a loaded driver); null when not in the table.
const char *resultName(int result);

struct DeviceInfo {
  std::string name;
  int ordinal = 0;
  int major = 0, minor = 0;    // compute capability
  int smCount = 0;
  size_t totalMemory = 0;
  int maxSharedPerBlockOptin = 0; // the opt-in limit for dynamic shared memory
  int driverVersion = 0;          // e.g. 13000
};
llvm::Expected<DeviceInfo> deviceInfo();

// Device memory, freed on destruction.
class DeviceBuffer {
public:
  static llvm::Expected<DeviceBuffer> alloc(size_t bytes);
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer &&o) noexcept;
  DeviceBuffer &operator=(DeviceBuffer &&o) noexcept;
  ~DeviceBuffer();
  DevicePtr ptr() const { return p; }
  size_t size() const { return n; }

  llvm::Error upload(const void *src, size_t bytes, size_t offset = 0);
  // The same on `stream`, asynchronously: `src` must stay valid (and page-locked, to overlap) until the
  // stream has run the copy. Refused, before anything is enqueued, when the range overruns the buffer.
  llvm::Error uploadAsync(const void *src, size_t bytes, size_t offset, StreamHandle stream);
  llvm::Error download(void *dst, size_t bytes, size_t offset = 0) const;
  llvm::Error fill(uint8_t byte); // e.g. 0xFF poisons bf16 data with NaNs
  // `bytes` (a multiple of 2) from `offset` (a multiple of 4) as repeats of the 32-bit `word`, little-endian
  // (a trailing half word takes its low half). Refused when the range overruns the buffer.
  llvm::Error fillWords(size_t offset, size_t bytes, uint32_t word);

private:
  DevicePtr p = 0;
  size_t n = 0;
};

// Page-locked host memory: the source of host-to-device copies that run at the bus's speed and
// asynchronously (a pageable source is staged by the driver through its own small buffers first). Mapped
// pages registered with cuMemHostRegister: on an H200 host 256 MB takes ~25 ms with its pages touched on
// 16 threads first, where cuMemHostAlloc took 150 ms, more than the copies it served for a 1B model's weights.
class PinnedBuffer {
public:
  // `threads` > 1 faults the pages in on that many threads before registering them (faster for large ones).
  static llvm::Expected<PinnedBuffer> alloc(size_t bytes, unsigned threads = 1);
  PinnedBuffer() = default;
  PinnedBuffer(PinnedBuffer &&o) noexcept;
  PinnedBuffer &operator=(PinnedBuffer &&o) noexcept;
  ~PinnedBuffer();
  uint8_t *data() const { return p; }
  size_t size() const { return n; }

private:
  uint8_t *p = nullptr;
  size_t n = 0;
  size_t mapped = 0; // whole pages
};

// A loaded kernel function (non-owning; valid while its Module lives).
struct Function {
  void *handle = nullptr; // CUfunction
  std::string name;
  int maxSharedOptin = 0; // the device's limit, to reject a launch before it happens
  int staticSharedBytes = 0; // __shared__ arrays in the kernel; they count against the same limit
};

// A module loaded from cubin bytes that the caller has verified (cache checksum, bundle manifest): the
// driver checks nothing, and a truncated cubin can crash inside it.
class Module {
public:
  static llvm::Expected<Module> load(llvm::ArrayRef<char> cubin, llvm::StringRef name);
  Module() = default;
  Module(Module &&o) noexcept;
  Module &operator=(Module &&o) noexcept;
  ~Module();
  llvm::Expected<Function> function(llvm::StringRef loweredName) const;

private:
  void *handle = nullptr; // CUmodule
  std::string name;
};

// Launches `fn` with kernel arguments `args` (pointers to each argument, as cuLaunchKernel wants). Dynamic
// shared memory above 48 KB is opted in first; more than the device allows is an error before launching.
// `dependent`: a programmatic dependent launch on sm_90 and later (the kernel may begin while the previous
// one of the stream drains; every minfer kernel waits for it before reading its outputs); ignored below sm_90.
// `cooperative`: all blocks are resident together or the launch is an error (the persistent decode kernel).
llvm::Error launch(const Function &fn, const LaunchDims &dims, void **args, StreamHandle stream = nullptr,
                   bool dependent = false, bool cooperative = false);
// Opts `fn` in to `bytes` of dynamic shared memory when that is above the default 48 KB (launch() does it
// too). The runtime calls it for every kernel at load, so nothing changes a kernel attribute during a graph
// capture.
llvm::Error reserveDynamicShared(const Function &fn, unsigned bytes);
// How many blocks of `fn` with `threads` threads and `sharedBytes` of dynamic shared memory one SM holds at
// once (its registers, shared memory and the SM's limits): the persistent decode kernel's grid is this
// times the SMs. Reserves the shared memory first, as a launch would.
llvm::Expected<int> residentBlocksPerSm(const Function &fn, unsigned threads, unsigned sharedBytes);
llvm::Error synchronize();

// A TMA tensor map (CUtensorMap: 128 opaque bytes) as a kernel argument.
struct alignas(64) TensorMap {
  uint8_t bytes[128];
};
// Encodes the map of a row-major bf16 matrix at `base` with `outer` rows of `inner` elements, read in boxes
// of boxInner x boxOuter elements with 128-byte swizzle (templates/hopper.cuh); elements past the extents
// read as zeros. base 16-byte aligned, inner a multiple of 8, boxInner * 2 <= 128, boxOuter <= 256.
llvm::Expected<TensorMap> encodeTensorMap2D(DevicePtr base, int64_t inner, int64_t outer, int boxInner, int boxOuter);

// Times GPU work with events on the default stream: start(), enqueue work, then stop() → milliseconds.
class EventTimer {
public:
  static llvm::Expected<EventTimer> create();
  EventTimer() = default;
  EventTimer(EventTimer &&o) noexcept;
  EventTimer &operator=(EventTimer &&o) noexcept;
  ~EventTimer();
  llvm::Error start();
  llvm::Expected<float> stop(); // synchronises on the stop event

private:
  void *begin = nullptr, *end = nullptr; // CUevent
};

// One CUDA event, for harnesses that enqueue many timed launches before synchronising once
// (bench::timeMedian). Timing-enabled (cuEventCreate with CU_EVENT_DEFAULT).
class Event {
public:
  static llvm::Expected<Event> create();
  Event() = default;
  Event(Event &&o) noexcept;
  Event &operator=(Event &&o) noexcept;
  ~Event();
  llvm::Error record(StreamHandle stream = nullptr);
  llvm::Expected<bool> done() const; // cuEventQuery: has the GPU passed this event yet?
  llvm::Error synchronize() const;
  // Milliseconds between two recorded, completed events.
  static llvm::Expected<float> elapsedMs(const Event &from, const Event &to);

private:
  void *handle = nullptr; // CUevent
};

// Device-to-device copy (for the copy-bandwidth ceiling in benchmarks).
llvm::Error copyDeviceToDevice(DevicePtr dst, DevicePtr src, size_t bytes, StreamHandle stream = nullptr);
// Host-to-device copy enqueued on `stream`; `src` may be reused once the call returns (pageable memory is
// staged by the driver before it returns).
llvm::Error copyHostToDeviceAsync(DevicePtr dst, const void *src, size_t bytes, StreamHandle stream);
// `height` rows of `widthBytes` from `src` (rows `srcPitch` bytes apart) to `dst` (rows `dstPitch` apart), on
// the device, enqueued on `stream`: a strided copy, e.g. rows interleaved into every other row.
llvm::Error copy2DDeviceToDeviceAsync(DevicePtr dst, size_t dstPitch, DevicePtr src, size_t srcPitch, size_t widthBytes,
                                      size_t height, StreamHandle stream);
// Device-to-host copy after the work already on `stream`; returns when the bytes are in `dst`.
llvm::Error copyDeviceToHost(void *dst, DevicePtr src, size_t bytes, StreamHandle stream);
// Sets `bytes` bytes at `dst` to `byte`, enqueued on `stream`.
llvm::Error fillAsync(DevicePtr dst, uint8_t byte, size_t bytes, StreamHandle stream);

struct MemoryInfo {
  size_t free = 0, total = 0; // bytes, as cuMemGetInfo reports them
};
llvm::Expected<MemoryInfo> memoryInfo();

// A stream of minfer's own (non-blocking with respect to the legacy default stream): sessions run on one,
// and CUDA graphs can only be captured from one.
class Stream {
public:
  static llvm::Expected<Stream> create();
  Stream() = default;
  Stream(Stream &&o) noexcept;
  Stream &operator=(Stream &&o) noexcept;
  ~Stream();
  StreamHandle handle() const { return h; }
  llvm::Error synchronize() const;

private:
  void *h = nullptr; // CUstream
};

// A captured and instantiated CUDA graph: the launches `enqueue` puts on `stream`, replayed with launch().
// Capture is thread-local, so other threads' work is neither captured nor disturbed. Kernel arguments are
// frozen at capture: whatever changes between replays must be read from device memory.
class Graph {
public:
  static llvm::Expected<Graph> capture(const Stream &stream, llvm::function_ref<llvm::Error()> enqueue);
  Graph() = default;
  Graph(Graph &&o) noexcept;
  Graph &operator=(Graph &&o) noexcept;
  ~Graph();
  bool valid() const { return exec != nullptr; }
  llvm::Error launch(const Stream &stream) const;

private:
  void *exec = nullptr; // CUgraphExec
};

} // namespace minfer::cuda
