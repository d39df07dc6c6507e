// runtime/Driver.cpp — the CUDA driver API, loaded with dlopen on first use.
//
// <cuda.h> and <cudaTypedefs.h> are included for types only; no function from them is called directly, so
// nothing here links libcuda. Loading goes: dlopen the library ($MINFER_LIBCUDA or libcuda.so.1), read its
// version with cuDriverGetVersion (a stable, unversioned export that works before cuInit), refuse drivers
// older than CUDA 12.0, then ask cuGetProcAddress_v2 for every entry point at the ABI version of the PFN
// typedef it is stored in (see kEntryPoints below). Each failing call becomes an llvm::Error reading
// "<call>: <cuGetErrorName> (<cuGetErrorString>)".
//
// The library, the primary context and the device description live for the whole process: they are
// created once under std::call_once and deliberately never torn down (unloading libcuda or releasing the
// primary context while static objects may still free memory at exit is worse than leaving them).
#include "runtime/Driver.h"

#include "llvm/ADT/ScopeExit.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace minfer::cuda {
namespace {

// minfer needs CUDA 12.0 drivers: cuGetProcAddress_v2 (the one that reports why a symbol is missing) and
// the 12.x ABI of the entry points below appeared there.
constexpr int kMinDriverVersion = 12000;
// Dynamic shared memory a kernel may use without opting in with CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
// 48 KiB on every architecture since Volta.
constexpr unsigned kDefaultDynamicSharedLimit = 48 * 1024;
constexpr const char *kDefaultLibrary = "libcuda.so.1";

// Every driver entry point minfer calls, with the version of the PFN typedef (cudaTypedefs.h) it is stored
// in. cuGetProcAddress is asked for exactly that version, so the pointer's type and the function behind it
// agree even where the driver has newer variants: cuMemAlloc at 3020 is the 64-bit `_v2`, cuCtxSynchronize
// at 2000 the one without the context argument that CUDA 13.0 added, cuEventElapsedTime at 2000 the
// original (12.8 added a `_v2`). Streams are the legacy default stream (CU_GET_PROC_ADDRESS_LEGACY_STREAM).
#define MINFER_DRIVER_ENTRY_POINTS(X)                                                                        \
  X(cuInit, 2000)                                                                                            \
  X(cuDeviceGetCount, 2000)                                                                                  \
  X(cuDeviceGet, 2000)                                                                                       \
  X(cuDeviceGetName, 2000)                                                                                   \
  X(cuDeviceGetAttribute, 2000)                                                                              \
  X(cuDeviceTotalMem, 3020)                                                                                  \
  X(cuDevicePrimaryCtxRetain, 7000)                                                                          \
  X(cuCtxSetCurrent, 4000)                                                                                   \
  X(cuCtxSynchronize, 2000)                                                                                  \
  X(cuMemAlloc, 3020)                                                                                        \
  X(cuMemFree, 3020)                                                                                         \
  X(cuMemcpyHtoD, 3020)                                                                                      \
  X(cuMemcpyDtoH, 3020)                                                                                      \
  X(cuMemcpyDtoDAsync, 3020)                                                                                 \
  X(cuMemsetD8, 3020)                                                                                        \
  X(cuModuleLoadData, 2000)                                                                                  \
  X(cuModuleUnload, 2000)                                                                                    \
  X(cuModuleGetFunction, 2000)                                                                               \
  X(cuFuncGetAttribute, 2020)                                                                                \
  X(cuFuncSetAttribute, 9000)                                                                                \
  X(cuLaunchKernel, 4000)                                                                                    \
  X(cuLaunchKernelEx, 11060)                                                                                 \
  X(cuEventCreate, 2000)                                                                                     \
  X(cuEventDestroy, 4000)                                                                                    \
  X(cuEventRecord, 2000)                                                                                     \
  X(cuEventQuery, 2000)                                                                                      \
  X(cuEventSynchronize, 2000)                                                                                \
  X(cuEventElapsedTime, 2000)                                                                                \
  X(cuCtxGetCurrent, 4000)                                                                                   \
  X(cuMemGetInfo, 3020)                                                                                      \
  X(cuMemcpyHtoDAsync, 3020)                                                                                 \
  X(cuMemcpyDtoHAsync, 3020)                                                                                 \
  X(cuMemsetD8Async, 3020)                                                                                   \
  X(cuStreamCreate, 2000)                                                                                    \
  X(cuStreamDestroy, 4000)                                                                                   \
  X(cuStreamSynchronize, 2000)                                                                               \
  X(cuStreamBeginCapture, 10010)                                                                             \
  X(cuStreamEndCapture, 10000)                                                                               \
  X(cuGraphInstantiateWithFlags, 11040)                                                                      \
  X(cuGraphLaunch, 10000)                                                                                    \
  X(cuGraphExecDestroy, 10000)                                                                               \
  X(cuGraphDestroy, 10000)

// The loaded library and its entry points. Members are named `<call>_` (pasted, so cuda.h's macros such
// as `#define cuMemAlloc cuMemAlloc_v2` never rename them); call them through CU() below.
struct Api {
  void *library = nullptr;
  std::string path;
  int driverVersion = 0;
  // Resolved with dlsym: stable exports since CUDA 6.0, needed before cuGetProcAddress is known.
  PFN_cuGetErrorName_v6000 cuGetErrorName_ = nullptr;
  PFN_cuGetErrorString_v6000 cuGetErrorString_ = nullptr;
#define MINFER_DECLARE(fn, version) PFN_##fn##_v##version fn##_ = nullptr;
  MINFER_DRIVER_ENTRY_POINTS(MINFER_DECLARE)
#undef MINFER_DECLARE
};

llvm::Error fail(const llvm::Twine &msg) { return llvm::createStringError(llvm::inconvertibleErrorCode(), msg); }

// 12040 -> "12.4" (the driver encodes major * 1000 + minor * 10).
std::string versionText(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }
std::string num(int64_t v) { return std::to_string(v); }

// "CUDA_ERROR_INVALID_IMAGE (device kernel image is invalid)"
std::string describe(const Api &api, CUresult r) {
  const char *name = nullptr, *text = nullptr;
  if (api.cuGetErrorName_) api.cuGetErrorName_(r, &name);
  if (api.cuGetErrorString_) api.cuGetErrorString_(r, &text);
  std::string s = name ? name : "CUresult " + std::to_string(int(r));
  if (text) s += std::string(" (") + text + ")";
  return s;
}

llvm::Error check(const Api &api, CUresult r, llvm::StringRef call, const llvm::Twine &context = "") {
  if (r == CUDA_SUCCESS) return llvm::Error::success();
  std::string ctx = context.str();
  return fail((ctx.empty() ? "" : ctx + ": ") + call + ": " + describe(api, r));
}

// dlopen + version check + entry points; nothing is initialised. The library is closed again on failure.
llvm::Expected<std::unique_ptr<Api>> loadLibrary(const std::string &path) {
  auto api = std::make_unique<Api>();
  api->path = path;
  dlerror(); // clear any stale message
  api->library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!api->library) {
    const char *why = dlerror();
    return fail("no CUDA driver: cannot load " + path + ": " + (why ? why : "unknown dlopen error"));
  }
  auto closeOnError = llvm::make_scope_exit([&] {
    if (api && api->library) dlclose(api->library);
  });
  auto symbol = [&](const char *name) { return dlsym(api->library, name); };

  auto getVersion = reinterpret_cast<PFN_cuDriverGetVersion_v2020>(symbol("cuDriverGetVersion"));
  api->cuGetErrorName_ = reinterpret_cast<PFN_cuGetErrorName_v6000>(symbol("cuGetErrorName"));
  api->cuGetErrorString_ = reinterpret_cast<PFN_cuGetErrorString_v6000>(symbol("cuGetErrorString"));
  if (!getVersion || !api->cuGetErrorName_ || !api->cuGetErrorString_)
    return fail("no CUDA driver: " + path + " is not a CUDA driver library (it has no cuDriverGetVersion)");
  if (llvm::Error e = check(*api, getVersion(&api->driverVersion), "cuDriverGetVersion", path))
    return e;
  if (api->driverVersion < kMinDriverVersion)
    return fail("CUDA driver too old: " + path + " supports CUDA " + versionText(api->driverVersion) + " (" +
                num(api->driverVersion) + "); minfer needs CUDA " + versionText(kMinDriverVersion) + " (" +
                num(kMinDriverVersion) + ") or newer; update the NVIDIA driver");

  auto getProc = reinterpret_cast<PFN_cuGetProcAddress_v12000>(symbol("cuGetProcAddress_v2"));
  if (!getProc)
    return fail("CUDA driver " + path + " (version " + versionText(api->driverVersion) +
                ") does not export cuGetProcAddress_v2");
  auto resolve = [&](const char *name, int version, void **out) -> llvm::Error {
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult r = getProc(name, out, version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &status);
    std::string what = "cuGetProcAddress(" + std::string(name) + ", " + num(version) + ") in " + path;
    if (r != CUDA_SUCCESS) return fail(what + ": " + describe(*api, r));
    if (status != CU_GET_PROC_ADDRESS_SUCCESS || !*out)
      return fail(what + (status == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT ? ": version not sufficient"
                                                                               : ": symbol not found"));
    return llvm::Error::success();
  };
#define MINFER_RESOLVE(fn, version)                                                                          \
  if (llvm::Error e = resolve(#fn, version, reinterpret_cast<void **>(&api->fn##_))) return e;
  MINFER_DRIVER_ENTRY_POINTS(MINFER_RESOLVE)
#undef MINFER_RESOLVE

  closeOnError.release();
  return api;
}

// The process-wide driver state, filled once by initialise(). Never destroyed (see the file comment).
struct State {
  std::once_flag once;
  std::unique_ptr<Api> api;
  std::string error; // init()'s answer when it failed
  CUcontext context = nullptr;
  DeviceInfo info;
  std::mutex sharedOptinMutex; // serialises the read-raise of MAX_DYNAMIC_SHARED_SIZE_BYTES in launch()
};
State &state() {
  static State *s = new State; // leaked on purpose: usable from other objects' destructors at exit
  return *s;
}
// Makes minfer's context current on the calling thread unless it already is. Asked of the driver every time
// (cuCtxGetCurrent is a thread-local read inside it), not cached: an embedding host may switch contexts
// between minfer's calls (PyTorch on another device), and a cached answer would then be stale.
CUresult makeCurrent(const Api &api, CUcontext context) {
  CUcontext current = nullptr;
  if (api.cuCtxGetCurrent_(&current) == CUDA_SUCCESS && current == context) return CUDA_SUCCESS;
  return api.cuCtxSetCurrent_(context);
}

llvm::Error initialise(State &s) {
  const char *env = std::getenv("MINFER_LIBCUDA");
  std::string path = env && *env ? env : kDefaultLibrary;
  auto api = loadLibrary(path);
  if (!api) return api.takeError();
  // From here on a failure leaves the library loaded: once cuInit has run, the driver may have started
  // threads, and unloading it under them is unsafe.
  const Api &a = **api;

  if (CUresult r = a.cuInit_(0); r != CUDA_SUCCESS)
    return fail("no usable CUDA device: cuInit: " + describe(a, r) + " (driver " + versionText(a.driverVersion) +
                " from " + path + ")");
  int count = 0;
  if (llvm::Error e = check(a, a.cuDeviceGetCount_(&count), "cuDeviceGetCount")) return e;
  if (count == 0)
    return fail("no CUDA device: driver " + versionText(a.driverVersion) + " from " + path + " sees none");

  CUdevice dev = 0;
  if (llvm::Error e = check(a, a.cuDeviceGet_(&dev, 0), "cuDeviceGet", "device 0")) return e;
  DeviceInfo &info = s.info;
  info.ordinal = 0;
  info.driverVersion = a.driverVersion;
  char name[256] = {}; // NVIDIA's names are well under 100 characters
  if (llvm::Error e = check(a, a.cuDeviceGetName_(name, sizeof name - 1, dev), "cuDeviceGetName")) return e;
  info.name = name;
  struct {
    CUdevice_attribute attr;
    int *out;
    const char *what;
  } attrs[] = {
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &info.major, "compute capability major"},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &info.minor, "compute capability minor"},
      {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &info.smCount, "multiprocessor count"},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, &info.maxSharedPerBlockOptin,
       "max shared memory per block (opt-in)"},
  };
  for (auto &at : attrs)
    if (llvm::Error e = check(a, a.cuDeviceGetAttribute_(at.out, at.attr, dev), "cuDeviceGetAttribute", at.what))
      return e;
  if (llvm::Error e = check(a, a.cuDeviceTotalMem_(&info.totalMemory, dev), "cuDeviceTotalMem")) return e;

  // The primary context is the one the CUDA runtime (and so PyTorch) shares: retained, never released.
  if (llvm::Error e = check(a, a.cuDevicePrimaryCtxRetain_(&s.context, dev), "cuDevicePrimaryCtxRetain", "device 0"))
    return e;
  s.api = std::move(*api);
  return llvm::Error::success();
}

// Initialises once per process and makes the context current on the calling thread; returns the driver.
llvm::Expected<const Api *> driver() {
  State &s = state();
  std::call_once(s.once, [&] {
    if (llvm::Error e = initialise(s)) s.error = llvm::toString(std::move(e));
  });
  if (!s.api) return fail(s.error);
  if (llvm::Error e = check(*s.api, makeCurrent(*s.api, s.context), "cuCtxSetCurrent")) return e;
  return s.api.get();
}

// The driver, for destructors, with minfer's context current (a destructor may run on another thread than
// the allocation, or after the host switched contexts): null when it never loaded (nothing to free).
const Api *loadedDriver() {
  State &s = state();
  if (!s.api) return nullptr;
  makeCurrent(*s.api, s.context);
  return s.api.get();
}

// CU(api, cuMemAlloc, &p, n) calls the entry point and turns a failure into "cuMemAlloc: CUDA_ERROR_...".
#define CU(api, fn, ...) check(*(api), (api)->fn##_(__VA_ARGS__), #fn)
#define CU_IN(api, context, fn, ...) check(*(api), (api)->fn##_(__VA_ARGS__), #fn, context)

CUstream toStream(StreamHandle s) { return static_cast<CUstream>(s); }

} // namespace

llvm::Error init() {
  auto d = driver();
  return d ? llvm::Error::success() : d.takeError();
}

bool available(std::string *why) {
  if (llvm::Error e = init()) {
    std::string msg = llvm::toString(std::move(e));
    if (why) *why = std::move(msg);
    return false;
  }
  if (why) why->clear();
  return true;
}

llvm::Expected<int> probeDriver(llvm::StringRef libraryPath) {
  auto api = loadLibrary(libraryPath.str());
  if (!api) return api.takeError();
  int version = (*api)->driverVersion;
  dlclose((*api)->library); // only symbols were looked up: nothing of it is in use
  return version;
}

llvm::Expected<DeviceInfo> deviceInfo() {
  auto d = driver();
  if (!d) return d.takeError();
  return state().info;
}

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
    return fail(what + " of " + num(bytes) + " bytes at offset " + num(offset) + " overruns a device buffer of " +
                num(size) + " bytes");
  return llvm::Error::success();
}

llvm::Error DeviceBuffer::upload(const void *src, size_t bytes, size_t offset) {
  if (llvm::Error e = checkRange("upload", bytes, offset, n)) return e;
  if (bytes == 0) return llvm::Error::success();
  auto d = driver();
  if (!d) return d.takeError();
  return CU(*d, cuMemcpyHtoD, p + offset, src, bytes);
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

// ---- Module ----

llvm::Expected<Module> Module::load(llvm::ArrayRef<char> cubin, llvm::StringRef name) {
  auto d = driver();
  if (!d) return d.takeError();
  if (cubin.empty()) return fail("module '" + name + "': no bytes to load");
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
  if (!handle) return fail("cuModuleGetFunction(" + loweredName + "): no module loaded");
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
  if (bytes <= kDefaultDynamicSharedLimit) return llvm::Error::success();
  if (!fn.handle) return fail("kernel '" + fn.name + "': no function (default-constructed Function)");
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

llvm::Error launch(const Function &fn, const LaunchDims &dims, void **args, StreamHandle stream, bool dependent) {
  if (!fn.handle) return fail("launch of kernel '" + fn.name + "': no function (default-constructed Function)");
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
    return fail(where + ": asks for " + num(dims.sharedBytes) + " bytes of dynamic shared memory (+ " +
                num(fn.staticSharedBytes) + " static) but the device allows " + num(allowed) + " bytes per block");
  if (llvm::Error e = reserveDynamicShared(fn, dims.sharedBytes)) return e;
  if (dependent && state().info.major >= 9) {
    // Programmatic dependent launch: the kernel may start while the previous one in the stream finishes;
    // it waits for it in griddepcontrol.wait (templates/common.cuh gridDependencyWait).
    CUlaunchAttribute attr{};
    attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig cfg{};
    cfg.gridDimX = dims.grid[0];
    cfg.gridDimY = dims.grid[1];
    cfg.gridDimZ = dims.grid[2];
    cfg.blockDimX = dims.block[0];
    cfg.blockDimY = dims.block[1];
    cfg.blockDimZ = dims.block[2];
    cfg.sharedMemBytes = dims.sharedBytes;
    cfg.hStream = toStream(stream);
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    return CU_IN(&api, where, cuLaunchKernelEx, &cfg, f, args, nullptr);
  }
  return CU_IN(&api, where, cuLaunchKernel, f, dims.grid[0], dims.grid[1], dims.grid[2], dims.block[0],
               dims.block[1], dims.block[2], dims.sharedBytes, toStream(stream), args, nullptr);
}

llvm::Error synchronize() {
  auto d = driver();
  if (!d) return d.takeError();
  return CU(*d, cuCtxSynchronize);
}

llvm::Error copyDeviceToDevice(DevicePtr dst, DevicePtr src, size_t bytes, StreamHandle stream) {
  if (bytes == 0) return llvm::Error::success();
  auto d = driver();
  if (!d) return d.takeError();
  return CU(*d, cuMemcpyDtoDAsync, dst, src, bytes, toStream(stream));
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
  if (!st) return fail("graph capture needs a stream of its own, not the legacy default stream");
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
  if (!exec) return fail("cuGraphLaunch: no graph captured");
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
  if (!from || !to) return fail("cuEventElapsedTime: event not created");
  auto d = driver();
  if (!d) return d.takeError();
  float ms = 0;
  if (llvm::Error e = CU(*d, cuEventElapsedTime, &ms, static_cast<CUevent>(from), static_cast<CUevent>(to)))
    return e;
  return ms;
}

static llvm::Error recordEvent(void *ev, StreamHandle stream) {
  if (!ev) return fail("cuEventRecord: event not created");
  auto d = driver();
  if (!d) return d.takeError();
  return CU(*d, cuEventRecord, static_cast<CUevent>(ev), toStream(stream));
}

static llvm::Error synchronizeEvent(void *ev) {
  if (!ev) return fail("cuEventSynchronize: event not created");
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
  if (!handle) return fail("cuEventQuery: event not created");
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
