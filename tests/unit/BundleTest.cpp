// tests/unit/BundleTest.cpp — bundles round-trip, and every kind of damage is caught on read.
//
// Damage is made on the file's bytes: every bit of the header and manifest flipped in turn, a sample of
// blob bytes, every truncation on a stride; and forged layouts (cubins swapped between kernels, one kernel's
// cubin copied over another's) rebuilt with a fresh seal, as a careless tool would write them.
#include "jit/Bundle.h"
#include "jit/Hash.h"
#include "common/TestFiles.h"

#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <fstream>

using namespace minfer;

namespace {

class BundleFile : public ::testing::Test {
protected:
  void SetUp() override {
    b.irText = "model \"m\"\n";
    b.target = "sm_89";
    b.nvrtcVersion = "13.0";
    b.minferVersion = "0.1.0";
    b.plan = llvm::json::Object{{"decode", llvm::json::Object{{"launches", 3}}}};
    // Real sm_89 cubins: the reader checks each one's architecture against the target.
    for (int f : {2, 3}) {
      auto k = compileKernel(test::scaleKernel("k" + std::to_string(f), f), test::target("sm_89"));
      ASSERT_TRUE(bool(k)) << llvm::toString(k.takeError());
      b.kernels.push_back({k->name, k->loweredName, k->cubin, k->ptx});
    }
  }
  std::string bytes() { return test::readFile(path); }
  void rewrite(const std::string &data) { test::writeFile(path, data); }
  std::string readError() {
    auto r = readBundle(path);
    return r ? "no error" : llvm::toString(r.takeError());
  }

  // The written bundle's parts (layout in jit/Bundle.h): the 24-byte header, the manifest, its 32-byte
  // seal, the blobs.
  static constexpr size_t kHeader = 24, kSeal = 32;
  struct Parts {
    llvm::json::Object manifest;
    std::string blobs;
    size_t sealedEnd = 0; // header + manifest + seal: the region no blob digest covers
  };
  Parts parts(const std::string &data) {
    uint64_t len = llvm::support::endian::read64le(data.data() + 16);
    auto m = llvm::json::parse(data.substr(kHeader, len));
    EXPECT_TRUE(bool(m)) << llvm::toString(m.takeError());
    return {std::move(*m->getAsObject()), data.substr(kHeader + len + kSeal), kHeader + len + kSeal};
  }
  // The file for `manifest` and `blobs`, with the header of the written one and a fresh seal.
  std::string assemble(const std::string &written, const llvm::json::Object &manifest, const std::string &blobs) {
    std::string text;
    llvm::raw_string_ostream(text) << llvm::json::Value(llvm::json::Object(manifest));
    std::string out = written.substr(0, kHeader);
    llvm::support::endian::write64le(out.data() + 16, text.size());
    out += text;
    std::array<uint8_t, 32> seal = sha256(out);
    out.append(reinterpret_cast<const char *>(seal.data()), seal.size());
    return out + blobs;
  }
  // One blob's descriptor in the manifest: kernel `k`'s "cubin" or "ptx".
  static llvm::json::Object &blobOf(llvm::json::Object &m, size_t k, const char *kind) {
    return *(*m.getArray("kernels"))[k].getAsObject()->getObject(kind);
  }
  static std::string slice(const std::string &blobs, llvm::json::Object &d) {
    return blobs.substr(*d.getInteger("offset"), *d.getInteger("length"));
  }

  test::TempDir tmp{"minfer-bundle"};
  const std::string dir = tmp.path(), path = tmp.file("m.mfb");
  Bundle b;
};

TEST_F(BundleFile, RoundTrips) {
  ASSERT_FALSE(bool(writeBundle(path, b)));
  auto r = readBundle(path);
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  EXPECT_EQ(r->irText, b.irText);
  EXPECT_EQ(r->target, "sm_89");
  EXPECT_EQ(r->irHash(), b.irHash());
  ASSERT_EQ(r->kernels.size(), 2u);
  EXPECT_EQ(r->kernels[0].cubin, b.kernels[0].cubin);
  EXPECT_EQ(r->kernels[0].ptx, b.kernels[0].ptx);
  EXPECT_EQ(r->kernels[1].loweredName, b.kernels[1].loweredName);
  EXPECT_EQ(*r->plan.getObject("decode")->getInteger("launches"), 3);
}

TEST_F(BundleFile, TruncationIsCaught) {
  ASSERT_FALSE(bool(writeBundle(path, b)));
  std::string data = bytes();
  rewrite(data.substr(0, data.size() - 3));
  EXPECT_NE(readError().find("truncated or corrupt"), std::string::npos) << readError();
  rewrite(data.substr(0, 6));
  EXPECT_NE(readError().find("not a minfer bundle"), std::string::npos) << readError();
  rewrite(data.substr(0, 40));
  EXPECT_NE(readError().find("shorter than the header"), std::string::npos) << readError();
  rewrite(data.substr(0, 100));
  EXPECT_NE(readError().find("runs past the end of the file"), std::string::npos) << readError();
  // Every length on a stride through the file, and every one of the last 64 bytes: all refused.
  for (size_t n = 0; n < data.size(); n += (n + 64 >= data.size() ? 1 : 37)) {
    rewrite(data.substr(0, n));
    EXPECT_FALSE(bool(readBundle(path))) << "truncated to " << n << " of " << data.size() << " bytes";
  }
}

TEST_F(BundleFile, EveryByteFlipOfHeaderAndManifestIsRefused) {
  ASSERT_FALSE(bool(writeBundle(path, b)));
  const std::string data = bytes();
  const size_t region = parts(data).sealedEnd;
  // Every byte of the header, manifest and seal, one bit each, the bit turning with the byte (all eight
  // bits of every byte would be 8x the reads for no other path through the reader).
  size_t refused = 0;
  for (size_t i = 0; i < region; ++i) {
    std::string flipped = data;
    flipped[i] ^= char(1 << (i % 8));
    rewrite(flipped);
    auto r = readBundle(path);
    if (r) {
      ADD_FAILURE() << "flipping bit " << i % 8 << " of byte " << i << " of " << region << " was not caught";
      continue;
    }
    std::string err = llvm::toString(r.takeError());
    EXPECT_EQ(err.rfind("bundle '" + path + "': ", 0), 0u) << err;
    ++refused;
  }
  EXPECT_EQ(refused, region) << "every header and manifest byte flipped is refused";
  EXPECT_GT(region, 300u) << "the manifest of two kernels is a few hundred bytes";
}

TEST_F(BundleFile, BlobBitFlipsAreRefused) {
  ASSERT_FALSE(bool(writeBundle(path, b)));
  const std::string data = bytes();
  const size_t from = parts(data).sealedEnd;
  // Every 13th byte, a different bit each time: a few hundred reads across both kernels' cubin and PTX.
  for (size_t i = from; i < data.size(); i += 13) {
    std::string flipped = data;
    flipped[i] ^= char(1 << (i % 8));
    rewrite(flipped);
    std::string err = readError();
    EXPECT_NE(err.find("checksum mismatch"), std::string::npos) << "byte " << i << ": " << err;
  }
}

TEST_F(BundleFile, SwappedCubinsAreRefused) {
  ASSERT_FALSE(bool(writeBundle(path, b)));
  const std::string data = bytes();
  Parts p = parts(data);
  llvm::json::Object &c0 = blobOf(p.manifest, 0, "cubin"), &p0 = blobOf(p.manifest, 0, "ptx");
  llvm::json::Object &c1 = blobOf(p.manifest, 1, "cubin"), &p1 = blobOf(p.manifest, 1, "ptx");
  const std::string cubin0 = slice(p.blobs, c0), ptx0 = slice(p.blobs, p0);
  const std::string cubin1 = slice(p.blobs, c1), ptx1 = slice(p.blobs, p1);
  ASSERT_NE(cubin0, cubin1);

  // Each cubin under the other kernel, carrying its own offset, length and digest: only the file's
  // layout changes.
  std::string blobs = cubin1 + ptx0 + cubin0 + ptx1;
  std::swap(c0, c1);
  c0["offset"] = 0;
  p0["offset"] = int64_t(cubin1.size());
  c1["offset"] = int64_t(cubin1.size() + ptx0.size());
  // Not resealed: the manifest's seal catches it.
  std::string forged = assemble(data, p.manifest, blobs);
  forged.replace(parts(forged).sealedEnd - kSeal, kSeal, data.substr(p.sealedEnd - kSeal, kSeal));
  rewrite(forged);
  EXPECT_NE(readError().find("does not match its SHA-256 seal"), std::string::npos) << readError();
  // Resealed: each blob's digest is bound to its kernel's name.
  rewrite(assemble(data, p.manifest, blobs));
  std::string err = readError();
  EXPECT_NE(err.find("bundle '" + path + "': kernel " + b.kernels[0].name + ": cubin checksum mismatch"),
            std::string::npos)
      << err;
  // The same blobs swapped back under the forged manifest: a digest still names the other kernel.
  rewrite(assemble(data, p.manifest, cubin0 + ptx0 + cubin1 + ptx1));
  EXPECT_NE(readError().find("checksum mismatch"), std::string::npos) << readError();
}

TEST_F(BundleFile, OneKernelsCubinCopiedOverAnothersIsRefused) {
  ASSERT_FALSE(bool(writeBundle(path, b)));
  const std::string data = bytes();
  Parts p = parts(data);
  llvm::json::Object &c0 = blobOf(p.manifest, 0, "cubin"), &p0 = blobOf(p.manifest, 0, "ptx");
  llvm::json::Object &c1 = blobOf(p.manifest, 1, "cubin"), &p1 = blobOf(p.manifest, 1, "ptx");
  const std::string cubin0 = slice(p.blobs, c0), ptx0 = slice(p.blobs, p0), ptx1 = slice(p.blobs, p1);
  // k3's entry takes k2's cubin and its descriptor (length and digest), laid out and sealed as a writer would.
  c1 = c0;
  c1["offset"] = int64_t(cubin0.size() + ptx0.size());
  p1["offset"] = int64_t(2 * cubin0.size() + ptx0.size());
  p.manifest["blobs_length"] = int64_t(2 * cubin0.size() + ptx0.size() + ptx1.size());
  rewrite(assemble(data, p.manifest, cubin0 + ptx0 + cubin0 + ptx1));
  std::string err = readError();
  EXPECT_NE(err.find("kernel " + b.kernels[1].name + ": cubin checksum mismatch"), std::string::npos) << err;
}

TEST_F(BundleFile, BytesOutsideEveryBlobAreRefused) {
  ASSERT_FALSE(bool(writeBundle(path, b)));
  const std::string data = bytes();
  Parts p = parts(data);
  // A gap before the first blob, every offset moved past it: the digests still match, the layout does not.
  for (size_t k = 0; k < 2; ++k)
    for (const char *kind : {"cubin", "ptx"}) blobOf(p.manifest, k, kind)["offset"] =
        *blobOf(p.manifest, k, kind).getInteger("offset") + 4;
  p.manifest["blobs_length"] = int64_t(p.blobs.size() + 4);
  rewrite(assemble(data, p.manifest, "junk" + p.blobs));
  EXPECT_NE(readError().find("starts at blob offset 4, the previous blob ends at 0"), std::string::npos)
      << readError();
}

TEST_F(BundleFile, AFlippedKernelByteIsCaught) {
  ASSERT_FALSE(bool(writeBundle(path, b)));
  std::string data = bytes();
  data[data.size() - 10] ^= 0x40; // inside the last blob, k3's PTX
  rewrite(data);
  std::string err = readError();
  EXPECT_NE(err.find("checksum mismatch"), std::string::npos) << err;
}

TEST_F(BundleFile, EditedIrIsCaught) {
  ASSERT_FALSE(bool(writeBundle(path, b)));
  std::string data = bytes();
  Parts p = parts(data);
  p.manifest["ir"] = "model \"x\"\n";
  rewrite(assemble(data, p.manifest, p.blobs));
  EXPECT_NE(readError().find("the IR text does not match its recorded SHA-256"), std::string::npos) << readError();
}

TEST_F(BundleFile, EditedPlanIsCaught) {
  ASSERT_FALSE(bool(writeBundle(path, b)));
  std::string data = bytes();
  size_t at = data.find("\"launches\":3");
  ASSERT_NE(at, std::string::npos);
  data[at + 11] = '4'; // still valid JSON, still a plan
  rewrite(data);
  EXPECT_NE(readError().find("the manifest (plan, kernel table, versions) does not match its SHA-256 seal"),
            std::string::npos)
      << readError();
}

TEST_F(BundleFile, OtherFormatVersionIsRefused) {
  ASSERT_FALSE(bool(writeBundle(path, b)));
  std::string data = bytes();
  data[8] = 1; // format 1: the manifest unsealed, blob checksums not bound to their kernels
  rewrite(data);
  EXPECT_NE(readError().find("written by bundle format version 1, this minfer reads version 2: rebuild it"),
            std::string::npos)
      << readError();
}

TEST_F(BundleFile, ACubinForAnotherTargetIsRefused) {
  b.target = "sm_90";
  ASSERT_FALSE(bool(writeBundle(path, b)));
  EXPECT_NE(readError().find("cubin is not an sm_90 binary"), std::string::npos) << readError();
}

TEST_F(BundleFile, UnwritablePathLeavesNothing) {
  llvm::Error e = writeBundle(dir + "/missing/m.mfb", b);
  ASSERT_TRUE(bool(e));
  EXPECT_NE(llvm::toString(std::move(e)).find("cannot write"), std::string::npos);
}

} // namespace
