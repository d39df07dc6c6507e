// runtime/DriverApi.h — inside the driver layer only: the loaded libcuda's entry points and the process-wide
// driver state, shared by DriverLoader.cpp (loading, initialising) and Driver.cpp (the RAII objects,
// launches, copies). Nothing outside runtime/Driver*.cpp includes it; everyone else uses runtime/Driver.h.
#pragma once

#include "runtime/Driver.h"

#include <cuda.h>
#include <cudaTypedefs.h>

#include <memory>
#include <mutex>
#include <string>

namespace minfer::cuda::detail {

// Shared memory (static and dynamic together) a kernel may use without opting in with
// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: 48 KiB on every architecture since Volta.
constexpr unsigned kDefaultDynamicSharedLimit = 48 * 1024;
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
  X(cuMemsetD16, 3020)                                                                                       \
  X(cuMemsetD32, 3020)                                                                                       \
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
  X(cuGraphDestroy, 10000)                                                                                   \
  X(cuMemHostRegister, 6050)                                                                                 \
  X(cuMemHostUnregister, 4000)                                                                               \
  X(cuMemcpy2DAsync, 3020)                                                                                   \
  X(cuTensorMapEncodeTiled, 12000)                                                                           \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor, 6050)

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

// The process-wide driver state, filled once by DriverLoader.cpp's initialise(). Never destroyed.
struct State {
  std::once_flag once;
  std::unique_ptr<Api> api;
  std::string error; // init()'s answer when it failed
  CUcontext context = nullptr;
  DeviceInfo info;
  std::mutex sharedOptinMutex; // serialises the read-raise of MAX_DYNAMIC_SHARED_SIZE_BYTES in launch()
};
State &state();

// Initialises once per process and makes the context current on the calling thread; returns the driver.
llvm::Expected<const Api *> driver();
// The driver, for destructors, with minfer's context current: null when it never loaded (nothing to free).
const Api *loadedDriver();

std::string num(int64_t v);
// A failed call as "<context>: <call>: CUDA_ERROR_... (text)".
llvm::Error check(const Api &api, CUresult r, llvm::StringRef call, const llvm::Twine &context = "");

// CU(api, cuMemAlloc, &p, n) calls the entry point and turns a failure into "cuMemAlloc: CUDA_ERROR_...".
#define CU(api, fn, ...) check(*(api), (api)->fn##_(__VA_ARGS__), #fn)
#define CU_IN(api, context, fn, ...) check(*(api), (api)->fn##_(__VA_ARGS__), #fn, context)

inline CUstream toStream(StreamHandle s) { return static_cast<CUstream>(s); }

} // namespace minfer::cuda::detail
