// jit/Nvrtc.h — compiles generated CUDA C++ to cubin (and PTX) with NVRTC.
//
// A source brings its own in-memory headers (the compiler passes the kernel templates, embedded in the
// binary at build time: compiler/kernels/KernelSpec.h kernelSource); CUDA's own headers (cuda_bf16.h, ...) come from $CUDA_HOME/include, or from the
// toolkit that supplied libnvrtc, and an error says where it looked when they are missing. A failed
// compile reports the kernel's name, NVRTC's full log, and the path of the dumped source.
#pragma once

#include "jit/Target.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace minfer {

// An in-memory header NVRTC may #include: (file name, contents), e.g. ("gemm.cuh", "...").
struct EmbeddedHeader {
  const char *name;
  const char *text;
};

struct KernelSource {
  // Every field given: a source without the headers it includes would fail only inside NVRTC.
  KernelSource(std::string name, std::string text, std::string entry, llvm::ArrayRef<EmbeddedHeader> headers)
      : name(std::move(name)), text(std::move(text)), entry(std::move(entry)), headers(headers) {}

  std::string name;   // the spec's name(), for messages and dumps
  std::string text;   // the generated translation unit
  std::string entry;  // the name expression of the __global__ instantiation
  llvm::ArrayRef<EmbeddedHeader> headers; // what `text` may include besides CUDA's headers (static storage)
};

struct CompiledKernel {
  std::string name;
  std::string loweredName; // the mangled entry, for cuModuleGetFunction
  std::vector<char> cubin;
  std::string ptx;
  std::string log; // NVRTC's log (warnings) even on success
};

struct CompileOptions {
  // Where a failing kernel's source is dumped (default: the system temp directory).
  std::string dumpDir;
  bool lineInfo = false;
};

// The NVRTC version as "13.0", part of every cache key.
std::string nvrtcVersion();
// The options NVRTC is given for `target` (arch, -std, -I for CUDA headers, ...): part of the cache key.
llvm::Expected<std::vector<std::string>> nvrtcOptions(const Target &target, const CompileOptions &opts);

llvm::Expected<CompiledKernel> compileKernel(const KernelSource &src, const Target &target,
                                             const CompileOptions &opts = {});

// The directory holding CUDA's headers (cuda_bf16.h): $CUDA_HOME/include, else the toolkit minfer was
// built against, else ../include next to the libnvrtc that was loaded. The error lists every place looked.
llvm::Expected<std::string> cudaIncludeDir();
// The first of `candidates` holding cuda_bf16.h (links resolved); the error lists each one with its `why`.
struct IncludeCandidate {
  std::string dir;
  std::string why; // "$CUDA_HOME/include", "next to /usr/local/cuda/lib64/libnvrtc.so.13", ...
};
llvm::Expected<std::string> findCudaIncludeDir(llvm::ArrayRef<IncludeCandidate> candidates);

// The SM a cubin was built for (90 for sm_90 and sm_90a), read from its ELF header; nullopt when the bytes
// are not a 64-bit CUDA ELF.
std::optional<int> cubinSmVersion(llvm::ArrayRef<char> cubin);
// The registers a thread of the cubin's kernel uses (the most, where it holds several), read from the
// EIATTR_REGCOUNT attributes of its .nv.info section; nullopt when the bytes are not a 64-bit CUDA ELF or
// name no count. What the driver allocates is this rounded up to a multiple of 8 (256 a warp).
std::optional<int> cubinRegisters(llvm::ArrayRef<char> cubin);

// How many times this process has run nvrtcCompileProgram (tests use it to see a cache hit).
uint64_t nvrtcCompileCount();

// fork(), at a moment when no thread of this process is inside NVRTC, so the child never inherits NVRTC's
// internal locks held mid-compile (compileKernel waits while a fork is in progress). Returns fork()'s result;
// the child may call compileKernel freely. For compileAll's worker processes.
pid_t forkOutsideNvrtc();

} // namespace minfer
