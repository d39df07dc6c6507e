// NpyTest.cpp — tests for compiler/Npy: the exact bytes the writer produces (checked against NumPy's
// format spec, not against our reader), round trips across ranks including 0-d and empty arrays, reads
// of hand-written files, and one hand-crafted bad file per validation rule.
#include "io/Npy.h"

#include "llvm/Support/Endian.h"

#include "common/TestFiles.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>

using namespace minfer;
using llvm::StringRef;

namespace {

using test::failsMentioning;

/// A hand-made .npy file: magic, version, little-endian header length, header text, then raw data bytes.
std::string npyBytes(StringRef header, StringRef data, uint8_t major = 1) {
  std::string s = std::string("\x93NUMPY", 6) + char(major) + char(0);
  char len[4];
  llvm::support::endian::write32le(len, uint32_t(header.size()));
  s.append(len, major == 1 ? 2 : 4);
  return s + header.str() + data.str();
}

std::string floatBytes(std::initializer_list<float> values) {
  std::string s;
  for (float v : values) {
    char b[4];
    llvm::support::endian::write32le(b, std::bit_cast<uint32_t>(v));
    s.append(b, 4);
  }
  return s;
}

/// Each test's files in its own temporary directory.
class Npy : public test::TempDirTest {
protected:
  Npy() : TempDirTest("minfer-npy") {}

  llvm::Error save(StringRef name, llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<float> data) const {
    return saveWith(name, [&](llvm::raw_ostream &os, StringRef p) { return writeNpyF32(os, p, shape, data); });
  }
  /// Writes a hand-made file named bad.npy and returns the error from reading it.
  llvm::Error readBad(StringRef bytes) {
    auto a = readNpyF32(writeRaw("bad.npy", bytes));
    return a ? llvm::Error::success() : a.takeError();
  }
};

const char *kHeader23 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";

TEST_F(Npy, WriterEmitsVersion1HeaderPaddedTo64Bytes) {
  ASSERT_FALSE(llvm::errorToBool(save("a.npy", {2, 3}, {1, 2, 3, 4, 5, -0.5f})));
  std::string raw = readRaw("a.npy");
  ASSERT_GE(raw.size(), 10u);
  EXPECT_EQ(raw.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  size_t headerLen = llvm::support::endian::read16le(raw.data() + 8);
  EXPECT_EQ((10 + headerLen) % 64, 0u) << "data starts on a 64-byte boundary";
  ASSERT_EQ(raw.size(), 10 + headerLen + 24);
  std::string header = raw.substr(10, headerLen);
  EXPECT_EQ(header.substr(0, strlen(kHeader23)), kHeader23);
  EXPECT_EQ(header.back(), '\n');
  EXPECT_EQ(header.find_first_not_of(' ', strlen(kHeader23)), headerLen - 1) << "padded with spaces";
  EXPECT_EQ(raw.substr(10 + headerLen), floatBytes({1, 2, 3, 4, 5, -0.5f}));
  EXPECT_EQ(raw.substr(10 + headerLen + 20, 4), std::string("\x00\x00\x00\xBF", 4)) << "-0.5f, little-endian";
}

TEST_F(Npy, WriterSpellsOneDimAndZeroDimShapesAsPythonTuples) {
  ASSERT_FALSE(llvm::errorToBool(save("v.npy", {5}, {1, 2, 3, 4, 5})));
  EXPECT_NE(readRaw("v.npy").find("'shape': (5,), }"), std::string::npos);
  ASSERT_FALSE(llvm::errorToBool(save("s.npy", {}, {7})));
  EXPECT_NE(readRaw("s.npy").find("'shape': (), }"), std::string::npos);
}

TEST_F(Npy, RoundTripsEveryRankIncludingScalarsAndEmptyArrays) {
  const std::vector<std::vector<int64_t>> shapes = {{2, 3}, {5}, {}, {0}, {2, 0, 3}, {1, 1, 1, 1}, {3, 1, 2}};
  for (const auto &shape : shapes) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> data;
    for (int64_t i = 0; i < n; ++i) data.push_back(float(i) * 0.75f - 2.0f + (i % 3 ? 1e-7f : 0.0f));
    ASSERT_FALSE(llvm::errorToBool(save("r.npy", shape, data)));
    auto a = readNpyF32(path("r.npy"));
    ASSERT_TRUE(bool(a)) << llvm::toString(a.takeError());
    EXPECT_EQ(a->shape, shape);
    EXPECT_EQ(a->data, data);
  }
}

TEST_F(Npy, RoundTripKeepsSpecialValuesBitExact) {
  std::vector<float> data = {INFINITY, -INFINITY, -0.0f, std::ldexp(1.0f, -149), std::bit_cast<float>(0x7FC01234u)};
  ASSERT_FALSE(llvm::errorToBool(save("x.npy", {5}, data)));
  auto a = readNpyF32(path("x.npy"));
  ASSERT_TRUE(bool(a));
  for (size_t i = 0; i < data.size(); ++i)
    EXPECT_EQ(std::bit_cast<uint32_t>(a->data[i]), std::bit_cast<uint32_t>(data[i])) << i;
}

TEST_F(Npy, ReadsHandWrittenFiles) {
  // As NumPy writes them: 1-d and 0-d shapes, double-quoted keys, a version 2.0 (u32 length) file.
  auto v = readNpyF32(writeRaw("v.npy", npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }    \n",
                                                  floatBytes({1.5f, -2, 0.25f}))));
  ASSERT_TRUE(bool(v)) << llvm::toString(v.takeError());
  EXPECT_EQ(v->shape, std::vector<int64_t>{3});
  EXPECT_EQ(v->data, (std::vector<float>{1.5f, -2, 0.25f}));

  auto s = readNpyF32(writeRaw("s.npy", npyBytes("{\"shape\": (), \"descr\": \"<f4\", \"fortran_order\": False}\n",
                                                  floatBytes({42}))));
  ASSERT_TRUE(bool(s)) << llvm::toString(s.takeError());
  EXPECT_TRUE(s->shape.empty());
  EXPECT_EQ(s->data, std::vector<float>{42});

  auto m = readNpyF32(writeRaw("m.npy", npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2,)}\n",
                                                  floatBytes({3, 4}), /*major=*/2)));
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  EXPECT_EQ(m->shape, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(m->data, (std::vector<float>{3, 4}));
}

TEST_F(Npy, RejectsTruncatedData) {
  std::string good = npyBytes(kHeader23, floatBytes({1, 2, 3, 4, 5, 6}));
  EXPECT_TRUE(failsMentioning(readBad(good.substr(0, good.size() - 2)),
                              {"bad.npy", "truncated", "(2, 3)", "needs 24", "only 22"}));
}

TEST_F(Npy, RejectsTrailingBytes) {
  EXPECT_TRUE(failsMentioning(readBad(npyBytes(kHeader23, floatBytes({1, 2, 3, 4, 5, 6, 7}))),
                              {"bad.npy", "4 trailing bytes"}));
}

TEST_F(Npy, RejectsMissingOrShortFiles) {
  EXPECT_TRUE(failsMentioning(readNpyF32(path("absent.npy")), {"absent.npy", "cannot open"}));
  EXPECT_TRUE(failsMentioning(readBad(""), {"bad.npy", "magic"}));
  EXPECT_TRUE(failsMentioning(readBad("PK\x03\x04 not numpy"), {"bad.npy", "magic"}));
  EXPECT_TRUE(failsMentioning(readBad(std::string("\x93NUMPY\x01", 7)), {"bad.npy", "7 bytes", "preamble"}));
  EXPECT_TRUE(failsMentioning(readBad(std::string("\x93NUMPY\x01\x00\x10", 9)), {"bad.npy", "9 bytes", "preamble"}));
  EXPECT_TRUE(failsMentioning(readBad(std::string("\x93NUMPY\x02\x00\x10\x00", 10)), {"bad.npy", "preamble"}));
}

TEST_F(Npy, RejectsUnsupportedVersion) {
  std::string raw = npyBytes(kHeader23, floatBytes({1, 2, 3, 4, 5, 6}));
  raw[6] = 4;
  EXPECT_TRUE(failsMentioning(readBad(raw), {"bad.npy", "version 4.0"}));
  raw[6] = 1, raw[7] = 1;
  EXPECT_TRUE(failsMentioning(readBad(raw), {"bad.npy", "version 1.1"}));
}

TEST_F(Npy, RejectsHeaderLengthPastEndOfFile) {
  std::string raw = npyBytes(kHeader23, "");
  llvm::support::endian::write16le(raw.data() + 8, 4000);
  EXPECT_TRUE(failsMentioning(readBad(raw), {"bad.npy", "header length 4000", "past the end"}));
}

TEST_F(Npy, RejectsOtherDtypesAndFortranOrder) {
  EXPECT_TRUE(failsMentioning(readBad(npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (1,)}", "1234")),
                              {"bad.npy", "'<f8'", "'<f4'"}));
  EXPECT_TRUE(failsMentioning(readBad(npyBytes("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", "1234")),
                              {"bad.npy", "'>f4'"}));
  EXPECT_TRUE(failsMentioning(readBad(npyBytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }",
                                               floatBytes({1, 2, 3, 4}))),
                              {"bad.npy", "Fortran"}));
}

TEST_F(Npy, RejectsMalformedShape) {
  for (StringRef shape : {"(5)", "(-1,)", "[5]", "(2, x)", "(,)", "(99999999999999999999,)"}) {
    std::string h = ("{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }").str();
    EXPECT_TRUE(failsMentioning(readBad(npyBytes(h, "")), {"bad.npy", "'shape' must be a tuple"})) << shape.str();
  }
  EXPECT_TRUE(failsMentioning(readBad(npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': "
                                               "(4294967296, 4294967296), }", "")),
                              {"bad.npy", "too large"}));
}

TEST_F(Npy, RejectsMalformedHeaderDict) {
  const std::pair<const char *, const char *> cases[] = {
      {"{'descr': '<f4', 'fortran_order': False}", "no 'shape' key"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (), }", "duplicate key 'descr'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (), 'extra': 1}", "unknown key 'extra'"},
      {"{'descr': '<f4', 'fortran_order': 0, 'shape': ()}", "'fortran_order' must be True or False"},
      {"{'descr': <f4, 'fortran_order': False, 'shape': ()}", "'descr' must be a quoted"},
      {"{'descr' '<f4'}", "expected ':' after key 'descr'"},
      {"{'descr': '<f4' 'shape': ()}", "expected ',' or '}'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': ()} junk", "unexpected text"},
      {"descr: '<f4'", "Python dict"},
  };
  for (auto [header, mention] : cases)
    EXPECT_TRUE(failsMentioning(readBad(npyBytes(header, "")), {"bad.npy", mention})) << header;
}

TEST_F(Npy, WriterRejectsShapeDataMismatchAndLeavesNoFile) {
  EXPECT_TRUE(failsMentioning(save("a.npy", {2, 3}, {1, 2, 3}),
                              {"a.npy", "(2, 3)", "6 elements", "3 floats"}));
  EXPECT_TRUE(failsMentioning(save("a.npy", {-1}, {}), {"a.npy", "negative"}));
  EXPECT_TRUE(listDir().empty());
  // The serialiser checks before it writes anything.
  std::string bytes;
  llvm::raw_string_ostream os(bytes);
  EXPECT_TRUE(failsMentioning(writeNpyF32(os, "x.npy", {2}, {1}), {"x.npy", "2 elements", "1 floats"}));
  EXPECT_TRUE(os.str().empty());
}

TEST_F(Npy, FailedWriteKeepsTheExistingFile) {
  ASSERT_FALSE(llvm::errorToBool(save("a.npy", {2}, {1, 2})));
  std::string before = readRaw("a.npy");
  EXPECT_TRUE(llvm::errorToBool(save("a.npy", {3}, {1, 2})));
  EXPECT_EQ(readRaw("a.npy"), before);
}

} // namespace
