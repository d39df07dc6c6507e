// SafetensorsTest.cpp — tests for compiler/Safetensors: writer round trip, reads of hand-written files,
// one hand-crafted bad file per header validation rule (each error must name the file, the tensor and
// the rule), sharded checkpoints. The bf16 / f16 conversions are tested in HalfConversionTest.cpp.
#include "io/Safetensors.h"
#include "jit/AtomicFile.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include "common/TestFiles.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>

using namespace minfer;
using llvm::StringRef;

namespace {

/// Success if `e` is an error whose message contains every string in `parts`.
using test::failsMentioning;

/// The value of `v`, or T() after recording a test failure with the error.
template <typename T> T valueOr(llvm::Expected<T> v) {
  if (v) return std::move(*v);
  ADD_FAILURE() << llvm::toString(v.takeError());
  return T();
}

std::vector<uint8_t> f32Bytes(std::initializer_list<float> values) {
  std::vector<uint8_t> out(values.size() * 4);
  size_t i = 0;
  for (float v : values) llvm::support::endian::write32le(out.data() + 4 * i++, std::bit_cast<uint32_t>(v));
  return out;
}

/// Each test's files in its own temporary directory.
class SafetensorsDirTest : public test::TempDirTest {
protected:
  SafetensorsDirTest() : TempDirTest("minfer-st") {}

  llvm::Error save(StringRef name, llvm::ArrayRef<OwnedTensor> tensors,
                   const std::map<std::string, std::string> &metadata = {}) const {
    return saveWith(name,
                    [&](llvm::raw_ostream &os, StringRef p) { return writeSafetensors(os, p, tensors, metadata); });
  }
};

/// A safetensors file by hand: u64 LE header length, the header text, then `dataBytes` data bytes.
std::string stBytes(StringRef header, size_t dataBytes) {
  std::string s(8, '\0');
  llvm::support::endian::write64le(s.data(), header.size());
  s += header;
  for (size_t i = 0; i < dataBytes; ++i) s += char(i * 7 + 1);
  return s;
}

class Safetensors : public SafetensorsDirTest {
protected:
  /// Writes `tensors` with writeSafetensors and opens the result; null (and a test failure) on error.
  std::unique_ptr<SafetensorsFile> writeAndOpen(StringRef name, std::vector<OwnedTensor> tensors) {
    if (llvm::Error e = save(name, tensors)) {
      ADD_FAILURE() << llvm::toString(std::move(e));
      return nullptr;
    }
    return valueOr(SafetensorsFile::open(path(name)));
  }
  /// Writes a hand-made file named bad.safetensors and returns the error from opening it.
  llvm::Error openBad(StringRef header, size_t dataBytes) {
    auto f = SafetensorsFile::open(writeRaw("bad.safetensors", stBytes(header, dataBytes)));
    return f ? llvm::Error::success() : f.takeError();
  }
};

// ---- reading and writing -------------------------------------------------------------------------------

TEST_F(Safetensors, WriterRoundTripsTensorsAndMetadata) {
  std::vector<OwnedTensor> in = {
      {"w", StDType::F32, {2, 3}, f32Bytes({1.5f, -2.f, 0.25f, 3.f, -0.f, 1e-3f})},
      {"b", StDType::BF16, {3}, {0x80, 0x3F, 0x00, 0xC0, 0x00, 0x3F}}, // 1.0, -2.0, 0.5
      {"ids", StDType::I32, {4}, {0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0, 7, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0x7F}},
      {"scalar", StDType::F32, {}, f32Bytes({42.f})},
      {"empty", StDType::F16, {0, 4}, {}},
  };
  ASSERT_FALSE(llvm::errorToBool(save("m.safetensors", in, {{"format", "pt"}})));
  auto f = SafetensorsFile::open(path("m.safetensors"));
  ASSERT_TRUE(bool(f)) << llvm::toString(f.takeError());

  ASSERT_EQ((*f)->tensors().size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) { // written in order, so offset order == input order
    const TensorInfo &t = (*f)->tensors()[i];
    EXPECT_EQ(t.name, in[i].name);
    EXPECT_EQ(t.dtype, in[i].dtype);
    EXPECT_EQ(t.shape, in[i].shape);
    llvm::ArrayRef<uint8_t> bytes = (*f)->bytes(t);
    EXPECT_EQ(std::vector<uint8_t>(bytes.begin(), bytes.end()), in[i].data) << t.name;
  }
  EXPECT_EQ((*f)->metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));
  EXPECT_EQ((*f)->find("scalar")->numel(), 1);
  EXPECT_EQ((*f)->find("empty")->numel(), 0);
  EXPECT_EQ((*f)->find("nope"), nullptr);

  EXPECT_EQ(valueOr(readAsFloat32(**f, *(*f)->find("w"))), (std::vector<float>{1.5f, -2.f, 0.25f, 3.f, -0.f, 1e-3f}));
  EXPECT_EQ(valueOr(readAsFloat32(**f, *(*f)->find("b"))), (std::vector<float>{1.f, -2.f, 0.5f}));
  EXPECT_EQ(valueOr(readAsInt64(**f, *(*f)->find("ids"))), (std::vector<int64_t>{-1, 0, 7, 2147483647}));
  EXPECT_TRUE(valueOr(readAsFloat32(**f, *(*f)->find("empty"))).empty());
}

TEST_F(Safetensors, WriterLayoutIsLengthThenPaddedHeaderThenData) {
  std::vector<OwnedTensor> in = {{"a", StDType::U8, {3}, {1, 2, 3}}, {"b", StDType::I16, {1}, {9, 8}}};
  ASSERT_FALSE(llvm::errorToBool(save("m.safetensors", in)));
  std::string raw = readRaw("m.safetensors");
  ASSERT_GE(raw.size(), 8u);
  uint64_t n = llvm::support::endian::read64le(raw.data());
  EXPECT_EQ(n % 8, 0u) << "header padded so the data section is 8-byte aligned";
  ASSERT_EQ(raw.size(), 8 + n + 5);
  EXPECT_EQ(raw.substr(8 + n), std::string("\x01\x02\x03\x09\x08", 5));
  auto header = llvm::json::parse(raw.substr(8, n)); // checked with LLVM's parser, not ours
  ASSERT_TRUE(bool(header));
  const llvm::json::Object *b = header->getAsObject()->getObject("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(*b->getString("dtype"), "I16");
  EXPECT_EQ(*b->getArray("data_offsets"), (llvm::json::Array{3, 5}));
  EXPECT_EQ(*b->getArray("shape"), (llvm::json::Array{1}));
  EXPECT_EQ(header->getAsObject()->get("__metadata__"), nullptr) << "no metadata written when none given";
}

TEST_F(Safetensors, ReadsHandWrittenFileInOffsetOrder) {
  // Header lists b before a; the data is a: F32 1.0, then b: F16 [1.0, 2^-24]. Header is 4 bytes past a
  // multiple of 8, so the data (and a's float) sits at an unaligned address in the mapping.
  std::string header = R"({"b":{"dtype":"F16","shape":[2],"data_offsets":[4,8]},)"
                       R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"__metadata__":{"k":"v"}}  )";
  std::string raw = stBytes(header, 0) + std::string("\x00\x00\x80\x3F\x00\x3C\x01\x00", 8);
  auto f = SafetensorsFile::open(writeRaw("hand.safetensors", raw));
  ASSERT_TRUE(bool(f)) << llvm::toString(f.takeError());
  ASSERT_EQ((*f)->tensors().size(), 2u);
  EXPECT_EQ((*f)->tensors()[0].name, "a");
  EXPECT_EQ((*f)->tensors()[1].name, "b");
  EXPECT_EQ((*f)->tensors()[1].begin, 4u);
  EXPECT_EQ((*f)->tensors()[1].end, 8u);
  EXPECT_EQ((*f)->metadata().at("k"), "v");
  EXPECT_EQ(valueOr(readAsFloat32(**f, (*f)->tensors()[0])), std::vector<float>{1.0f});
  EXPECT_EQ(valueOr(readAsFloat32(**f, (*f)->tensors()[1])), (std::vector<float>{1.0f, std::ldexp(1.0f, -24)}));
}

TEST_F(Safetensors, BytesAreViewsIntoTheMappedFile) {
  // 1 MiB of data is far above MemoryBuffer's mmap threshold, so this exercises the mapped path.
  std::vector<uint8_t> data(1 << 20);
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i * 131 + (i >> 11));
  auto f = writeAndOpen("big.safetensors",
                        {{"small", StDType::U8, {3}, {5, 6, 7}}, {"big", StDType::U8, {1024, 1024}, data}});
  ASSERT_TRUE(f);
  const TensorInfo *big = f->find("big");
  ASSERT_NE(big, nullptr);
  llvm::ArrayRef<uint8_t> a = f->bytes(*big), again = f->bytes(*big);
  EXPECT_EQ(a.data(), again.data()) << "bytes() returns a view, not a copy";
  EXPECT_EQ(a.size(), data.size());
  EXPECT_TRUE(std::equal(a.begin(), a.end(), data.begin()));
  EXPECT_EQ(f->bytes(*f->find("small")).data() + 3, a.data()) << "tensors are adjacent in the file";
}

TEST_F(Safetensors, AcceptsEmptyHeaderObjectWithNoData) {
  auto f = SafetensorsFile::open(writeRaw("e.safetensors", stBytes("{}", 0)));
  ASSERT_TRUE(bool(f)) << llvm::toString(f.takeError());
  EXPECT_TRUE((*f)->tensors().empty());
  EXPECT_TRUE((*f)->metadata().empty());
}

TEST_F(Safetensors, AcceptsZeroSizeTensorBetweenOthers) {
  std::string header = R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                       R"("z":{"dtype":"F32","shape":[0,5],"data_offsets":[2,2]},)"
                       R"("c":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}})";
  auto f = SafetensorsFile::open(writeRaw("z.safetensors", stBytes(header, 3)));
  ASSERT_TRUE(bool(f)) << llvm::toString(f.takeError());
  EXPECT_EQ((*f)->tensors()[1].name, "z");
  EXPECT_TRUE((*f)->bytes(*(*f)->find("z")).empty());
}

// ---- validation: each rule, one bad file ---------------------------------------------------------------

/// One header entry as JSON text: "name":{"dtype":"...","shape":<shape>,"data_offsets":<offsets>}.
std::string entry(StringRef name, StringRef dtype, StringRef shape, StringRef offsets) {
  return ("\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":" + offsets + "}")
      .str();
}
std::string header(std::initializer_list<std::string> entries) {
  std::string s = "{";
  for (const std::string &e : entries) s += (s.size() > 1 ? "," : "") + e;
  return s + "}";
}

TEST_F(Safetensors, RejectsMissingFile) {
  EXPECT_TRUE(failsMentioning(SafetensorsFile::open(path("absent.safetensors")), {"absent.safetensors", "open"}));
}

TEST_F(Safetensors, RejectsFileShorterThanEightBytes) {
  EXPECT_TRUE(failsMentioning(SafetensorsFile::open(writeRaw("bad.safetensors", "abcde")),
                              {"bad.safetensors", "5 bytes", "8-byte header length"}));
}

TEST_F(Safetensors, RejectsHeaderLengthAboveLimit) {
  std::string raw(8, '\0');
  llvm::support::endian::write64le(raw.data(), 100'000'001);
  EXPECT_TRUE(failsMentioning(SafetensorsFile::open(writeRaw("bad.safetensors", raw + "{}")),
                              {"bad.safetensors", "100000001", "limit of 100000000"}));
}

TEST_F(Safetensors, RejectsHeaderLengthPastEndOfFile) {
  std::string raw(8, '\0');
  llvm::support::endian::write64le(raw.data(), 1000);
  EXPECT_TRUE(failsMentioning(SafetensorsFile::open(writeRaw("bad.safetensors", raw + "{}")),
                              {"bad.safetensors", "1000", "past the end"}));
}

/// One bad header: the rule it breaks (the test's name), the header text, how many data bytes follow it,
/// and what the error must mention.
struct BadHeader {
  const char *rule;
  std::string header;
  size_t dataBytes;
  std::vector<StringRef> mentions;
};
void PrintTo(const BadHeader &b, std::ostream *os) {
  *os << b.rule << ": " << (b.header.size() > 80 ? b.header.substr(0, 80) + "..." : b.header);
}

std::vector<BadHeader> badHeaders() {
  std::string w0 = entry("w", "U8", "[1]", "[0,1]");
  return {
      {"InvalidJson", R"({"a": )", 0, {"bad.safetensors", "not valid JSON"}},
      {"HeaderThatIsNotAnObject", "[1, 2]", 0, {"bad.safetensors", "must be a JSON object", "[1,2]"}},
      {"DeeplyNestedHeaderWithoutRecursing", std::string(100000, '[') + std::string(100000, ']'), 0,
       {"bad.safetensors", "nests deeper"}},
      // LLVM's JSON parser silently keeps the last duplicate; the reader must notice.
      {"DuplicateTensorName", header({w0, entry("w", "U8", "[1]", "[1,2]")}), 2,
       {"bad.safetensors", "duplicate tensor name 'w'"}},
      {"DuplicateTensorNameSpelledWithAnEscape", header({w0, entry("\\u0077", "U8", "[1]", "[1,2]")}), 2,
       {"bad.safetensors", "duplicate tensor name 'w'"}},
      {"DuplicateKeyInsideEntry", R"({"w":{"dtype":"U8","dtype":"I8","shape":[1],"data_offsets":[0,1]}})", 1,
       {"bad.safetensors", "tensor 'w'", "duplicate key 'dtype'"}},
      {"DuplicateMetadataKey", R"({"__metadata__":{"k":"1","k":"2"}})", 0,
       {"bad.safetensors", "duplicate metadata key 'k'"}},
      {"EntryThatIsNotAnObject", R"({"w":[1,2]})", 0, {"bad.safetensors", "tensor 'w'", "JSON object"}},
      {"UnknownDtypeAndListsKnownOnes", header({entry("w", "F17", "[1]", "[0,1]")}), 1,
       {"bad.safetensors", "tensor 'w'", "unknown dtype 'F17'", "BF16", "F8_E5M2"}},
      {"DtypeInLowerCase", header({entry("w", "f32", "[1]", "[0,4]")}), 4,
       {"tensor 'w'", "unknown dtype 'f32'"}}, // no case folding
      {"DtypeThatIsNotAString", R"({"w":{"dtype":7,"shape":[1],"data_offsets":[0,1]}})", 1,
       {"tensor 'w'", "'dtype' must be a string", "7"}},
      {"MissingDtype", R"({"w":{"shape":[1],"data_offsets":[0,1]}})", 1,
       {"bad.safetensors", "tensor 'w'", "missing key 'dtype'"}},
      {"MissingShape", R"({"w":{"dtype":"U8","data_offsets":[0,1]}})", 1,
       {"bad.safetensors", "tensor 'w'", "missing key 'shape'"}},
      {"MissingDataOffsets", R"({"w":{"dtype":"U8","shape":[1]}})", 1,
       {"bad.safetensors", "tensor 'w'", "missing key 'data_offsets'"}},
      {"UnknownKeyInEntry", R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"offset":0}})", 1,
       {"bad.safetensors", "tensor 'w'", "unknown key 'offset'"}},
      {"ShapeThatIsNotAnArray", header({entry("w", "U8", "3", "[0,3]")}), 3,
       {"bad.safetensors", "tensor 'w'", "'shape' must be an array", "found 3"}},
      {"ShapeWithANegativeDim", header({entry("w", "U8", "[2,-1]", "[0,0]")}), 0,
       {"bad.safetensors", "tensor 'w'", "'shape'", "non-negative", "-1"}},
      {"ShapeWithAStringDim", header({entry("w", "U8", "[\"2\"]", "[0,2]")}), 2, {"tensor 'w'", "'shape'", "\"2\""}},
      // LLVM's JSON parser would read 2.0 and 1e3 as integers; the header must spell integers as integers.
      {"FractionalInteger", header({entry("w", "U8", "[2.0]", "[0,2]")}), 2, {"tensor 'w'", "'shape'", "'2.0'"}},
      {"ExponentInteger", header({entry("w", "U8", "[1e3]", "[0,1000]")}), 1000, {"tensor 'w'", "'shape'", "'1e3'"}},
      {"FractionalDataOffset", header({entry("w", "U8", "[2]", "[0,2.5]")}), 2,
       {"tensor 'w'", "'data_offsets'", "'2.5'"}},
      {"IntegersBeyondInt64InsteadOfClamping", header({entry("w", "U8", "[1]", "[0,18446744073709551615]")}), 1,
       {"tensor 'w'", "'data_offsets'", "'18446744073709551615'"}},
      {"DataOffsetsWithOneValue", header({entry("w", "U8", "[1]", "[0]")}), 1,
       {"bad.safetensors", "tensor 'w'", "exactly 2", "found 1"}},
      {"DataOffsetsWithThreeValues", header({entry("w", "U8", "[1]", "[0,1,2]")}), 1,
       {"tensor 'w'", "exactly 2", "found 3"}},
      {"DataOffsetsThatEndBeforeTheyBegin", header({entry("w", "U8", "[0]", "[4,0]")}), 4,
       {"bad.safetensors", "tensor 'w'", "[4, 0]", "end before"}},
      {"ByteRangeThatDisagreesWithShapeAndDtype", header({entry("w", "F32", "[2,3]", "[0,20]")}), 20,
       {"bad.safetensors", "tensor 'w'", "[2, 3]", "F32", "needs 24 bytes", "span 20"}},
      {"ShapeWhoseByteCountOverflows", header({entry("w", "F32", "[4294967296,4294967296]", "[0,0]")}), 0,
       {"bad.safetensors", "tensor 'w'", "overflows"}},
      {"GapBeforeFirstTensor", header({entry("w", "U8", "[2]", "[4,6]")}), 6,
       {"bad.safetensors", "gap of 4 bytes", "'w'", "begins at 4"}},
      {"GapBetweenTensorsNamingBoth", header({entry("a", "U8", "[2]", "[0,2]"), entry("b", "U8", "[2]", "[3,5]")}), 5,
       {"bad.safetensors", "gap of 1 bytes", "'a'", "'b'"}},
      {"OverlappingTensorsNamingBoth", header({entry("a", "U8", "[4]", "[0,4]"), entry("b", "U8", "[4]", "[2,6]")}),
       6, {"bad.safetensors", "'a' [0, 4)", "overlaps", "'b' [2, 6)"}},
      {"TrailingBytes", header({entry("a", "U8", "[4]", "[0,4]")}), 7, {"bad.safetensors", "3 trailing bytes", "'a'"}},
      {"TrailingBytesWithNoTensors", "{}", 2, {"bad.safetensors", "2 trailing bytes"}},
      {"TruncatedData", header({entry("a", "U8", "[4]", "[0,4]"), entry("b", "F32", "[2]", "[4,12]")}), 9,
       {"bad.safetensors", "truncated", "'b'", "ends at byte 12", "only 9 bytes"}},
      {"MetadataThatIsNotAnObject", R"({"__metadata__":["x"]})", 0, {"bad.safetensors", "'__metadata__'"}},
      {"MetadataValueThatIsNotAString", R"({"__metadata__":{"n":3}})", 0,
       {"bad.safetensors", "metadata key 'n'", "string", "3"}},
  };
}

/// Each bad header, written to bad.safetensors and opened: the error names the file, the tensor and the rule.
class SafetensorsRejects : public Safetensors, public testing::WithParamInterface<BadHeader> {};

TEST_P(SafetensorsRejects, BadHeaderNamingTheRule) {
  EXPECT_TRUE(failsMentioning(openBad(GetParam().header, GetParam().dataBytes), GetParam().mentions));
}

INSTANTIATE_TEST_SUITE_P(EachRule, SafetensorsRejects, testing::ValuesIn(badHeaders()),
                         [](const testing::TestParamInfo<BadHeader> &info) { return std::string(info.param.rule); });

// ---- typed reads --------------------------------------------------------------------------------------

TEST_F(Safetensors, TypedReadsRejectOtherDtypesNamingThem) {
  auto f = writeAndOpen("m.safetensors", {{"ids", StDType::I32, {1}, {1, 0, 0, 0}}, {"x", StDType::F64, {0}, {}}});
  ASSERT_TRUE(f);
  EXPECT_TRUE(failsMentioning(readAsFloat32(*f, *f->find("ids")),
                              {"m.safetensors", "'ids'", "I32", "BF16, F16 and F32"}));
  EXPECT_TRUE(failsMentioning(readAsInt64(*f, *f->find("x")), {"m.safetensors", "'x'", "F64", "I32 and I64"}));
}

TEST_F(Safetensors, ReadsI64AndSignExtendsI32) {
  std::vector<uint8_t> i64(16, 0xFF); // -1, then 2^40
  std::fill(i64.begin() + 8, i64.end(), 0);
  i64[13] = 1;
  auto f = writeAndOpen("n.safetensors", {{"a", StDType::I64, {2}, i64}, {"b", StDType::I32, {1}, {0, 0, 0, 0x80}}});
  ASSERT_TRUE(f);
  EXPECT_EQ(valueOr(readAsInt64(*f, *f->find("a"))), (std::vector<int64_t>{-1, int64_t(1) << 40}));
  EXPECT_EQ(valueOr(readAsInt64(*f, *f->find("b"))), (std::vector<int64_t>{-2147483648LL}));
}

TEST_F(Safetensors, TypedReadsRejectTensorInfoFromAnotherFile) {
  auto f = writeAndOpen("m.safetensors", {{"w", StDType::F32, {1}, f32Bytes({1.f})}});
  ASSERT_TRUE(f);
  TensorInfo foreign{"w", StDType::F32, {2}, 0, 8};
  EXPECT_TRUE(f->bytes(foreign).empty());
  EXPECT_TRUE(failsMentioning(readAsFloat32(*f, foreign), {"m.safetensors", "'w'", "not one of this file's"}));
}

// ---- writer --------------------------------------------------------------------------------------------

TEST_F(Safetensors, WriterRejectsDataSizeMismatchAndLeavesNoFile) {
  EXPECT_TRUE(failsMentioning(save("m.safetensors", {{"w", StDType::F32, {2}, {1, 2, 3}}}),
                              {"m.safetensors", "'w'", "needs 8 bytes", "holds 3"}));
  EXPECT_TRUE(listDir().empty());
  // The serialiser checks before it writes anything.
  std::string bytes;
  llvm::raw_string_ostream os(bytes);
  EXPECT_TRUE(failsMentioning(writeSafetensors(os, "x.safetensors", {{"w", StDType::F32, {2}, {1, 2, 3}}}),
                              {"x.safetensors", "'w'", "needs 8 bytes"}));
  EXPECT_TRUE(os.str().empty());
}

TEST_F(Safetensors, WriterRejectsDuplicateReservedAndEmptyNames) {
  EXPECT_TRUE(failsMentioning(
      save("m.safetensors", {{"w", StDType::U8, {1}, {1}}, {"w", StDType::U8, {1}, {2}}}),
      {"duplicate tensor name 'w'"}));
  EXPECT_TRUE(failsMentioning(save("m.safetensors", {{"__metadata__", StDType::U8, {1}, {1}}}),
                              {"'__metadata__'"}));
  EXPECT_TRUE(failsMentioning(save("m.safetensors", {{"", StDType::U8, {1}, {1}}}), {"empty"}));
  EXPECT_TRUE(failsMentioning(save("m.safetensors", {{"n", StDType::U8, {-1}, {}}}),
                              {"'n'", "negative"}));
  EXPECT_TRUE(listDir().empty());
}

TEST_F(Safetensors, FailedWriteKeepsTheExistingFileAndLeavesNoTemporary) {
  ASSERT_FALSE(llvm::errorToBool(save("m.safetensors", {{"w", StDType::U8, {2}, {1, 2}}})));
  std::string before = readRaw("m.safetensors");
  EXPECT_TRUE(bool(llvm::errorToBool(save("m.safetensors", {{"w", StDType::U8, {2}, {1}}}))));
  EXPECT_EQ(readRaw("m.safetensors"), before);
  EXPECT_EQ(listDir(), std::vector<std::string>{"m.safetensors"});
}

TEST_F(Safetensors, WriterReportsUnwritableDirectory) {
  std::string p = path("no-such-dir/m.safetensors");
  EXPECT_TRUE(failsMentioning(save("no-such-dir/m.safetensors", {{"w", StDType::U8, {1}, {1}}}), {p}));
  EXPECT_TRUE(listDir().empty());
}

// ---- sharded and directory checkpoints -------------------------------------------------------------------

class CheckpointOpen : public SafetensorsDirTest {
protected:
  void writeShard(StringRef name, std::vector<OwnedTensor> tensors) {
    ASSERT_FALSE(llvm::errorToBool(save(name, tensors)));
  }
  std::string writeIndex(StringRef weightMap) {
    return writeRaw("model.safetensors.index.json",
                    (R"({"metadata": {"total_size": 12}, "weight_map": )" + weightMap + "}").str());
  }
};

TEST_F(CheckpointOpen, OpensSingleFile) {
  writeShard("one.safetensors", {{"z", StDType::U8, {1}, {1}}, {"a", StDType::U8, {2}, {2, 3}}});
  auto cp = minfer::Checkpoint::open(path("one.safetensors"));
  ASSERT_TRUE(bool(cp)) << llvm::toString(cp.takeError());
  EXPECT_EQ(cp->path(), path("one.safetensors"));
  EXPECT_EQ(cp->names(), (std::vector<std::string>{"a", "z"}));
  auto a = cp->find("a");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->info->shape, std::vector<int64_t>{2});
  EXPECT_EQ(a->file->bytes(*a->info).vec(), (std::vector<uint8_t>{2, 3}));
  EXPECT_FALSE(cp->find("b").has_value());
}

TEST_F(CheckpointOpen, OpensDirectoryHoldingModelSafetensors) {
  writeShard("model.safetensors", {{"w", StDType::U8, {1}, {1}}});
  auto cp = minfer::Checkpoint::open(Dir);
  ASSERT_TRUE(bool(cp)) << llvm::toString(cp.takeError());
  EXPECT_EQ(cp->names(), std::vector<std::string>{"w"});
  EXPECT_EQ(cp->files().size(), 1u);
}

TEST_F(CheckpointOpen, DirectoryWithNeitherFileNamesDirAndBothNames) {
  EXPECT_TRUE(failsMentioning(minfer::Checkpoint::open(Dir),
                              {StringRef(Dir), "model.safetensors.index.json", "model.safetensors"}));
}

TEST_F(CheckpointOpen, MissingPathIsAnError) {
  EXPECT_TRUE(failsMentioning(minfer::Checkpoint::open(path("nowhere")), {"nowhere"}));
}

TEST_F(CheckpointOpen, OpensShardedIndexOpeningEachShardOnce) {
  writeShard("model-00001-of-00002.safetensors", {{"a", StDType::U8, {1}, {1}}, {"c", StDType::U8, {1}, {3}}});
  writeShard("model-00002-of-00002.safetensors", {{"b", StDType::U8, {2}, {4, 5}}});
  writeIndex(R"({"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors",
                 "c": "model-00001-of-00002.safetensors"})");
  for (const std::string &p : {std::string(Dir), path("model.safetensors.index.json")}) {
    auto cp = minfer::Checkpoint::open(p);
    ASSERT_TRUE(bool(cp)) << llvm::toString(cp.takeError());
    EXPECT_EQ(cp->names(), (std::vector<std::string>{"a", "b", "c"}));
    EXPECT_EQ(cp->files().size(), 2u);
    auto b = cp->find("b");
    ASSERT_TRUE(b.has_value());
    EXPECT_EQ(b->file->path(), path("model-00002-of-00002.safetensors"));
    EXPECT_EQ(b->file->bytes(*b->info).vec(), (std::vector<uint8_t>{4, 5}));
    EXPECT_EQ(cp->find("a")->file, cp->find("c")->file);
    minfer::Checkpoint moved = std::move(*cp); // refs point at heap-held files, so they survive a move
    EXPECT_EQ(moved.find("b")->file->bytes(*moved.find("b")->info).vec(), (std::vector<uint8_t>{4, 5}));
  }
}

TEST_F(CheckpointOpen, PrefersIndexWhenDirectoryHoldsBoth) {
  writeShard("model.safetensors", {{"single", StDType::U8, {1}, {1}}});
  writeShard("shard.safetensors", {{"sharded", StDType::U8, {1}, {1}}});
  writeIndex(R"({"sharded": "shard.safetensors"})");
  auto cp = minfer::Checkpoint::open(Dir);
  ASSERT_TRUE(bool(cp)) << llvm::toString(cp.takeError());
  EXPECT_EQ(cp->names(), std::vector<std::string>{"sharded"});
}

TEST_F(CheckpointOpen, MissingShardNamesIndexShardAndTensor) {
  writeShard("s1.safetensors", {{"a", StDType::U8, {1}, {1}}});
  writeIndex(R"({"a": "s1.safetensors", "b": "s2.safetensors"})");
  EXPECT_TRUE(failsMentioning(minfer::Checkpoint::open(Dir),
                              {"model.safetensors.index.json", "shard 's2.safetensors'", "'b'", "cannot open"}));
}

TEST_F(CheckpointOpen, TensorMissingFromItsShardIsAnError) {
  writeShard("s1.safetensors", {{"a", StDType::U8, {1}, {1}}});
  writeIndex(R"({"a": "s1.safetensors", "ghost": "s1.safetensors"})");
  EXPECT_TRUE(failsMentioning(minfer::Checkpoint::open(Dir),
                              {"index.json", "tensor 'ghost'", "'s1.safetensors'", "does not contain"}));
}

TEST_F(CheckpointOpen, ShardNameThatLeavesTheDirectoryIsRejected) {
  for (StringRef shard : {"../evil.safetensors", "sub/x.safetensors", "..", "/etc/passwd"}) {
    writeIndex(("{\"a\": \"" + shard + "\"}").str());
    EXPECT_TRUE(failsMentioning(minfer::Checkpoint::open(Dir), {"tensor 'a'", shard, "not a plain file name"}));
  }
}

TEST_F(CheckpointOpen, CorruptShardReportsShardAndCause) {
  writeRaw("s1.safetensors", stBytes(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 2));
  writeIndex(R"({"a": "s1.safetensors"})");
  EXPECT_TRUE(failsMentioning(minfer::Checkpoint::open(Dir), {"index.json", "s1.safetensors", "1 trailing bytes"}));
}

TEST_F(CheckpointOpen, RejectsMalformedIndex) {
  writeShard("s.safetensors", {{"a", StDType::U8, {1}, {1}}});
  writeIndex(R"({"a": "s.safetensors", "a": "s.safetensors"})");
  EXPECT_TRUE(failsMentioning(minfer::Checkpoint::open(Dir), {"index.json", "duplicate tensor 'a'"}));
  writeIndex(R"({"a": 5})");
  EXPECT_TRUE(failsMentioning(minfer::Checkpoint::open(Dir), {"index.json", "tensor 'a'", "string"}));
  writeIndex("{}");
  EXPECT_TRUE(failsMentioning(minfer::Checkpoint::open(Dir), {"index.json", "empty"}));
  writeRaw("model.safetensors.index.json", R"({"weights": {}})");
  EXPECT_TRUE(failsMentioning(minfer::Checkpoint::open(Dir), {"index.json", "unknown key 'weights'"}));
  writeRaw("model.safetensors.index.json", R"({"metadata": {}})");
  EXPECT_TRUE(failsMentioning(minfer::Checkpoint::open(Dir), {"index.json", "missing key 'weight_map'"}));
  writeRaw("model.safetensors.index.json", R"({"weight_map": {"a": "s.safetensors"},)");
  EXPECT_TRUE(failsMentioning(minfer::Checkpoint::open(Dir), {"index.json", "not valid JSON"}));
}

// ---- dtype table ---------------------------------------------------------------------------------------

TEST(StDTypes, NamesParseBackAndSizesMatchTheFormat) {
  const std::pair<const char *, size_t> expected[] = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"I16", 2}, {"U16", 2}, {"F16", 2},     {"BF16", 2},   {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"F64", 8}, {"I64", 8}, {"U64", 8}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  for (auto [name, size] : expected) {
    std::optional<StDType> d = parseStDType(name);
    ASSERT_TRUE(d.has_value()) << name;
    EXPECT_EQ(stDTypeName(*d), name);
    EXPECT_EQ(stDTypeSize(*d), size) << name;
  }
  EXPECT_FALSE(parseStDType("bf16").has_value());
  EXPECT_FALSE(parseStDType("").has_value());
}

} // namespace
