// tests/unit/BundleTest.cpp — bundles round-trip, and every kind of damage is caught on read.
#include "jit/Bundle.h"
#include "common/TestFiles.h"

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
  rewrite(data.substr(0, 20));
  EXPECT_NE(readError().find("not a minfer bundle"), std::string::npos) << readError();
  rewrite(data.substr(0, 40));
  EXPECT_NE(readError().find("runs past the end of the file"), std::string::npos) << readError();
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
  size_t at = data.find("model \\\"m\\\"");
  ASSERT_NE(at, std::string::npos);
  data[at + 8] = 'x'; // "m" -> "x", same length
  rewrite(data);
  EXPECT_NE(readError().find("does not match its recorded SHA-256"), std::string::npos) << readError();
}

TEST_F(BundleFile, OtherFormatVersionIsRefused) {
  ASSERT_FALSE(bool(writeBundle(path, b)));
  std::string data = bytes();
  data[8] = 7;
  rewrite(data);
  EXPECT_NE(readError().find("format version 7, this minfer reads version 1"), std::string::npos) << readError();
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
