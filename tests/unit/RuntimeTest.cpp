// tests/unit/RuntimeTest.cpp — what the runtime checks before it needs a GPU, and weight streaming.
//
// Engine::load checks the model, its weights and a bundle's integrity and target before touching the
// driver, so each kind of bad input has its own message on any machine. The APIs report errors as values.
// Without a GPU, loading a good model fails with the driver's "no CUDA driver" message; with one, it loads.
#include "common/GoldenReference.h"
#include "common/TestFiles.h"
#include "common/TestModels.h"

#include "jit/AtomicFile.h"
#include "jit/Bundle.h"
#include "compiler/Fuse.h"
#include "io/HFImport.h"
#include "compiler/Plan.h"
#include "io/WeightLoader.h"
#include "ir/Printer.h"
#include "minfer/minfer.h"
#include "minfer/minfer.hpp"
#include "runtime/Driver.h"
#include "runtime/Engine.h"

#include <gtest/gtest.h>

#include <random>

using namespace minfer;

namespace {

std::string loadError(llvm::StringRef model, const rt::EngineOptions &o) {
  auto e = rt::Engine::load(model, o);
  return e ? "no error" : llvm::toString(e.takeError());
}

// A golden fixture as the runtime reads it: the imported module, its checkpoint, and the checkpoint's weights
// in fp32 for that module (before any fusion adds packed declarations).
struct ImportedFixture {
  std::unique_ptr<ir::Module> module;
  Checkpoint ckpt;
  ir::WeightSet f32;
};
llvm::Expected<ImportedFixture> importFixture(const std::string &name) {
  std::string dir = test::fixtureDir(name);
  auto m = importHF(dir);
  if (!m) return m.takeError();
  auto ckpt = Checkpoint::open(dir);
  if (!ckpt) return ckpt.takeError();
  auto f32 = loadWeightsF32(**m, *ckpt);
  if (!f32) return f32.takeError();
  return ImportedFixture{std::move(*m), std::move(*ckpt), std::move(*f32)};
}

// Every layer of every weight, streamed in small chunks as the kernels read it, equals the interpreter's
// fp32 copy rounded to the kernel dtype: the transposed GPT-2 Conv1D weights included.
TEST(StreamWeight, ChunksReassembleTheKernelLayout) {
  auto fx = importFixture("gpt2");
  ASSERT_TRUE(bool(fx)) << llvm::toString(fx.takeError());
  const ir::Module &m = *fx->module;
  const Checkpoint &ckpt = fx->ckpt;
  const ir::WeightSet &f32 = fx->f32;
  int transposed = 0;
  for (size_t w = 0; w < m.weights.size(); ++w) {
    transposed += m.weights[w].transposed;
    for (size_t l = 0; l < f32.byDecl[w].size(); ++l)
      for (ir::DType dt : {ir::DType::BF16, ir::DType::F32}) {
        std::vector<uint8_t> bytes;
        size_t chunks = 0;
        auto sink = [&](llvm::ArrayRef<uint8_t> b, size_t offset) {
          EXPECT_EQ(offset, bytes.size()) << "chunks arrive in order";
          bytes.insert(bytes.end(), b.begin(), b.end());
          ++chunks;
          return llvm::Error::success();
        };
        ASSERT_FALSE(bool(streamWeight(m, ckpt, int(w), int64_t(l), dt, 1000, sink)));
        const std::vector<float> &want = f32.byDecl[w][l].data;
        ASSERT_EQ(bytes.size(), want.size() * ir::dtypeSize(dt)) << m.weights[w].name;
        EXPECT_GE(chunks, bytes.size() / 4096) << "bounded chunks";
        for (size_t i = 0; i < want.size(); ++i) {
          float got;
          if (dt == ir::DType::BF16) {
            uint16_t h;
            std::memcpy(&h, &bytes[i * 2], 2);
            got = bf16ToFloat(h);
          } else {
            std::memcpy(&got, &bytes[i * 4], 4);
          }
          ASSERT_EQ(got, want[i]) << m.weights[w].name << " layer " << l << " element " << i; // bf16 source: exact
        }
      }
  }
  EXPECT_GT(transposed, 0) << "the fixture exercises the transposed path";
}

// The fused plan's packed weights (q, k, v stacked; gate and up stacked), streamed as the runtime streams them
// (in their epilogue's row order: rope pairs side by side, gate and up rows interleaved), hold the parts'
// rows where the epilogues read them. The expected order is written out here from its definition.
TEST(StreamWeight, PackedWeightsArriveInTheirEpiloguesRowOrder) {
  auto fx = importFixture("llama_gqa"); // the parts' weights, before fusion adds the packed declarations
  ASSERT_TRUE(bool(fx)) << llvm::toString(fx.takeError());
  ir::Module &m = *fx->module;
  const Checkpoint &ckpt = fx->ckpt;
  const ir::WeightSet &f32 = fx->f32;
  ASSERT_TRUE(bool(fuseModule(m)));
  auto plan = buildPlan(m, *parseTarget("sm_90"));
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  int checked = 0;
  // One chunk buffer kept across the weights, as the engine does; stale bytes in it must not show.
  std::vector<uint8_t> scratch(1 << 16, 0xAB);
  for (const PlanBuffer &b : plan->buffers) {
    if (b.kind != BufferKind::Weight || !m.weights[b.weight].packed() || b.layer != 0) continue;
    const ir::WeightDecl &w = m.weights[b.weight];
    // The stacked parts (layer 0), logical row order.
    std::vector<float> stacked;
    for (int p : w.parts) stacked.insert(stacked.end(), f32.byDecl[p][0].data.begin(), f32.byDecl[p][0].data.end());
    int64_t rows = w.type.shape[0].value, cols = w.type.rank() == 2 ? w.type.shape[1].value : 1;
    std::vector<int64_t> source(rows);
    for (int64_t r = 0; r < rows; ++r) source[r] = r;
    if (b.layout == PlanBuffer::Layout::GateUp)
      for (int64_t r = 0; r < rows; ++r) source[r] = r % 2 ? rows / 2 + r / 2 : r / 2;
    if (b.layout == PlanBuffer::Layout::RopePairs)
      for (int64_t r = 0; r < b.layoutRows; ++r) {
        int64_t hd = b.layoutHeadDim, head = r / hd, j = r % hd;
        source[r] = head * hd + (j % 2 ? j / 2 + hd / 2 : j / 2);
      }
    std::vector<uint8_t> bytes;
    auto sink = [&](llvm::ArrayRef<uint8_t> part, size_t offset) {
      EXPECT_EQ(offset, bytes.size());
      bytes.insert(bytes.end(), part.begin(), part.end());
      return llvm::Error::success();
    };
    ASSERT_FALSE(bool(streamWeight(m, ckpt, b.weight, 0, b.dtype, 1000, sink, rowOrder(b, rows))));
    ASSERT_EQ(bytes.size(), size_t(rows * cols * 2)) << b.name;
    std::vector<uint8_t> fresh = std::move(bytes);
    bytes.clear();
    ASSERT_FALSE(bool(streamWeight(m, ckpt, b.weight, 0, b.dtype, 1000, sink, rowOrder(b, rows), &scratch)));
    EXPECT_EQ(bytes, fresh) << b.name << ": with a kept chunk buffer";
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        uint16_t h;
        std::memcpy(&h, &bytes[size_t(r * cols + c) * 2], 2);
        ASSERT_EQ(bf16ToFloat(h), stacked[size_t(source[r] * cols + c)]) << b.name << " row " << r << " col " << c;
      }
    ++checked;
  }
  EXPECT_EQ(checked, 2) << "the packed q/k/v (rope pairs) and gate/up weights";
}

// On sm_90a the fused plan carries each RMS norm's gamma into the packed q/k/v and gate/up weights that read
// it: streamed with those gains, each element is the one bf16 rounding of the stored value times its
// column's gain (computed here in fp32 from the f32 copies), in the epilogue's row order; gains of the wrong
// length are refused.
TEST(StreamWeight, ColumnGainsMultiplyEachColumnBeforeTheOneRounding) {
  auto fx = importFixture("llama_gqa");
  ASSERT_TRUE(bool(fx)) << llvm::toString(fx.takeError());
  ir::Module &m = *fx->module;
  const ir::WeightSet &f32 = fx->f32;
  ASSERT_TRUE(bool(fuseModule(m)));
  auto plan = buildPlan(m, *parseTarget("sm_90a"));
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  int checked = 0;
  for (const PlanBuffer &b : plan->buffers) {
    if (b.kind != BufferKind::Weight || b.gains < 0 || b.layer != 1) continue;
    const ir::WeightDecl &w = m.weights[b.weight];
    const PlanBuffer &g = plan->buffers[b.gains];
    ASSERT_EQ(g.kind, BufferKind::Weight);
    EXPECT_EQ(g.layer, 1) << "the same layer's norm";
    const std::vector<float> &gamma = f32.byDecl[g.weight][1].data;
    // The engine reads the gains one weight at a time: the interpreter's copy, and a packed weight refused.
    auto one = loadWeightF32(m, fx->ckpt, g.weight, 1);
    ASSERT_TRUE(bool(one)) << llvm::toString(one.takeError());
    EXPECT_EQ(*one, gamma);
    auto packed = loadWeightF32(m, fx->ckpt, b.weight, 1);
    ASSERT_FALSE(bool(packed));
    EXPECT_NE(llvm::toString(packed.takeError()).find("a packed weight is its parts"), std::string::npos);
    int64_t rows = w.type.shape[0].value, cols = w.type.shape[1].value;
    ASSERT_EQ(static_cast<int64_t>(gamma.size()), cols);
    std::vector<float> stacked;
    for (int p : w.packed() ? w.parts : std::vector<int>{b.weight})
      stacked.insert(stacked.end(), f32.byDecl[p][1].data.begin(), f32.byDecl[p][1].data.end());
    std::vector<int64_t> order = rowOrder(b, rows);
    std::vector<uint8_t> bytes;
    auto sink = [&](llvm::ArrayRef<uint8_t> part, size_t offset) {
      EXPECT_EQ(offset, bytes.size());
      bytes.insert(bytes.end(), part.begin(), part.end());
      return llvm::Error::success();
    };
    ASSERT_FALSE(bool(streamWeight(m, fx->ckpt, b.weight, 1, b.dtype, 1000, sink, order, nullptr, gamma)));
    ASSERT_EQ(bytes.size(), size_t(rows * cols * 2)) << b.name;
    int changed = 0;
    for (int64_t r = 0; r < rows; ++r) {
      int64_t logical = order.empty() ? r : order[r];
      for (int64_t c = 0; c < cols; ++c) {
        uint16_t h;
        std::memcpy(&h, &bytes[size_t(r * cols + c) * 2], 2);
        float stored = stacked[size_t(logical * cols + c)];
        ASSERT_EQ(h, floatToBf16(stored * gamma[c])) << b.name << " row " << r << " col " << c;
        changed += floatToBf16(stored * gamma[c]) != floatToBf16(stored);
      }
    }
    EXPECT_GT(changed, rows * cols / 2) << b.name << ": the gains must move most elements for this to test them";
    std::vector<float> short_(gamma.begin(), gamma.end() - 1);
    llvm::Error e = streamWeight(m, fx->ckpt, b.weight, 1, b.dtype, 1000, sink, order, nullptr, short_);
    ASSERT_TRUE(bool(e));
    EXPECT_NE(llvm::toString(std::move(e)).find("column gains for"), std::string::npos);
    ++checked;
  }
  EXPECT_EQ(checked, 2) << "the packed q/k/v and gate/up weights of layer 1";
}

// A large f16 weight (2^20 elements a chunk: converted on several threads) arrives as the exact bf16
// rounding of every element, in order, transposed where the IR says so.
TEST(StreamWeight, LargeConversionsSplitOverThreadsStayExact) {
  const int64_t n = 1024, k = 1536;
  std::string text = "model \"big\"\ndim vocab = 16\ndim hidden = " + std::to_string(k) + "\ndim out = " +
                     std::to_string(n) +
                     "\nweight @embed : f16[vocab, hidden] = \"e\"\nweight @w : f16[out, hidden] = transpose \"w\"\n"
                     "graph(%tokens: i32[T], %positions: i32[T]) {\n"
                     "  %x = embedding %tokens, @embed : bf16[T, hidden]\n"
                     "  %y = matmul %x, @w : bf16[T, out]\n  return %y\n}\n";
  auto m = test::parseVerified(text);
  ASSERT_TRUE(m);
  std::mt19937 rng(5);
  std::normal_distribution<float> d(0.f, 1.f);
  auto f16Tensor = [&](std::string name, std::vector<int64_t> shape) {
    OwnedTensor t{std::move(name), StDType::F16, shape, {}};
    for (int64_t i = 0; i < shape[0] * shape[1]; ++i) {
      uint16_t h = floatToF16(d(rng));
      t.data.push_back(uint8_t(h & 0xFF));
      t.data.push_back(uint8_t(h >> 8));
    }
    return t;
  };
  test::TempDir tmp{"minfer-stream"};
  std::vector<OwnedTensor> tensors = {f16Tensor("e", {16, k}), f16Tensor("w", {k, n})}; // w stored [in, out]
  std::string path = tmp.file("m.safetensors");
  ASSERT_FALSE(bool(writeAtomically(path, [&](llvm::raw_ostream &os) { return writeSafetensors(os, path, tensors); })));
  auto ckpt = Checkpoint::open(path);
  ASSERT_TRUE(bool(ckpt)) << llvm::toString(ckpt.takeError());
  std::vector<uint8_t> bytes;
  auto sink = [&](llvm::ArrayRef<uint8_t> b, size_t offset) {
    EXPECT_EQ(offset, bytes.size());
    bytes.insert(bytes.end(), b.begin(), b.end());
    return llvm::Error::success();
  };
  ASSERT_FALSE(bool(streamWeight(*m, *ckpt, 1, 0, ir::DType::BF16, 4u << 20, sink)));
  ASSERT_EQ(bytes.size(), size_t(n * k * 2));
  const std::vector<uint8_t> &src = tensors[1].data;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) {
      size_t from = size_t(c * n + r) * 2, to = size_t(r * k + c) * 2;
      uint16_t h = uint16_t(src[from] | (src[from + 1] << 8)), got = uint16_t(bytes[to] | (bytes[to + 1] << 8));
      ASSERT_EQ(got, floatToBf16(f16ToFloat(h))) << "row " << r << " col " << c;
    }
}

TEST(EngineLoad, BadInputIsReportedBeforeTheGpu) {
  test::TempDir tmp{"minfer-engine"};
  rt::EngineOptions o;
  EXPECT_NE(loadError(tmp.file("nothing.ir"), o).find("nothing.ir' does not exist"), std::string::npos);

  std::string ir = tmp.file("gpt2.ir");
  auto m = importHF(test::fixtureDir("gpt2"));
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  test::writeFile(ir, ir::printModule(**m));
  EXPECT_NE(loadError(ir, o).find("is an IR file; give its weights"), std::string::npos) << loadError(ir, o);

  o.weights = test::fixtureDir("llama_gqa"); // another model's checkpoint
  std::string e = loadError(ir, o);
  EXPECT_NE(e.find("tensor 'transformer.wte.weight' (weight @wte) is missing"), std::string::npos) << e;

  o.weights = test::fixtureDir("gpt2");
  o.target = "sm_42";
  e = loadError(ir, o);
  EXPECT_NE(e.find("sm_42"), std::string::npos) << e;
}

class BundleLoad : public ::testing::Test {
protected:
  void SetUp() override {
    auto m = importHF(test::fixtureDir("gpt2"));
    ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
    b.irText = ir::printModule(**m);
    b.target = "sm_89";
    b.nvrtcVersion = "13.0";
    b.minferVersion = "0.1.0";
    PlanOptions po;
    po.maxSeq = 64;
    auto plan = buildPlan(**m, *parseTarget("sm_89"), po);
    ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
    b.plan = plan->toJSON(); // no kernels: loading must stop before it would need one
    ASSERT_FALSE(bool(writeBundle(path, b)));
    o.weights = test::fixtureDir("gpt2");
  }
  test::TempDir tmp{"minfer-bundle-load"};
  std::string path = tmp.file("gpt2.mfb");
  Bundle b;
  rt::EngineOptions o;
};

TEST_F(BundleLoad, ABundleForAnotherTargetIsRefused) {
  o.target = "sm_90";
  std::string e = loadError(path, o);
  EXPECT_NE(e.find("the bundle was built for sm_89, but the target is sm_90"), std::string::npos) << e;
}

TEST_F(BundleLoad, ABundleMissingAKernelOfItsPlanIsRefused) {
  o.target = "sm_89";
  std::string e = loadError(path, o);
  EXPECT_NE(e.find("the bundle has no kernel '"), std::string::npos) << e;
}

TEST_F(BundleLoad, ACorruptedBundleIsRefused) {
  std::string bytes = test::readFile(path);
  size_t at = bytes.rfind("model "); // inside the IR text, in the sealed manifest
  ASSERT_NE(at, std::string::npos);
  bytes[at] = 'M';
  test::writeFile(path, bytes);
  std::string e = loadError(path, o);
  EXPECT_NE(e.find(path), std::string::npos) << e;
  EXPECT_NE(e.find("does not match its SHA-256 seal"), std::string::npos) << e;
}

TEST_F(BundleLoad, ABundleNeedsItsWeights) {
  o.weights.clear();
  EXPECT_NE(loadError(path, o).find("is a bundle; give its weights"), std::string::npos) << loadError(path, o);
}

// The public APIs: errors as values, and the driver's message where there is no GPU.
TEST(PublicApi, ErrorsAreValuesWithMessages) {
  Result<Engine> missing = Engine::load("/no/such/model.ir");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().find("/no/such/model.ir' does not exist"), std::string::npos) << missing.error();

  minfer_engine *engine = nullptr;
  minfer_error *err = minfer_engine_load(nullptr, nullptr, &engine);
  ASSERT_NE(err, nullptr);
  EXPECT_NE(std::string(minfer_error_message(err)).find("must not be NULL"), std::string::npos);
  minfer_error_free(err);
  EXPECT_EQ(engine, nullptr);
  size_t count = 0;
  int32_t token = 0;
  err = minfer_generate_batch(nullptr, nullptr, nullptr, 1, nullptr, &token, 1, &count);
  ASSERT_NE(err, nullptr);
  EXPECT_NE(std::string(minfer_error_message(err)).find("minfer_generate_batch: session, prompts, prompt_lens, tokens and "
                                                        "counts must not be NULL"),
            std::string::npos)
      << minfer_error_message(err);
  minfer_error_free(err);
  minfer_engine_free(nullptr); // a no-op
  minfer_session_free(nullptr);
  minfer_error_free(nullptr);

  std::string why;
  bool gpu = cuda::available(&why);
  err = minfer_engine_load(test::fixtureDir("llama_gqa").c_str(), nullptr, &engine);
  if (gpu) {
    ASSERT_EQ(err, nullptr) << minfer_error_message(err);
    EXPECT_EQ(minfer_engine_vocab_size(engine), 512);
    minfer_engine_free(engine);
    return;
  }
  ASSERT_NE(err, nullptr);
  EXPECT_EQ(std::string(minfer_error_message(err)).rfind("no CUDA driver", 0), 0u) << minfer_error_message(err);
  EXPECT_EQ(engine, nullptr) << "no output on failure";
  minfer_error_free(err);
  std::cout << "[ no GPU ] the C API reported: " << why << "\n";
}

// The tokenizer half of the public API needs no GPU. Expected ids and text: HF's, from the fixture's
// cases.json ("hello world"; GPT-2 adds no BOS).
TEST(PublicApi, TokenizersTurnTextIntoIdsAndBack) {
  const std::string dir = std::string(MINFER_SOURCE_DIR) + "/tests/fixtures/tokenizers/tiny_gpt2";
  const std::vector<int32_t> hello = {71, 68, 292, 78, 303, 297};
  Result<Tokenizer> tok = Tokenizer::load(dir);
  ASSERT_TRUE(tok.ok()) << tok.error();
  EXPECT_EQ(tok->vocabSize(), 321);
  EXPECT_EQ(tok->eosTokens(), std::vector<int32_t>{320});
  Result<std::vector<int32_t>> ids = tok->encode("hello world", /*addBos=*/true);
  ASSERT_TRUE(ids.ok()) << ids.error();
  EXPECT_EQ(*ids, hello);
  Result<std::string> text = tok->decode(hello);
  ASSERT_TRUE(text.ok()) << text.error();
  EXPECT_EQ(*text, "hello world");
  EXPECT_NE(tok->decode({321}).error().find("outside the vocabulary"), std::string::npos);
  EXPECT_NE(Tokenizer::load("/no/such/dir").error().find("not a directory"), std::string::npos);

  minfer_tokenizer *t = nullptr;
  minfer_error *err = minfer_tokenizer_load(dir.c_str(), &t);
  ASSERT_EQ(err, nullptr) << minfer_error_message(err);
  int32_t out[8];
  size_t count = 0;
  ASSERT_EQ(minfer_tokenize(t, "hello world", 11, 1, out, 8, &count), nullptr);
  EXPECT_EQ(std::vector<int32_t>(out, out + count), hello);
  err = minfer_tokenize(t, "hello world", 11, 1, out, 3, &count); // room for 3 of 6
  ASSERT_NE(err, nullptr);
  EXPECT_NE(std::string(minfer_error_message(err)).find("6 tokens, room for 3"), std::string::npos);
  minfer_error_free(err);
  char buf[32];
  size_t len = 0;
  ASSERT_EQ(minfer_detokenize(t, hello.data(), hello.size(), buf, sizeof buf, &len), nullptr);
  EXPECT_EQ(std::string(buf, len), "hello world");
  EXPECT_EQ(buf[len], '\0');
  err = minfer_detokenize(t, hello.data(), hello.size(), buf, 11, &len); // no room for the NUL
  ASSERT_NE(err, nullptr);
  EXPECT_NE(std::string(minfer_error_message(err)).find("needs 12 bytes"), std::string::npos);
  minfer_error_free(err);
  EXPECT_EQ(minfer_tokenizer_vocab_size(t), 321);
  minfer_tokenizer_free(t);
  minfer_tokenizer_free(nullptr); // a no-op
}

} // namespace
