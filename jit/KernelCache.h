// jit/KernelCache.h — the content-keyed disk cache of compiled kernels.
//
// A kernel's key is the SHA-256 of everything that can change its binary: the generated source, the
// embedded templates it includes, its entry and name, NVRTC's version, the full NVRTC option list, the
// target, and minfer's version — never a file time. An entry is <dir>/kernels/<key>.mkc, published by
// writing a temporary in the same directory, fsync and rename, so a reader sees a whole entry or none.
// Every entry is verified before its bytes are used (magic, format version, key, lengths, SHA-256 of the
// file, the cubin's ELF arch); a bad entry is a miss, removed and rebuilt. Processes compiling the same key
// serialise on flock(<key>.lock): the second waits, then finds the entry; the kernel drops the lock of a
// process that dies, so a crash never hangs the next compile.
//
// Where: $MINFER_CACHE_DIR, else $XDG_CACHE_HOME/minfer, else ~/.cache/minfer. MINFER_NO_CACHE=1 bypasses
// it; MINFER_CACHE_DEBUG=1 prints every key component on a miss. A cache that cannot be written warns once
// per process on stderr and kernels are compiled uncached: a cache problem never fails a compile.
#pragma once

#include "jit/Nvrtc.h"
#include "jit/Target.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace minfer {

// One component of a cache key, for MINFER_CACHE_DEBUG: ("nvrtc", "13.0"), ("source", "sha256 ... 1234 bytes").
struct KeyComponent {
  std::string label;
  std::string shown; // what MINFER_CACHE_DEBUG prints (large texts as their hash and length)
};

struct CacheKey {
  std::string hex; // 64 hex digits of SHA-256
  std::vector<KeyComponent> components;
};

// One entry on disk, as `minferc cache ls` shows it.
struct CacheEntryInfo {
  std::string key;    // from the file name
  std::string kernel; // the kernel's name (empty when the entry is unreadable)
  std::string target; // "sm_90a"
  uint64_t bytes = 0; // size of the entry file
  bool valid = false;
  std::string problem; // why it is not valid
};

// An entry that failed verification, and what removing it did.
struct BadEntry {
  CacheEntryInfo info;
  bool removed = false;
  // Why it is still there after a removal was asked for: "" when removed, or when it was found good again
  // under its lock (a writer replaced it meanwhile).
  std::string notRemoved;
};

struct VerifyReport {
  unsigned valid = 0;
  std::vector<BadEntry> bad;
  unsigned removed = 0;    // of `bad`, the entries removed
  unsigned notRemoved = 0; // of `bad`, those that could not be (each says why)
};

// An exclusive flock on one key's lock file, held until destruction; the kernel drops it if the process dies.
class CacheLock {
public:
  CacheLock(CacheLock &&o) noexcept;
  CacheLock(const CacheLock &) = delete;
  CacheLock &operator=(const CacheLock &) = delete;
  CacheLock &operator=(CacheLock &&) = delete;
  ~CacheLock();

private:
  friend class KernelCache;
  CacheLock() = default;
  int fd_ = -1;
  int slot_ = -1; // index in the table of locks a forked worker must close
};

class KernelCache {
public:
  // The cache at the default location ($MINFER_CACHE_DIR, $XDG_CACHE_HOME/minfer, ~/.cache/minfer). With
  // no location at all (no HOME either) the cache is disabled and kernels are compiled uncached.
  static KernelCache openDefault();
  // The cache rooted at `dir` (entries under <dir>/kernels). Nothing is created until the first store.
  static KernelCache openAt(std::string dir);
  // The default location as above, or "" when none can be formed.
  static std::string defaultDir();

  // The cached kernel for `src`, compiling and storing it on a miss. `hit` says which happened. Errors are
  // compile errors only; a broken cache degrades to compiling uncached.
  llvm::Expected<CompiledKernel> getOrCompile(const KernelSource &src, const Target &target,
                                              const CompileOptions &opts, bool *hit = nullptr);

  // The key of `src` compiled for `target` with `opts` (errors: CUDA headers not found).
  static llvm::Expected<CacheKey> computeKey(const KernelSource &src, const Target &target,
                                             const CompileOptions &opts);
  // The verified entry for `key`, or nullopt (absent or bad; bad entries are left for getOrCompile to
  // replace under the lock, so a reader never removes a good entry a writer has just published).
  std::optional<CompiledKernel> lookup(llvm::StringRef key, const Target &target) const;

  // Every entry (valid or not), sorted by kernel name. An absent cache is an empty list.
  llvm::Expected<std::vector<CacheEntryInfo>> list() const;
  // Checks every entry completely; with `removeBad`, deletes those that fail. Something other than a file
  // where an entry should be (a directory, a FIFO) is a bad entry; a directory is removed with its contents
  // only when named like an entry (<64 hex digits>.mkc), else reported as not removed. Errors: the cache
  // cannot be listed; a bad entry that cannot be removed is in the report, not an error.
  llvm::Expected<VerifyReport> verify(bool removeBad = false) const;
  // Deletes every entry, lock and leftover temporary; directories among them only when named like one of
  // those. The error, when anything is left, names each path left and why.
  llvm::Error clear() const;

  // False when MINFER_NO_CACHE=1, no location exists, or the directory cannot be created or written (that
  // last warns once per process). Probes the directory on the first call.
  bool usable();

  const std::string &dir() const { return dir_; }
  std::string kernelsDir() const;
  std::string entryPath(llvm::StringRef key) const;
  std::string lockPath(llvm::StringRef key) const;

  // Waits for, then holds, the lock of `key` (what getOrCompile holds while it compiles and publishes).
  llvm::Expected<CacheLock> lockKey(llvm::StringRef key) const;
  // In a child just forked: closes the lock descriptors inherited from the parent's threads, which would
  // otherwise keep their flocks held (and deadlock this child on its own inherited lock).
  static void releaseInheritedLocks();

  // The "once per process" warning state, reset by tests that check the warning is printed.
  static void resetWarningForTesting();

private:
  explicit KernelCache(std::string dir) : dir_(std::move(dir)) {}
  // Writes `k` as the entry for `key`: temporary, fsync, rename. Errors only describe what went wrong.
  llvm::Error store(llvm::StringRef key, const Target &target, const CompiledKernel &k) const;

  std::string dir_; // "" = disabled
  // Result of probing the directory: unknown, writable, unwritable. Shared by copies of one cache.
  std::shared_ptr<std::atomic<int>> probe_ = std::make_shared<std::atomic<int>>(0);
};

} // namespace minfer
