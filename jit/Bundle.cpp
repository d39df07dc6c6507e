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

namespace minfer {
namespace {

constexpr char kMagic[8] = {'M', 'I', 'N', 'F', 'E', 'R', 'B', 'D'};
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8;
// A manifest holds the IR text and the plan: generous, but a corrupt length must not allocate gigabytes.
constexpr uint64_t kMaxManifestBytes = 256ull << 20;

// "bundle 'dir/m.mfb': <msg>": every problem in reading one names the file.
llvm::Error bundleError(llvm::StringRef path, const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), "bundle '" + path + "': " + msg);
}

} // namespace

std::string Bundle::irHash() const { return sha256Hex(irText); }

llvm::Error writeBundle(llvm::StringRef path, const Bundle &b) {
  std::string blobs;
  llvm::json::Array kernels;
  auto blob = [&](llvm::StringRef bytes) {
    llvm::json::Object o{{"offset", static_cast<int64_t>(blobs.size())},
                         {"length", static_cast<int64_t>(bytes.size())},
                         {"sha256", sha256Hex(bytes)}};
    blobs.append(bytes.begin(), bytes.end());
    return o;
  };
  for (const BundleKernel &k : b.kernels)
    kernels.push_back(llvm::json::Object{{"name", k.name},
                                         {"lowered_name", k.loweredName},
                                         {"cubin", blob(llvm::StringRef(k.cubin.data(), k.cubin.size()))},
                                         {"ptx", blob(k.ptx)}});
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
    os.write(header, sizeof header);
    os << manifestText << blobs;
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
  if (data.size() < kHeaderBytes || !data.startswith(llvm::StringRef(kMagic, sizeof kMagic)))
    return bundleError(path, "not a minfer bundle (no MINFERBD magic)");
  uint32_t version = llvm::support::endian::read32le(data.data() + 8);
  if (version != kBundleFormatVersion)
    return bundleError(path, "format version " + llvm::Twine(version) + ", this minfer reads version " +
                                 llvm::Twine(kBundleFormatVersion));
  if (llvm::support::endian::read32le(data.data() + 12) != 0)
    return bundleError(path, "reserved header word is not zero: corrupt");
  uint64_t manifestLen = llvm::support::endian::read64le(data.data() + 16);
  if (manifestLen > kMaxManifestBytes || manifestLen > data.size() - kHeaderBytes)
    return bundleError(path, "manifest length " + llvm::Twine(manifestLen) + " runs past the end of the file (" +
                                 llvm::Twine(data.size()) + " bytes): truncated or corrupt");
  auto manifest = llvm::json::parse(data.substr(kHeaderBytes, manifestLen));
  if (!manifest) return bundleError(path, "manifest is not valid JSON: " + llvm::toString(manifest.takeError()));
  const llvm::json::Object *m = manifest->getAsObject();
  if (!m) return bundleError(path, "manifest is not a JSON object");
  llvm::StringRef blobs = data.substr(kHeaderBytes + manifestLen);

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
  for (const llvm::json::Value &kv : *kernels) {
    const llvm::json::Object *k = kv.getAsObject();
    if (!k || !k->getString("name") || !k->getString("lowered_name"))
      return bundleError(path, "a kernel entry lacks its name or lowered name");
    BundleKernel bk;
    bk.name = k->getString("name")->str();
    bk.loweredName = k->getString("lowered_name")->str();
    auto blob = [&](const char *which, std::string &out) -> llvm::Error {
      const llvm::json::Object *o = k->getObject(which);
      auto off = o ? o->getInteger("offset") : llvm::None;
      auto len = o ? o->getInteger("length") : llvm::None;
      auto sha = o ? o->getString("sha256") : llvm::None;
      if (!off || !len || !sha || *off < 0 || *len < 0 || static_cast<uint64_t>(*off) > blobs.size() ||
          static_cast<uint64_t>(*len) > blobs.size() - *off)
        return bundleError(path, "kernel " + bk.name + ": " + which + " lies outside the file");
      llvm::StringRef bytes = blobs.substr(*off, *len);
      if (sha256Hex(bytes) != *sha)
        return bundleError(path, "kernel " + bk.name + ": " + which + " checksum mismatch (corrupt)");
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
  return b;
}

} // namespace minfer
