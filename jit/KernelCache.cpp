// jit/KernelCache.cpp — the content-keyed disk cache (see KernelCache.h for the contract).
//
// Entry file, little-endian, format 1:
//   "MINFERKC" | u32 format | key: 32 bytes | target, name, loweredName, log: u32 length + bytes each
//   | u64 cubin length + cubin | u64 PTX length + PTX | SHA-256 of every byte before it: 32 bytes
// An entry is believed only when every field parses inside the file, the digest matches, the key is the
// one asked for, and the cubin is an ELF for the target's SM.
#include "jit/KernelCache.h"

#include "jit/AtomicFile.h"
#include "jit/Hash.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#ifndef MINFER_VERSION
#define MINFER_VERSION "unknown"
#endif

namespace minfer {
namespace {

constexpr char kMagic[8] = {'M', 'I', 'N', 'F', 'E', 'R', 'K', 'C'};
constexpr uint32_t kFormatVersion = 1; // bump when the entry layout changes: old entries become misses
constexpr size_t kDigestBytes = 32;     // SHA-256
constexpr llvm::StringLiteral kEntrySuffix = ".mkc";
constexpr llvm::StringLiteral kLockSuffix = ".lock";

std::atomic<bool> warned{false};

bool envFlag(const char *name) {
  auto v = llvm::sys::Process::GetEnv(name);
  return v && !v->empty() && *v != "0";
}

void warnOnce(const llvm::Twine &what) {
  if (warned.exchange(true)) return;
  llvm::errs() << "minfer: warning: " << what << "; compiling kernels without the disk cache\n";
}

// SHA-256 of a source's in-memory headers (the kernel templates): a template edit changes every key even
// when minfer's version does not. Memoised by the array's address: the headers are static data.
const std::string &headersDigest(llvm::ArrayRef<EmbeddedHeader> headers) {
  static std::mutex mu;
  static std::map<const EmbeddedHeader *, std::string> digests;
  std::lock_guard<std::mutex> lock(mu);
  std::string &digest = digests[headers.data()];
  if (digest.empty()) {
    std::string all;
    for (const EmbeddedHeader &t : headers) {
      all.append(t.name, std::strlen(t.name) + 1); // with its NUL: a separator
      all.append(t.text, std::strlen(t.text) + 1);
    }
    digest = sha256Hex(all);
  }
  return digest;
}

void putU32(std::string &out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out += char((v >> (8 * i)) & 0xff);
}
void putU64(std::string &out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out += char((v >> (8 * i)) & 0xff);
}
void putString(std::string &out, llvm::StringRef s) {
  putU32(out, uint32_t(s.size()));
  out += s;
}

// Bounds-checked reading of an entry; every read past the end sets `truncated`.
struct Reader {
  llvm::StringRef data;
  size_t pos = 0;
  bool truncated = false;

  llvm::StringRef bytes(uint64_t n) {
    if (truncated || n > data.size() - pos) {
      truncated = true;
      return {};
    }
    llvm::StringRef s = data.substr(pos, n);
    pos += n;
    return s;
  }
  uint64_t number(unsigned width) {
    llvm::StringRef b = bytes(width);
    uint64_t v = 0;
    for (unsigned i = 0; i < b.size(); ++i) v |= uint64_t(uint8_t(b[i])) << (8 * i);
    return v;
  }
  llvm::StringRef string() { return bytes(number(4)); }
};

struct ParsedEntry {
  std::string keyHex;
  std::string target;
  CompiledKernel kernel;
};

llvm::Error bad(const llvm::Twine &why) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), why.str());
}

// Parses and verifies one entry file's bytes. `wantKey` is the key the caller expects (the requested one,
// or the file's own name); `wantTarget`, when given, is the target it must have been built for.
llvm::Expected<ParsedEntry> parseEntry(llvm::StringRef data, llvm::StringRef wantKey, const Target *wantTarget) {
  Reader r{data};
  if (r.bytes(sizeof(kMagic)) != llvm::StringRef(kMagic, sizeof(kMagic)) || r.truncated)
    return bad("not a minfer cache entry (bad magic)");
  uint64_t version = r.number(4);
  if (r.truncated) return bad("truncated");
  if (version != kFormatVersion) return bad("entry format " + llvm::Twine(version) + ", expected " +
                                            llvm::Twine(kFormatVersion));
  ParsedEntry e;
  e.keyHex = llvm::toHex(r.bytes(kDigestBytes), true);
  e.target = r.string().str();
  e.kernel.name = r.string().str();
  e.kernel.loweredName = r.string().str();
  e.kernel.log = r.string().str();
  llvm::StringRef cubin = r.bytes(r.number(8));
  e.kernel.ptx = r.bytes(r.number(8)).str();
  size_t bodyEnd = r.pos;
  llvm::StringRef digest = r.bytes(kDigestBytes);
  if (r.truncated) return bad("truncated (a length runs past the end of the file)");
  if (r.pos != data.size()) return bad(llvm::Twine(data.size() - r.pos) + " stray bytes after the entry");
  if (llvm::toStringRef(sha256(data.take_front(bodyEnd))) != digest) return bad("checksum mismatch (corrupted)");
  if (e.keyHex != wantKey) return bad("holds key " + e.keyHex + ", expected " + wantKey);
  e.kernel.cubin.assign(cubin.begin(), cubin.end());

  // The target it claims must parse, match the one asked for, and agree with the cubin's own ELF header.
  llvm::Expected<Target> claimed = parseTarget(e.target);
  if (!claimed) {
    llvm::consumeError(claimed.takeError());
    return bad("unknown target '" + e.target + "'");
  }
  if (wantTarget && wantTarget->name != e.target)
    return bad("built for " + e.target + ", expected " + wantTarget->name);
  std::optional<int> sm = cubinSmVersion(e.kernel.cubin);
  if (!sm) return bad("the cubin is not a CUDA ELF");
  if (*sm != claimed->smVersion())
    return bad("the cubin is for sm_" + llvm::Twine(*sm) + ", the entry says " + e.target);
  return e;
}

// What a path that is not a regular file is, for messages.
const char *kindOf(llvm::sys::fs::file_type t) {
  using llvm::sys::fs::file_type;
  switch (t) {
  case file_type::directory_file: return "a directory";
  case file_type::symlink_file: return "a symbolic link";
  case file_type::fifo_file: return "a FIFO";
  case file_type::socket_file: return "a socket";
  case file_type::block_file:
  case file_type::character_file: return "a device";
  default: return "not a regular file";
  }
}

// An entry file's bytes. The problem otherwise is the whole message: "unreadable: <why>", or "a directory
// where an entry file should be" (checked first: reading a FIFO would block, a directory fails obscurely).
llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> readEntryFile(const llvm::Twine &path) {
  llvm::sys::fs::file_status st;
  if (std::error_code ec = llvm::sys::fs::status(path, st)) return bad("unreadable: " + ec.message());
  if (st.type() != llvm::sys::fs::file_type::regular_file)
    return bad(llvm::Twine(kindOf(st.type())) + " where an entry file should be");
  // IsVolatile: read, never mmap, so a file changed under us cannot fault (SIGBUS) mid-verification.
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buf =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false, /*IsVolatile=*/true);
  if (!buf) return bad("unreadable: " + buf.getError().message());
  return std::move(*buf);
}

bool isKeyHex(llvm::StringRef s) {
  return s.size() == 2 * kDigestBytes &&
         llvm::all_of(s, [](char c) { return llvm::isDigit(c) || (c >= 'a' && c <= 'f'); });
}

// Names the cache itself makes in its kernels directory: <key>.mkc, <key>.lock, jit/AtomicFile's
// temporaries "<key>.mkc.tmp-XXXXXXXX", and usable()'s probes "probe-XXXXXXXX.tmp".
bool isCacheName(llvm::StringRef file) {
  if (size_t tmp = file.find(".tmp-"); tmp != llvm::StringRef::npos) file = file.take_front(tmp);
  if (file.consume_back(kEntrySuffix) || file.consume_back(kLockSuffix)) return isKeyHex(file);
  return file.startswith("probe-") && file.endswith(".tmp");
}

// Removes one path of the kernels directory, not following links: a directory with everything in it, but
// only when named like something the cache makes (a directory of another name is not the cache's to
// delete); anything else as it is. Returns "" when the path is gone, else why it is not.
std::string removeCachePath(llvm::StringRef path) {
  namespace fs = llvm::sys::fs;
  fs::file_status st;
  if (std::error_code ec = fs::status(path, st, /*Follow=*/false))
    return ec == std::errc::no_such_file_or_directory ? "" : ec.message();
  if (st.type() == fs::file_type::directory_file) {
    if (!isCacheName(llvm::sys::path::filename(path)))
      return "a directory not named like a cache entry, lock or temporary: remove it by hand";
    if (std::error_code ec = fs::remove_directories(path, /*IgnoreErrors=*/false))
      return "a directory, cannot remove it: " + ec.message();
    return "";
  }
  // unlink(2), not fs::remove: LLVM's refuses anything but files, directories and links (a FIFO, a socket).
  std::string p = path.str();
  if (::unlink(p.c_str()) != 0 && errno != ENOENT) return std::strerror(errno);
  return "";
}

// The descriptors of every CacheLock open in this process, stored as fd + 1 (0 = free slot). A worker
// forked while another thread holds a lock inherits that descriptor, and with it the flock (flock belongs to
// the open file, which both processes now share): were the worker to lock the same key it would wait on
// itself forever. So a worker closes what it inherited (releaseInheritedLocks) before anything else. Slots
// are lock-free because fork may happen while another thread is mid-update.
constexpr int kLockSlots = 256; // far more cache locks than threads will ever hold at once
std::atomic<int> lockSlots[kLockSlots];

int trackLock(int fd) {
  for (int i = 0; i < kLockSlots; ++i) {
    int freeSlot = 0;
    if (lockSlots[i].compare_exchange_strong(freeSlot, fd + 1)) return i;
  }
  return -1; // untracked: only a concurrent fork could then inherit it
}

llvm::Error writeAll(int fd, llvm::StringRef data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return llvm::errorCodeToError(std::error_code(n < 0 ? errno : EIO, std::generic_category()));
    data = data.drop_front(size_t(n));
  }
  return llvm::Error::success();
}

} // namespace

void KernelCache::resetWarningForTesting() { warned = false; }

CacheLock::CacheLock(CacheLock &&o) noexcept : fd_(std::exchange(o.fd_, -1)), slot_(std::exchange(o.slot_, -1)) {}

CacheLock::~CacheLock() {
  if (fd_ < 0) return;
  if (slot_ >= 0) lockSlots[slot_].store(0); // untrack first: a tracked descriptor is always a live lock
  // Unlock explicitly: close() drops the flock only with the last descriptor of the open file, and a
  // child forked meanwhile may hold a duplicate.
  ::flock(fd_, LOCK_UN);
  ::close(fd_);
}

llvm::Expected<CacheLock> KernelCache::lockKey(llvm::StringRef key) const {
  std::string path = lockPath(key);
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0)
    return llvm::createStringError(std::error_code(errno, std::generic_category()), "cannot open %s: %s",
                                   path.c_str(), std::strerror(errno));
  CacheLock lock;
  lock.fd_ = fd;
  lock.slot_ = trackLock(fd);
  while (::flock(fd, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    return llvm::createStringError(std::error_code(errno, std::generic_category()), "cannot lock %s: %s",
                                   path.c_str(), std::strerror(errno));
  }
  return lock;
}

void KernelCache::releaseInheritedLocks() {
  for (std::atomic<int> &slot : lockSlots)
    if (int v = slot.exchange(0)) ::close(v - 1);
}

std::string KernelCache::defaultDir() {
  if (auto d = llvm::sys::Process::GetEnv("MINFER_CACHE_DIR"); d && !d->empty()) return *d;
  llvm::SmallString<256> p;
  if (auto x = llvm::sys::Process::GetEnv("XDG_CACHE_HOME"); x && !x->empty()) {
    p = *x;
  } else {
    if (!llvm::sys::path::home_directory(p)) return "";
    llvm::sys::path::append(p, ".cache");
  }
  llvm::sys::path::append(p, "minfer");
  return std::string(p);
}

KernelCache KernelCache::openDefault() {
  return KernelCache(defaultDir()); // "" (no location at all): uncached, warned about on first use
}

KernelCache KernelCache::openAt(std::string dir) { return KernelCache(std::move(dir)); }

std::string KernelCache::kernelsDir() const {
  llvm::SmallString<256> p(dir_);
  llvm::sys::path::append(p, "kernels");
  return std::string(p);
}
std::string KernelCache::entryPath(llvm::StringRef key) const {
  llvm::SmallString<256> p(kernelsDir());
  llvm::sys::path::append(p, key + kEntrySuffix);
  return std::string(p);
}
std::string KernelCache::lockPath(llvm::StringRef key) const {
  llvm::SmallString<256> p(kernelsDir());
  llvm::sys::path::append(p, key + kLockSuffix);
  return std::string(p);
}

bool KernelCache::usable() {
  if (envFlag("MINFER_NO_CACHE")) return false;
  if (*probe_ == 0) {
    std::string why;
    if (dir_.empty()) {
      why = "no cache directory (set MINFER_CACHE_DIR, XDG_CACHE_HOME or HOME)";
    } else if (std::error_code ec = llvm::sys::fs::create_directories(kernelsDir())) {
      why = "cannot create " + kernelsDir() + ": " + ec.message();
    } else {
      // A real write, not access(2): root passes permission checks that a read-only mount still refuses.
      llvm::SmallString<256> probe;
      int fd = -1;
      if (std::error_code ec = llvm::sys::fs::createUniqueFile(kernelsDir() + "/probe-%%%%%%%%.tmp", fd, probe)) {
        why = "cannot write in " + kernelsDir() + ": " + ec.message();
      } else {
        llvm::Error w = writeAll(fd, "probe");
        ::close(fd);
        llvm::sys::fs::remove(probe);
        if (w) why = "cannot write in " + kernelsDir() + ": " + llvm::toString(std::move(w));
      }
    }
    *probe_ = why.empty() ? 1 : 2;
    if (!why.empty()) warnOnce("kernel cache unusable: " + why);
  }
  return *probe_ == 1;
}

llvm::Expected<CacheKey> KernelCache::computeKey(const KernelSource &src, const Target &target,
                                                 const CompileOptions &opts) {
  llvm::Expected<std::vector<std::string>> options = nvrtcOptions(target, opts);
  if (!options) return options.takeError();
  std::string joined;
  for (const std::string &o : *options) joined += o + '\0'; // NUL-separated: "-a b" differs from "-a", "b"
  std::string sourceHash = sha256Hex(src.text);
  // (label, hashed value, shown value). Each is hashed with its label and length, so no two different
  // component lists can produce the same byte stream.
  const std::tuple<llvm::StringRef, std::string, std::string> parts[] = {
      {"key-format", "1", "1"},
      {"minfer", MINFER_VERSION, MINFER_VERSION},
      {"nvrtc", nvrtcVersion(), nvrtcVersion()},
      {"target", target.name, target.name},
      {"options", joined, llvm::join(*options, " ")},
      {"templates", headersDigest(src.headers),
       "sha256:" + headersDigest(src.headers) + " (" + std::to_string(src.headers.size()) + " headers)"},
      {"name", src.name, src.name},
      {"entry", src.entry, src.entry},
      {"source", src.text, "sha256:" + sourceHash + " (" + std::to_string(src.text.size()) + " bytes)"},
  };
  std::string stream; // what is hashed: per component its label and length, then its value
  CacheKey key;
  for (const auto &[label, value, shown] : parts) {
    putString(stream, label);
    putU64(stream, value.size());
    stream += value;
    key.components.push_back({label.str(), shown});
  }
  key.hex = sha256Hex(stream);
  return key;
}

std::optional<CompiledKernel> KernelCache::lookup(llvm::StringRef key, const Target &target) const {
  if (dir_.empty()) return std::nullopt;
  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> buf = readEntryFile(entryPath(key));
  if (!buf) {
    llvm::consumeError(buf.takeError());
    return std::nullopt;
  }
  llvm::Expected<ParsedEntry> e = parseEntry((*buf)->getBuffer(), key, &target);
  if (!e) {
    llvm::consumeError(e.takeError());
    return std::nullopt;
  }
  return std::move(e->kernel);
}

llvm::Error KernelCache::store(llvm::StringRef key, const Target &target, const CompiledKernel &k) const {
  std::string data(kMagic, sizeof(kMagic));
  putU32(data, kFormatVersion);
  std::string rawKey = llvm::fromHex(key);
  data += rawKey;
  putString(data, target.name);
  putString(data, k.name);
  putString(data, k.loweredName);
  putString(data, k.log);
  putU64(data, k.cubin.size());
  data.append(k.cubin.begin(), k.cubin.end());
  putU64(data, k.ptx.size());
  data += k.ptx;
  data += llvm::toStringRef(sha256(data));

  return writeAtomically(entryPath(key), data, Durability::Machine);
}

llvm::Expected<CompiledKernel> KernelCache::getOrCompile(const KernelSource &src, const Target &target,
                                                         const CompileOptions &opts, bool *hit) {
  if (hit) *hit = false;
  if (!usable()) return compileKernel(src, target, opts);
  llvm::Expected<CacheKey> key = computeKey(src, target, opts);
  if (!key) return key.takeError();
  if (std::optional<CompiledKernel> k = lookup(key->hex, target)) {
    if (hit) *hit = true;
    return std::move(*k);
  }

  // Miss: one process per key compiles; the others wait here and then find its entry. The directory is
  // made again in case `minferc cache clear` or a user removed it since the probe.
  llvm::sys::fs::create_directories(kernelsDir());
  llvm::Expected<CacheLock> lock = lockKey(key->hex);
  if (!lock) {
    warnOnce(llvm::toString(lock.takeError()));
    return compileKernel(src, target, opts);
  }
  if (std::optional<CompiledKernel> k = lookup(key->hex, target)) {
    if (hit) *hit = true;
    return std::move(*k);
  }
  // Still absent or bad under the lock: a bad entry is removed here (a directory in its place too), then
  // rebuilt. Should the removal fail, the store below fails and warns.
  removeCachePath(entryPath(key->hex));

  if (envFlag("MINFER_CACHE_DEBUG")) {
    llvm::errs() << "minfer: kernel cache miss for '" << src.name << "' (" << target.name << "): key " << key->hex
                 << "\n";
    for (const KeyComponent &c : key->components) llvm::errs() << "  " << c.label << ": " << c.shown << "\n";
  }
  llvm::Expected<CompiledKernel> k = compileKernel(src, target, opts);
  if (!k) return k.takeError();
  if (llvm::Error e = store(key->hex, target, *k)) warnOnce(llvm::toString(std::move(e)));
  return k;
}

llvm::Expected<std::vector<CacheEntryInfo>> KernelCache::list() const {
  std::vector<CacheEntryInfo> out;
  if (dir_.empty() || !llvm::sys::fs::is_directory(kernelsDir())) return out;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(kernelsDir(), ec), end; it != end && !ec; it.increment(ec)) {
    llvm::StringRef file = llvm::sys::path::filename(it->path());
    if (!file.endswith(kEntrySuffix)) continue; // locks, temporaries
    CacheEntryInfo info;
    info.key = file.drop_back(kEntrySuffix.size()).str();
    llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> buf = readEntryFile(it->path());
    if (buf) info.bytes = (*buf)->getBufferSize();
    if (!buf) {
      info.problem = llvm::toString(buf.takeError());
    } else if (llvm::Expected<ParsedEntry> e = parseEntry((*buf)->getBuffer(), info.key, nullptr)) {
      info.kernel = e->kernel.name;
      info.target = e->target;
      info.valid = true;
    } else {
      info.problem = llvm::toString(e.takeError());
    }
    out.push_back(std::move(info));
  }
  if (ec) return llvm::createStringError(ec, "cannot list %s: %s", kernelsDir().c_str(), ec.message().c_str());
  llvm::sort(out, [](const CacheEntryInfo &a, const CacheEntryInfo &b) {
    return std::tie(a.kernel, a.target, a.key) < std::tie(b.kernel, b.target, b.key);
  });
  return out;
}

llvm::Expected<VerifyReport> KernelCache::verify(bool removeBad) const {
  llvm::Expected<std::vector<CacheEntryInfo>> entries = list();
  if (!entries) return entries.takeError();
  VerifyReport report;
  for (CacheEntryInfo &info : *entries) {
    if (info.valid) {
      ++report.valid;
      continue;
    }
    BadEntry bad;
    bad.info = std::move(info);
    if (removeBad) {
      // Under the key's lock, and only if still bad: a writer may have just replaced it with a good one.
      if (llvm::Expected<CacheLock> lock = lockKey(bad.info.key)) {
        llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> buf = readEntryFile(entryPath(bad.info.key));
        bool stillBad = true;
        if (buf) {
          if (llvm::Expected<ParsedEntry> e = parseEntry((*buf)->getBuffer(), bad.info.key, nullptr)) stillBad = false;
          else llvm::consumeError(e.takeError());
        } else {
          llvm::consumeError(buf.takeError());
        }
        if (stillBad) {
          bad.notRemoved = removeCachePath(entryPath(bad.info.key));
          bad.removed = bad.notRemoved.empty();
        }
      } else {
        bad.notRemoved = "cannot take its lock: " + llvm::toString(lock.takeError());
      }
    }
    report.removed += bad.removed;
    report.notRemoved += !bad.notRemoved.empty();
    report.bad.push_back(std::move(bad));
  }
  return report;
}

llvm::Error KernelCache::clear() const {
  if (dir_.empty() || !llvm::sys::fs::is_directory(kernelsDir())) return llvm::Error::success();
  std::error_code ec;
  std::vector<std::string> paths;
  for (llvm::sys::fs::directory_iterator it(kernelsDir(), ec), end; it != end && !ec; it.increment(ec))
    paths.push_back(it->path());
  if (ec) return llvm::createStringError(ec, "cannot list %s: %s", kernelsDir().c_str(), ec.message().c_str());
  // Everything is tried, and everything left is named: one stubborn path does not hide the others.
  std::vector<std::string> left;
  for (const std::string &p : paths)
    if (std::string why = removeCachePath(p); !why.empty()) left.push_back(p + ": " + why);
  if (left.empty()) return llvm::Error::success();
  return bad("cannot clear " + kernelsDir() + ": removed " + llvm::Twine(paths.size() - left.size()) + " of " +
             llvm::Twine(paths.size()) + ", left " + llvm::join(left, "; "));
}

} // namespace minfer
