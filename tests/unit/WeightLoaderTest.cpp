// tests/unit/WeightLoaderTest.cpp — binding a module's weights to a safetensors checkpoint: the happy
// path (bf16 and a transposed f32 weight, per-layer names) and each mismatch's error.
#include "common/TestFiles.h"
#include "common/TestModels.h"

#include "io/Safetensors.h"
#include "io/WeightLoader.h"
#include "ir/Parser.h"
#include "jit/AtomicFile.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace minfer;

namespace {

const char *kModule = R"(model "w"
dim d = 2
dim o = 3
weight @e : bf16[4, d] = "emb"
weight @t : f32[o, d] = transpose "layer.{l}.conv"
weight @p : f32[d, o] = "proj"
graph(%tokens: i32[T]) {
  %x = embedding %tokens, @e : bf16[T, d]
  %h = repeat 2 (%r = %x) {
    %y = matmul %r, @t : bf16[T, o]
    %z = matmul %y, @p : bf16[T, d]
    yield %z
  }
  %l = matmul %h, @e : bf16[T, 4]
  return %l
}
)";

OwnedTensor f32(const std::string &name, std::vector<int64_t> shape, std::vector<float> values) {
  OwnedTensor t{name, StDType::F32, std::move(shape), {}};
  t.data.resize(values.size() * 4);
  std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

OwnedTensor bf16(const std::string &name, std::vector<int64_t> shape, std::vector<float> values) {
  OwnedTensor t{name, StDType::BF16, std::move(shape), {}};
  for (float v : values) {
    uint16_t b = floatToBf16(v);
    t.data.push_back(static_cast<uint8_t>(b & 0xff));
    t.data.push_back(static_cast<uint8_t>(b >> 8));
  }
  return t;
}

class WeightLoader : public ::testing::Test {
protected:
  void SetUp() override {
    module = test::parseVerified(kModule);
    ASSERT_TRUE(module);
  }

  std::vector<OwnedTensor> good() {
    return {bf16("emb", {4, 2}, {1, 2, 3, 4, 5, 6, 7, 8}),
            // stored [in = d, out = o]: row i holds input i's weights to the 3 outputs
            f32("layer.0.conv", {2, 3}, {1, 2, 3, 4, 5, 6}), f32("layer.1.conv", {2, 3}, {-1, -2, -3, -4, -5, -6}),
            f32("proj", {2, 3}, std::vector<float>(6, 0.5f))};
  }
  llvm::Expected<Checkpoint> write(const std::vector<OwnedTensor> &tensors) {
    std::string path = dir + "/model.safetensors";
    if (auto e = writeAtomically(path, [&](llvm::raw_ostream &os) { return writeSafetensors(os, path, tensors); }))
      return e;
    return Checkpoint::open(dir);
  }
  std::string errorFor(std::vector<OwnedTensor> tensors) {
    auto ckpt = write(tensors);
    if (!ckpt) return "checkpoint: " + llvm::toString(ckpt.takeError());
    llvm::Error e = checkWeights(*module, *ckpt);
    return e ? llvm::toString(std::move(e)) : "no error";
  }

  test::TempDir tmp{"minfer-weights"};
  const std::string dir = tmp.path();
  std::unique_ptr<ir::Module> module;
};

TEST_F(WeightLoader, LoadsPerLayerTensorsAndTransposesConv1D) {
  auto ckpt = write(good());
  ASSERT_TRUE(bool(ckpt)) << llvm::toString(ckpt.takeError());
  auto set = loadWeightsF32(*module, *ckpt);
  ASSERT_TRUE(bool(set)) << llvm::toString(set.takeError());
  ASSERT_EQ(set->byDecl.size(), 3u);
  EXPECT_EQ(set->byDecl[0][0].data, (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}));
  ASSERT_EQ(set->byDecl[1].size(), 2u); // one per layer
  // [in, out] = [[1,2,3],[4,5,6]] becomes [out, in] = [[1,4],[2,5],[3,6]]
  EXPECT_EQ(set->byDecl[1][0].shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(set->byDecl[1][0].data, (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(set->byDecl[1][1].data, (std::vector<float>{-1, -4, -2, -5, -3, -6}));
  ASSERT_EQ(set->byDecl[2].size(), 1u);
}

TEST_F(WeightLoader, MissingTensorNamesTensorWeightAndLayer) {
  auto t = good();
  t.erase(t.begin() + 2); // layer.1.conv
  std::string err = errorFor(t);
  EXPECT_NE(err.find("tensor 'layer.1.conv' (weight @t, layer 1) is missing"), std::string::npos) << err;
}

TEST_F(WeightLoader, DtypeMismatchSaysWhatWasExpected) {
  auto t = good();
  t[0] = f32("emb", {4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  std::string err = errorFor(t);
  EXPECT_NE(err.find("tensor 'emb' (weight @e) has dtype F32, expected BF16"), std::string::npos) << err;
}

TEST_F(WeightLoader, ShapeMismatchSaysWhatWasExpected) {
  auto t = good();
  t[3] = f32("proj", {3, 2}, std::vector<float>(6, 0.5f));
  std::string err = errorFor(t);
  EXPECT_NE(err.find("tensor 'proj' (weight @p) has shape [3, 2], expected [2, 3]"), std::string::npos) << err;
  // A transposed weight is expected in its stored [in, out] layout.
  t = good();
  t[1] = f32("layer.0.conv", {3, 2}, {1, 2, 3, 4, 5, 6});
  err = errorFor(t);
  EXPECT_NE(err.find("has shape [3, 2], expected [2, 3] (stored [in, out], transposed at load)"), std::string::npos) << err;
}

// Every f16 bit pattern, through the vectorised conversion (at odd lengths and offsets, so the scalar tail
// runs too), gives what the scalar definition floatToBf16(f16ToFloat(x)) gives, NaNs included.
TEST(ConvertF16ToBf16, EveryBitPatternMatchesTheScalarDefinition) {
  std::vector<uint16_t> src(65536 + 3);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint16_t>(i);
  for (size_t skip : {size_t(0), size_t(1), size_t(3)}) {
    size_t n = src.size() - skip;
    std::vector<uint16_t> dst(n, 0xDEAD);
    convertF16ToBf16(reinterpret_cast<const uint8_t *>(src.data() + skip), reinterpret_cast<uint8_t *>(dst.data()), n);
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(dst[i], floatToBf16(f16ToFloat(src[i + skip]))) << "f16 0x" << std::hex << src[i + skip];
  }
}

// In place (dst == src), as the engine's staging buffers convert: the same results.
TEST(ConvertF16ToBf16, InPlaceMatchesTheScalarDefinition) {
  std::vector<uint16_t> buf(65536 + 5);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<uint16_t>(i * 40503u); // every pattern, shuffled
  const std::vector<uint16_t> src = buf;
  convertF16ToBf16(reinterpret_cast<const uint8_t *>(buf.data()), reinterpret_cast<uint8_t *>(buf.data()), buf.size());
  for (size_t i = 0; i < buf.size(); ++i)
    ASSERT_EQ(buf[i], floatToBf16(f16ToFloat(src[i]))) << "f16 0x" << std::hex << src[i];
}

// storedParts: the checkpoint tensors behind a weight as stored (views of the file, their dtype and whether
// the IR transposes them). (A packed weight gives one per part, in stacking order; the GPU test
// WeightUpload.AnF16CheckpointIsConvertedAsTheHostConvertsIt loads fused models through it.)
TEST_F(WeightLoader, StoredPartsAreTheCheckpointTensorsAsStored) {
  auto ckpt = write(good());
  ASSERT_TRUE(bool(ckpt)) << llvm::toString(ckpt.takeError());
  auto emb = storedParts(*module, *ckpt, 0, 0);
  ASSERT_TRUE(bool(emb)) << llvm::toString(emb.takeError());
  ASSERT_EQ(emb->size(), 1u);
  EXPECT_EQ((*emb)[0].dtype, ir::DType::BF16);
  EXPECT_FALSE((*emb)[0].transposed);
  EXPECT_EQ((*emb)[0].bytes.vec(), good()[0].data);
  auto conv = storedParts(*module, *ckpt, 1, 1); // layer 1 of the transposed weight
  ASSERT_TRUE(bool(conv)) << llvm::toString(conv.takeError());
  ASSERT_EQ(conv->size(), 1u);
  EXPECT_EQ((*conv)[0].dtype, ir::DType::F32);
  EXPECT_TRUE((*conv)[0].transposed);
  EXPECT_EQ((*conv)[0].bytes.vec(), good()[2].data);
  auto missing = storedParts(*module, *ckpt, 1, 2); // no layer 2 in the checkpoint
  ASSERT_FALSE(bool(missing));
  EXPECT_NE(llvm::toString(missing.takeError()).find("layer.2.conv"), std::string::npos);
}

// The verifier refuses integer weights; a module that skipped it still gets an error from the loaders,
// naming the weight, rather than integers handed to float kernels.
TEST_F(WeightLoader, IntegerWeightsAreRefusedByTheLoaders) {
  auto unverified = ir::parseModuleString("model \"w\"\ndim d = 2\nweight @e : i32[4, d] = \"emb\"\n"
                                          "graph(%tokens: i32[T]) {\n  return %tokens\n}\n",
                                          "test.ir");
  ASSERT_TRUE(bool(unverified)) << llvm::toString(unverified.takeError());
  OwnedTensor emb{"emb", StDType::I32, {4, 2}, std::vector<uint8_t>(32, 0)};
  auto ckpt = write({emb});
  ASSERT_TRUE(bool(ckpt)) << llvm::toString(ckpt.takeError());
  const ir::Module &m = **unverified;
  auto parts = storedParts(m, *ckpt, 0, 0);
  ASSERT_FALSE(bool(parts));
  EXPECT_NE(llvm::toString(parts.takeError()).find("weight @e: only bf16, f16 and f32 weights can be loaded"),
            std::string::npos);
  auto sink = [](llvm::ArrayRef<uint8_t>, size_t) { return llvm::Error::success(); };
  for (ir::DType to : {ir::DType::BF16, ir::DType::I32}) {
    llvm::Error e = streamWeight(m, *ckpt, 0, 0, to, 1 << 20, sink);
    ASSERT_TRUE(bool(e));
    EXPECT_NE(llvm::toString(std::move(e)).find("weight @e: only bf16, f16 and f32 weights can be loaded"),
              std::string::npos);
  }
}

} // namespace
