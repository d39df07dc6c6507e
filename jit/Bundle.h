// jit/Bundle.h — a compiled model in one file (`minferc model.ir --target sm_89 -o model.mfb`).
//
// A bundle carries everything the runtime needs without a compiler: the module's IR text, the plan, and
// every kernel's cubin and PTX, with a manifest naming the IR's hash, the target, the NVRTC and minfer
// versions. Layout (format 2, little-endian):
//
//   "MINFERBD" | u32 format version | u32 zero | u64 manifest length      the 24-byte header
//   | manifest (JSON)                                                      plan, kernel table, versions, IR
//   | SHA-256 of every byte before it: 32 bytes                            seals header + manifest
//   | kernel blobs, back to back in the manifest's order                  nothing follows the last one
//
// Every byte is covered by a checksum and checked on read, before any byte could reach cuModuleLoadData:
// the header and manifest by the seal, each blob by its entry's "digest". That digest is bound to its
// kernel — SHA-256 over the kernel's name, the blob's kind ("cubin" or "ptx") and the SHA-256 of its bytes
// — so two kernels' cubins swapped, or one kernel's entry copied over another's (from this bundle or
// another), are refused even where the manifest was resealed. Format 1 (no seal, unbound per-blob SHA-256)
// is refused as written by another format version.
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

// 2: the manifest is sealed and each blob's digest is bound to its kernel. Older bundles are refused.
constexpr uint32_t kBundleFormatVersion = 2;

// Writes atomically (jit/AtomicFile.h): a failure leaves nothing behind.
llvm::Error writeBundle(llvm::StringRef path, const Bundle &);
// Reads and verifies a bundle; every problem is an error naming the file and what is wrong.
llvm::Expected<Bundle> readBundle(llvm::StringRef path);
// True when `path` starts with the bundle magic (cheap: reads 8 bytes; verifies nothing else).
bool isBundleFile(llvm::StringRef path);

} // namespace minfer
