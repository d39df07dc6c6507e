// runtime/DriverLoader.cpp — the CUDA driver library, loaded with dlopen on first use, and its state.
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
#include "runtime/DriverApi.h"

#include "ir/Diagnostics.h"

#include "llvm/ADT/ScopeExit.h"

#include <dlfcn.h>

#include <cstdlib>

namespace minfer::cuda {
namespace detail {
namespace {

// minfer needs CUDA 12.0 drivers: cuGetProcAddress_v2 (the one that reports why a symbol is missing) and
// the 12.x ABI of the entry points below appeared there.
constexpr int kMinDriverVersion = 12000;
constexpr const char *kDefaultLibrary = "libcuda.so.1";

// 12040 -> "12.4" (the driver encodes major * 1000 + minor * 10).
std::string versionText(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }

// The CUresults a user is likely to meet, named without the driver: cuGetErrorName needs a working driver,
// and the errors of loading one (the toolkit's stub library answers every call with 34) come before that.
#define MINFER_CURESULT_NAMES(X)                                                                             \
  X(CUDA_SUCCESS) X(CUDA_ERROR_INVALID_VALUE) X(CUDA_ERROR_OUT_OF_MEMORY) X(CUDA_ERROR_NOT_INITIALIZED)       \
  X(CUDA_ERROR_DEINITIALIZED) X(CUDA_ERROR_STUB_LIBRARY) X(CUDA_ERROR_DEVICE_UNAVAILABLE)                    \
  X(CUDA_ERROR_NO_DEVICE) X(CUDA_ERROR_INVALID_DEVICE) X(CUDA_ERROR_DEVICE_NOT_LICENSED)                     \
  X(CUDA_ERROR_INVALID_IMAGE) X(CUDA_ERROR_INVALID_CONTEXT) X(CUDA_ERROR_NO_BINARY_FOR_GPU)                  \
  X(CUDA_ERROR_UNSUPPORTED_PTX_VERSION) X(CUDA_ERROR_INVALID_HANDLE) X(CUDA_ERROR_NOT_FOUND)                  \
  X(CUDA_ERROR_NOT_READY) X(CUDA_ERROR_ILLEGAL_ADDRESS) X(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)                \
  X(CUDA_ERROR_LAUNCH_TIMEOUT) X(CUDA_ERROR_ILLEGAL_INSTRUCTION) X(CUDA_ERROR_MISALIGNED_ADDRESS)            \
  X(CUDA_ERROR_LAUNCH_FAILED) X(CUDA_ERROR_NOT_PERMITTED) X(CUDA_ERROR_NOT_SUPPORTED)                        \
  X(CUDA_ERROR_SYSTEM_NOT_READY) X(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH)                                        \
  X(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE) X(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)                      \
  X(CUDA_ERROR_UNKNOWN)

// "CUDA_ERROR_INVALID_IMAGE (device kernel image is invalid)": the driver's name and text when it can give
// them, else the name from minfer's table, else the number.
std::string describe(const Api &api, CUresult r) {
  const char *name = nullptr, *text = nullptr;
  if (api.cuGetErrorName_ && api.cuGetErrorName_(r, &name) != CUDA_SUCCESS) name = nullptr;
  if (api.cuGetErrorString_ && api.cuGetErrorString_(r, &text) != CUDA_SUCCESS) text = nullptr;
  if (!name) name = resultName(r);
  std::string s = name ? name : "CUresult " + std::to_string(int(r));
  if (text) s += std::string(" (") + text + ")";
  return s;
}

// What to do when the library is missing or not a driver.
constexpr const char *kLibcudaHint =
    "; if the NVIDIA driver is installed elsewhere, set MINFER_LIBCUDA to the path of its libcuda.so.1";

// dlopen + version check + entry points; nothing is initialised. The library is closed again on failure.
llvm::Expected<std::unique_ptr<Api>> loadLibrary(const std::string &path) {
  auto api = std::make_unique<Api>();
  api->path = path;
  dlerror(); // clear any stale message
  api->library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!api->library) {
    const char *why = dlerror();
    return ir::makeError("no CUDA driver: cannot load " + path + ": " + (why ? why : "unknown dlopen error") +
                         kLibcudaHint);
  }
  auto closeOnError = llvm::make_scope_exit([&] {
    if (api && api->library) dlclose(api->library);
  });
  auto symbol = [&](const char *name) { return dlsym(api->library, name); };

  auto getVersion = reinterpret_cast<PFN_cuDriverGetVersion_v2020>(symbol("cuDriverGetVersion"));
  api->cuGetErrorName_ = reinterpret_cast<PFN_cuGetErrorName_v6000>(symbol("cuGetErrorName"));
  api->cuGetErrorString_ = reinterpret_cast<PFN_cuGetErrorString_v6000>(symbol("cuGetErrorString"));
  if (!getVersion || !api->cuGetErrorName_ || !api->cuGetErrorString_)
    return ir::makeError("no CUDA driver: " + path + " is not a CUDA driver library (it has no cuDriverGetVersion)" +
                         kLibcudaHint);
  CUresult versionResult = getVersion(&api->driverVersion);
  if (versionResult == CUDA_ERROR_STUB_LIBRARY)
    return ir::makeError("no CUDA driver: " + path + " is the CUDA toolkit's stub library, not a driver "
                         "(cuDriverGetVersion: CUDA_ERROR_STUB_LIBRARY)" + kLibcudaHint);
  if (llvm::Error e = check(*api, versionResult, "cuDriverGetVersion", path)) return e;
  if (api->driverVersion < kMinDriverVersion)
    return ir::makeError("CUDA driver too old: " + path + " supports CUDA " + versionText(api->driverVersion) + " (" +
                         num(api->driverVersion) + "); minfer needs CUDA " + versionText(kMinDriverVersion) + " (" +
                         num(kMinDriverVersion) + ") or newer; update the NVIDIA driver");

  auto getProc = reinterpret_cast<PFN_cuGetProcAddress_v12000>(symbol("cuGetProcAddress_v2"));
  if (!getProc)
    return ir::makeError("CUDA driver " + path + " (version " + versionText(api->driverVersion) +
                         ") does not export cuGetProcAddress_v2");
  auto resolve = [&](const char *name, int version, void **out) -> llvm::Error {
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult r = getProc(name, out, version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &status);
    std::string what = "cuGetProcAddress(" + std::string(name) + ", " + num(version) + ") in " + path;
    if (r != CUDA_SUCCESS) return ir::makeError(what + ": " + describe(*api, r));
    if (status != CU_GET_PROC_ADDRESS_SUCCESS || !*out)
      return ir::makeError(what + (status == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT ? ": version not sufficient"
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
    return ir::makeError("no usable CUDA device: cuInit: " + describe(a, r) + " (driver " +
                         versionText(a.driverVersion) + " from " + path + ")");
  int count = 0;
  if (llvm::Error e = check(a, a.cuDeviceGetCount_(&count), "cuDeviceGetCount")) return e;
  if (count == 0)
    return ir::makeError("no CUDA device: driver " + versionText(a.driverVersion) + " from " + path + " sees none");

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

} // namespace

std::string num(int64_t v) { return std::to_string(v); }

} // namespace detail

const char *resultName(int result) {
  switch (result) {
#define MINFER_CASE(name)                                                                                    \
  case name:                                                                                                 \
    return #name;
    MINFER_CURESULT_NAMES(MINFER_CASE)
#undef MINFER_CASE
  default:
    return nullptr;
  }
}

namespace detail {

llvm::Error check(const Api &api, CUresult r, llvm::StringRef call, const llvm::Twine &context) {
  if (r == CUDA_SUCCESS) return llvm::Error::success();
  std::string ctx = context.str();
  return ir::makeError((ctx.empty() ? "" : ctx + ": ") + call + ": " + describe(api, r));
}

State &state() {
  static State *s = new State; // leaked on purpose: usable from other objects' destructors at exit
  return *s;
}
// Initialises once per process and makes the context current on the calling thread; returns the driver.
llvm::Expected<const Api *> driver() {
  State &s = state();
  std::call_once(s.once, [&] {
    if (llvm::Error e = initialise(s)) s.error = llvm::toString(std::move(e));
  });
  if (!s.api) return ir::makeError(s.error);
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

} // namespace detail

using namespace detail;

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

int headerCudaVersion() { return CUDA_VERSION; }

std::string versionString(int version) { return versionText(version); }

llvm::Expected<int> driverVersion() {
  if (const Api *a = state().api.get()) return a->driverVersion;
  const char *env = std::getenv("MINFER_LIBCUDA");
  return probeDriver(env && *env ? env : kDefaultLibrary);
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

} // namespace minfer::cuda
