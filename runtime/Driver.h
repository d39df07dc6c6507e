// runtime/Driver.h — the CUDA driver API, loaded at run time.
//
// minfer never links libcuda: the first call to cuda::init() dlopens libcuda.so.1 and resolves the entry
// points it needs (cuGetProcAddress), so minferc and the CPU tests run where no driver exists. Every
// failure is an llvm::Error naming the driver call and cuGetErrorName's answer (`cuModuleLoadData:
// CUDA_ERROR_INVALID_IMAGE`). The wrappers own what they create (RAII), so an early return leaks nothing.
#pragma once

#include "compiler/kernels/KernelSpec.h"

#include "llvm/ADT/ArrayRef.h"
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
// Errors: "no CUDA driver: cannot load libcuda.so.1 (...)", a driver too old for minfer (needs CUDA 12.0+),
// no device. $MINFER_LIBCUDA overrides the library path (tests use it to simulate a missing driver).
llvm::Error init();
// True when init() succeeds; otherwise `why` says what is missing. For tests that skip without a GPU.
bool available(std::string *why = nullptr);

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
  llvm::Error download(void *dst, size_t bytes, size_t offset = 0) const;
  llvm::Error fill(uint8_t byte); // e.g. 0xFF poisons bf16 data with NaNs

private:
  DevicePtr p = 0;
  size_t n = 0;
};

// A loaded kernel function (non-owning; valid while its Module lives).
struct Function {
  void *handle = nullptr; // CUfunction
  std::string name;
  int maxSharedOptin = 0; // the device's limit, to reject a launch before it happens
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
llvm::Error launch(const Function &fn, const LaunchDims &dims, void **args, StreamHandle stream = nullptr);
llvm::Error synchronize();

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

// Device-to-device copy (for the copy-bandwidth ceiling in benchmarks).
llvm::Error copyDeviceToDevice(DevicePtr dst, DevicePtr src, size_t bytes, StreamHandle stream = nullptr);

} // namespace minfer::cuda
