// jit/Bundle.cpp — writing and verifying .mfb bundles.
#include "jit/Bundle.h"

#include "jit/AtomicFile.h"
#include "jit/Hash.h"
#include "jit/Nvrtc.h"
#include "jit/Target.h"

#include "llvm/Support/Endian.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <array>

namespace minfer {
namespace {

constexpr char kMagic[8] = {'M', 'I', 'N', 'F', 'E', 'R', 'B', 'D'};
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8; // magic, format version, zero, manifest length
constexpr size_t kSealBytes = 32;               // SHA-256 of the header and manifest
constexpr int kMaxManifestDepth = 128; // a plan nests about 6 levels
// A manifest holds the IR text and the plan: generous, but a corrupt length must not allocate gigabytes.
constexpr uint64_t kMaxManifestBytes = 256ull << 20;

// "bundle 'dir/m.mfb': <msg>": every problem in reading one names the file.
llvm::Error bundleError(llvm::StringRef path, const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), "bundle '" + path + "': " + msg);
}

// A blob's digest, bound to the kernel it belongs to: SHA-256 over the kernel's name, the blob's kind and
// the SHA-256 of its bytes, each length-prefixed so no two different triples hash the same stream. A
// blob moved to another kernel's entry no longer matches.
std::string blobDigest(llvm::StringRef kernelName, llvm::StringRef kind, llvm::StringRef bytes) {
  std::string stream;
  auto put = [&](llvm::StringRef s) {
    char len[8];
    llvm::support::endian::write64le(len, s.size());
    stream.append(len, sizeof len);
    stream += s;
  };
  put("minfer bundle blob");
  put(kernelName);
  put(kind);
  std::array<uint8_t, 32> bytesDigest = sha256(bytes);
  put(llvm::StringRef(reinterpret_cast<const char *>(bytesDigest.data()), bytesDigest.size()));
  return sha256Hex(stream);
}

} // namespace

std::string Bundle::irHash() const { return sha256Hex(irText); }

llvm::Error writeBundle(llvm::StringRef path, const Bundle &b) {
  std::string blobs;
  llvm::json::Array kernels;
  auto blob = [&](const BundleKernel &k, llvm::StringRef kind, llvm::StringRef bytes) {
    llvm::json::Object o{{"offset", static_cast<int64_t>(blobs.size())},
                         {"length", static_cast<int64_t>(bytes.size())},
                         {"digest", blobDigest(k.name, kind, bytes)}};
    blobs.append(bytes.begin(), bytes.end());
    return o;
  };
  for (const BundleKernel &k : b.kernels)
    kernels.push_back(llvm::json::Object{{"name", k.name},
                                         {"lowered_name", k.loweredName},
                                         {"cubin", blob(k, "cubin", llvm::StringRef(k.cubin.data(), k.cubin.size()))},
                                         {"ptx", blob(k, "ptx", k.ptx)}});
  llvm::json::Object manifest{{"format_version", static_cast<int64_t>(kBundleFormatVersion)},
                              {"minfer_version", b.minferVersion},
                              {"target", b.target},
                              {"nvrtc_version", b.nvrtcVersion},
                              {"ir_sha256", b.irHash()},
                              {"ir", b.irText},
                              {"plan", llvm::json::Object(b.plan)},
                              {"kernels", std::move(kernels)},
                              {"blobs_length", static_cast<int64_t>(blobs.size())}};
  std::string manifestText;
  llvm::raw_string_ostream(manifestText) << llvm::json::Value(std::move(manifest));

  return writeAtomically(path, [&](llvm::raw_ostream &os) {
    char header[kHeaderBytes];
    std::copy(std::begin(kMagic), std::end(kMagic), header);
    llvm::support::endian::write32le(header + 8, kBundleFormatVersion);
    llvm::support::endian::write32le(header + 12, 0);
    llvm::support::endian::write64le(header + 16, manifestText.size());
    // The seal: SHA-256 of the header and manifest, so that no byte outside a blob goes unchecked.
    std::string sealed(header, sizeof header);
    sealed += manifestText;
    std::array<uint8_t, 32> seal = sha256(sealed);
    os << sealed;
    os.write(reinterpret_cast<const char *>(seal.data()), seal.size());
    os << blobs;
    return llvm::Error::success();
  });
}

bool isBundleFile(llvm::StringRef path) {
  auto buf = llvm::MemoryBuffer::getFileSlice(path, sizeof kMagic, 0, /*IsVolatile=*/false);
  return buf && (*buf)->getBuffer() == llvm::StringRef(kMagic, sizeof kMagic);
}

llvm::Expected<Bundle> readBundle(llvm::StringRef path) {
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buf) return bundleError(path, "cannot read: " + buf.getError().message());
  llvm::StringRef data = (*buf)->getBuffer();
  if (data.size() < sizeof kMagic + 4 || !data.startswith(llvm::StringRef(kMagic, sizeof kMagic)))
    return bundleError(path, "not a minfer bundle (no MINFERBD magic)");
  // The version first: another format's layout says nothing about this one's.
  uint32_t version = llvm::support::endian::read32le(data.data() + 8);
  if (version != kBundleFormatVersion)
    return bundleError(path, "written by bundle format version " + llvm::Twine(version) +
                                 ", this minfer reads version " + llvm::Twine(kBundleFormatVersion) +
                                 ": rebuild it with `minferc MODEL.ir --target sm_XY -o " + path + "`");
  if (data.size() < kHeaderBytes + kSealBytes)
    return bundleError(path, llvm::Twine(data.size()) + " bytes, shorter than the header: truncated or corrupt");
  if (llvm::support::endian::read32le(data.data() + 12) != 0)
    return bundleError(path, "reserved header word is not zero: corrupt");
  uint64_t manifestLen = llvm::support::endian::read64le(data.data() + 16);
  if (manifestLen > kMaxManifestBytes || manifestLen > data.size() - kHeaderBytes - kSealBytes)
    return bundleError(path, "manifest length " + llvm::Twine(manifestLen) + " runs past the end of the file (" +
                                 llvm::Twine(data.size()) + " bytes): truncated or corrupt");
  // The seal, before anything in the manifest is believed: plan, kernel table and versions are checked as
  // a whole, so an edit that still parses (a digit of the plan, a swapped offset) is caught too.
  llvm::StringRef sealed = data.take_front(kHeaderBytes + manifestLen);
  std::array<uint8_t, 32> seal = sha256(sealed);
  if (data.substr(sealed.size(), kSealBytes) !=
      llvm::StringRef(reinterpret_cast<const char *>(seal.data()), seal.size()))
    return bundleError(path, "the manifest (plan, kernel table, versions) does not match its SHA-256 seal: "
                             "corrupt or edited");
  // A crafted bundle can carry a valid seal: the manifest's nesting is bounded before llvm::json recurses
  // into it (ir/Json.h does the same for the files io/ reads; jit/ may not include it).
  llvm::StringRef manifestText = data.substr(kHeaderBytes, manifestLen);
  int depth = 0;
  bool inString = false;
  for (size_t i = 0; i < manifestText.size(); ++i) {
    char c = manifestText[i];
    if (inString) {
      if (c == '\\') ++i;
      else if (c == '"') inString = false;
    } else if (c == '"') {
      inString = true;
    } else if ((c == '[' || c == '{') && ++depth > kMaxManifestDepth) {
      return bundleError(path, "manifest is nested deeper than " + llvm::Twine(kMaxManifestDepth) + " levels");
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  auto manifest = llvm::json::parse(manifestText);
  if (!manifest) return bundleError(path, "manifest is not valid JSON: " + llvm::toString(manifest.takeError()));
  const llvm::json::Object *m = manifest->getAsObject();
  if (!m) return bundleError(path, "manifest is not a JSON object");
  llvm::StringRef blobs = data.substr(sealed.size() + kSealBytes);

  Bundle b;
  auto str = [&](const char *key, std::string &out) -> llvm::Error {
    auto s = m->getString(key);
    if (!s) return bundleError(path, llvm::Twine("manifest has no string '") + key + "'");
    out = s->str();
    return llvm::Error::success();
  };
  for (auto [key, field] : {std::pair{"ir", &b.irText}, {"target", &b.target}, {"nvrtc_version", &b.nvrtcVersion},
                            {"minfer_version", &b.minferVersion}})
    if (auto e = str(key, *field)) return e;
  if (m->getInteger("format_version") != static_cast<int64_t>(kBundleFormatVersion))
    return bundleError(path, "manifest format_version does not match the header's");
  auto target = parseTarget(b.target);
  if (!target) return bundleError(path, "target: " + llvm::toString(target.takeError()));
  std::string irHash;
  if (auto e = str("ir_sha256", irHash)) return e;
  if (irHash != b.irHash()) return bundleError(path, "the IR text does not match its recorded SHA-256");
  auto blobsLen = m->getInteger("blobs_length");
  if (!blobsLen || static_cast<uint64_t>(*blobsLen) != blobs.size())
    return bundleError(path, "holds " + llvm::Twine(blobs.size()) + " bytes of kernels, the manifest says " +
                                 llvm::Twine(blobsLen ? *blobsLen : -1) + ": truncated or corrupt");
  if (const llvm::json::Object *plan = m->getObject("plan")) b.plan = *plan;
  else return bundleError(path, "manifest has no plan");

  const llvm::json::Array *kernels = m->getArray("kernels");
  if (!kernels) return bundleError(path, "manifest has no kernel list");
  // Blobs lie back to back in manifest order: each must start where the previous one ended, so no byte
  // of the file is outside both the seal and a blob's digest.
  uint64_t next = 0;
  for (const llvm::json::Value &kv : *kernels) {
    const llvm::json::Object *k = kv.getAsObject();
    if (!k || !k->getString("name") || !k->getString("lowered_name"))
      return bundleError(path, "a kernel entry lacks its name or lowered name");
    BundleKernel bk;
    bk.name = k->getString("name")->str();
    bk.loweredName = k->getString("lowered_name")->str();
    auto blob = [&](const char *kind, std::string &out) -> llvm::Error {
      const llvm::json::Object *o = k->getObject(kind);
      auto off = o ? o->getInteger("offset") : llvm::None;
      auto len = o ? o->getInteger("length") : llvm::None;
      auto digest = o ? o->getString("digest") : llvm::None;
      if (!off || !len || !digest || *off < 0 || *len < 0 || static_cast<uint64_t>(*off) > blobs.size() ||
          static_cast<uint64_t>(*len) > blobs.size() - *off)
        return bundleError(path, "kernel " + bk.name + ": " + kind + " lies outside the file");
      if (static_cast<uint64_t>(*off) != next)
        return bundleError(path, "kernel " + bk.name + ": " + kind + " starts at blob offset " + llvm::Twine(*off) +
                                     ", the previous blob ends at " + llvm::Twine(next) + ": corrupt");
      next = *off + *len;
      llvm::StringRef bytes = blobs.substr(*off, *len);
      if (blobDigest(bk.name, kind, bytes) != *digest)
        return bundleError(path, "kernel " + bk.name + ": " + kind +
                                     " checksum mismatch: corrupt, or another kernel's bytes");
      out = bytes.str();
      return llvm::Error::success();
    };
    std::string cubin;
    if (auto e = blob("cubin", cubin)) return e;
    if (auto e = blob("ptx", bk.ptx)) return e;
    bk.cubin.assign(cubin.begin(), cubin.end());
    // The cubin must be for the bundle's target: the driver would load another architecture's and fail
    // later, or not at all.
    std::optional<int> sm = cubinSmVersion(bk.cubin);
    if (!sm || *sm != target->smVersion())
      return bundleError(path, "kernel " + bk.name + ": cubin is not an " + b.target + " binary");
    for (const BundleKernel &other : b.kernels)
      if (other.name == bk.name) return bundleError(path, "kernel " + bk.name + " appears twice");
    b.kernels.push_back(std::move(bk));
  }
  if (next != blobs.size())
    return bundleError(path, llvm::Twine(blobs.size() - next) + " bytes after the last kernel's blobs: corrupt");
  return b;
}

} // namespace minfer
