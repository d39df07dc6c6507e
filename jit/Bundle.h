// jit/Bundle.h — a compiled model in one file (`minferc model.ir --target sm_89 -o model.mfb`).
//
// A bundle carries everything the runtime needs without a compiler: the module's IR text, the plan, and
// every kernel's cubin and PTX, with a manifest naming the IR's hash, the target, the NVRTC and minfer
// versions. Layout: the 8-byte magic "MINFERBD", a little-endian u32 format version, a u32 of zero, a u64
// manifest length, the manifest (JSON), then the kernel bytes. Every blob's offset, length and SHA-256
// are in the manifest and are checked on read, before any byte could reach cuModuleLoadData.
#pragma once

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <string>
#include <vector>

namespace minfer {

struct BundleKernel {
  std::string name;        // the spec's name()
  std::string loweredName; // for cuModuleGetFunction
  std::vector<char> cubin;
  std::string ptx;
};

struct Bundle {
  std::string irText; // canonical IR of the module
  std::string target; // "sm_89"
  std::string nvrtcVersion, minferVersion;
  llvm::json::Object plan;
  std::vector<BundleKernel> kernels;

  std::string irHash() const; // SHA-256 of irText, hex
};

constexpr uint32_t kBundleFormatVersion = 1;

// Writes atomically (jit/AtomicFile.h): a failure leaves nothing behind.
llvm::Error writeBundle(llvm::StringRef path, const Bundle &);
// Reads and verifies a bundle; every problem is an error naming the file and what is wrong.
llvm::Expected<Bundle> readBundle(llvm::StringRef path);
// True when `path` starts with the bundle magic (cheap: reads 8 bytes; verifies nothing else).
bool isBundleFile(llvm::StringRef path);

} // namespace minfer
