// tests/unit/HFImportTest.cpp — import-hf on the real config.json files of the supported families
// (tests/importer/configs, as published on the Hugging Face hub) and on broken configs.
//
// The expected dims below are read off each published config by hand (tests/importer/configs/EXPECTED.md),
// not produced by the importer.
#include "common/TestFiles.h"
#include "common/TestModels.h"

#include "io/HFImport.h"
#include "ir/Printer.h"

#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

using namespace minfer;

namespace {

llvm::Expected<std::unique_ptr<ir::Module>> importText(const std::string &json, const std::string &path = "config.json") {
  auto parsed = llvm::json::parse(json);
  if (!parsed) return parsed.takeError();
  auto text = importHFConfig(*parsed->getAsObject(), path, nullptr);
  if (!text) return text.takeError();
  return ir::parseModuleString(*text, "imported.ir");
}

std::string readConfig(const std::string &name) {
  auto buf = llvm::MemoryBuffer::getFile(std::string(MINFER_SOURCE_DIR) + "/tests/importer/configs/" + name);
  EXPECT_TRUE(bool(buf)) << name;
  return buf ? (*buf)->getBuffer().str() : "";
}

struct Expected {
  const char *file;
  int64_t vocab, hidden, layers, heads, kvHeads, headDim, ffn;
  bool tied;
  const char *weightDType;
  bool qkvBias;
  double theta;
  const char *schedule; // default, linear, llama3
  double factor, eps;
};

void PrintTo(const Expected &x, std::ostream *os) { *os << x.file; }

class RealConfigs : public ::testing::TestWithParam<Expected> {};

const ir::Op *findOp(const ir::Module &m, ir::OpKind kind) {
  const ir::Op *found = nullptr;
  ir::forEachOp(m, [&](const ir::Op &op, int64_t) {
    if (!found && op.kind == kind) found = &op;
  });
  return found;
}

TEST_P(RealConfigs, ImportsWithTheHubDims) {
  const Expected &x = GetParam();
  auto m = importText(readConfig(x.file), x.file);
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  ASSERT_FALSE(bool(ir::verifyModule(**m)));
  auto dim = [&](const char *n) { return (*m)->findDim(n) ? (*m)->findDim(n)->value : -1; };
  EXPECT_EQ(dim("vocab"), x.vocab);
  EXPECT_EQ(dim("hidden"), x.hidden);
  EXPECT_EQ(dim("layers"), x.layers);
  EXPECT_EQ(dim("heads"), x.heads);
  EXPECT_EQ(dim("head_dim"), x.headDim);
  EXPECT_EQ(dim("ffn"), x.ffn);
  const ir::Op *attn = findOp(**m, ir::OpKind::Attention);
  ASSERT_NE(attn, nullptr);
  EXPECT_EQ(attn->intAttr(ir::Attr::Heads), x.heads);
  EXPECT_EQ(attn->intAttr(ir::Attr::KvHeads), x.kvHeads);
  EXPECT_EQ(attn->intAttr(ir::Attr::HeadDim), x.headDim);
  // Tied: the logits come from the embedding table, and no lm_head weight is declared.
  EXPECT_EQ((*m)->findWeight("lm_head") < 0, x.tied);
  EXPECT_EQ(ir::dtypeName((*m)->weights[0].type.dtype), x.weightDType);
  EXPECT_EQ((*m)->findWeight("bq") >= 0, x.qkvBias);
  (*m)->source.reset(); // printing must not depend on the source buffer
  if (x.schedule) {
    const ir::Op *rope = findOp(**m, ir::OpKind::Rope);
    ASSERT_NE(rope, nullptr);
    EXPECT_EQ(rope->floatAttr(ir::Attr::Theta), x.theta);
    EXPECT_EQ(ir::enumText(rope->enumAttr<ir::RopeSchedule>(ir::Attr::Schedule)), x.schedule);
    EXPECT_EQ(rope->floatAttr(ir::Attr::Factor, 1.0), x.factor);
    const ir::Op *norm = findOp(**m, ir::OpKind::RmsNorm);
    ASSERT_NE(norm, nullptr);
    EXPECT_EQ(norm->floatAttr(ir::Attr::Eps), x.eps);
  } else {
    EXPECT_EQ(findOp(**m, ir::OpKind::Rope), nullptr);
    const ir::Op *norm = findOp(**m, ir::OpKind::LayerNorm);
    ASSERT_NE(norm, nullptr);
    EXPECT_EQ(norm->floatAttr(ir::Attr::Eps), x.eps);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Hub, RealConfigs,
    ::testing::Values(
        //        file                              vocab   hidden layers heads kv hd   ffn    tied   dtype  bias theta     schedule  factor eps
        Expected{"tinyllama-1.1b-chat-v1.0.json", 32000, 2048, 22, 32, 4, 64, 5632, false, "bf16", false, 10000, "default", 1, 1e-5},
        Expected{"llama-2-7b-hf.json", 32000, 4096, 32, 32, 32, 128, 11008, false, "f16", false, 10000, "default", 1, 1e-5},
        Expected{"llama-3.1-8b.json", 128256, 4096, 32, 32, 8, 128, 14336, false, "bf16", false, 500000, "llama3", 8, 1e-5},
        Expected{"llama-3.2-1b.json", 128256, 2048, 16, 32, 8, 64, 8192, true, "bf16", false, 500000, "llama3", 32, 1e-5},
        Expected{"llama-3.2-1b-v5.json", 128256, 2048, 16, 32, 8, 64, 8192, true, "bf16", false, 500000, "llama3", 32, 1e-5},
        Expected{"mistral-7b-instruct-v0.3.json", 32768, 4096, 32, 32, 8, 128, 14336, false, "bf16", false, 1000000, "default", 1, 1e-5},
        Expected{"qwen2.5-0.5b.json", 151936, 896, 24, 14, 2, 64, 4864, true, "bf16", true, 1000000, "default", 1, 1e-6},
        Expected{"qwen2.5-0.5b-v5.json", 151936, 896, 24, 14, 2, 64, 4864, true, "bf16", true, 1000000, "default", 1, 1e-6},
        Expected{"qwen2.5-7b.json", 152064, 3584, 28, 28, 4, 128, 18944, false, "bf16", true, 1000000, "default", 1, 1e-6},
        Expected{"smollm-135m.json", 49152, 576, 30, 9, 3, 64, 1536, true, "f32", false, 10000, "default", 1, 1e-5},
        Expected{"gpt2.json", 50257, 768, 12, 12, 12, 64, 3072, true, "f32", false, 0, nullptr, 1, 1e-5}),
    [](const auto &info) {
      std::string n = info.param.file;
      n = n.substr(0, n.size() - 5);
      for (char &c : n)
        if (!isalnum(static_cast<unsigned char>(c))) c = '_';
      return n;
    });

// config.json nested a million levels deep: an error naming the file, not a stack overflow.
TEST(HFImport, DeeplyNestedConfigIsAnErrorNotACrash) {
  test::TempDir tmp;
  tmp.write("config.json", "{\"a\": " + std::string(1000000, '[') + std::string(1000000, ']') + "}");
  EXPECT_TRUE(test::failsMentioning(importHF(tmp.path()), {"config.json", "nested deeper than 128 levels"}));
}

TEST(HFImport, RejectsAnActiveSlidingWindowNamingTheField) {
  auto m = importText(readConfig("mistral-7b-v0.1.json"), "mistral/config.json");
  ASSERT_FALSE(bool(m));
  EXPECT_EQ(llvm::toString(m.takeError()),
            "mistral/config.json: field 'sliding_window' is 4096, below max_position_embeddings 32768; minfer has "
            "no sliding-window attention");
}

// A small valid Llama config; each broken variant below changes one thing.
std::string llama(const std::string &extra) {
  return R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 64, "hidden_size": 32, "intermediate_size": 48,
  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2)" + extra + "}";
}

std::string importError(const std::string &json) {
  auto m = importText(json);
  return m ? "imported" : llvm::toString(m.takeError());
}

TEST(HFImport, EachUnsupportedSettingIsItsOwnError) {
  struct Case { std::string json, error; };
  std::vector<Case> cases = {
      {llama(R"(, "rope_scaling": {"rope_type": "yarn", "factor": 4.0})"),
       "rope_scaling.rope_type is 'yarn'; minfer supports default, linear and llama3"},
      {llama(R"(, "rope_parameters": {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0})"),
       "rope_parameters.rope_type is 'dynamic'"},
      {llama(R"(, "rope_scaling": {"type": "linear"})"), "rope_scaling: missing field 'factor' (a number)"},
      {llama(R"(, "hidden_act": "gelu_quick")"), "field 'hidden_act' is 'gelu_quick'"},
      {llama(R"(, "layer_types": ["full_attention", "sliding_attention"])"),
       "layer_types[1] is not \"full_attention\""},
      {llama(R"(, "num_key_value_heads": 3)"), "num_attention_heads 4 is not a multiple of num_key_value_heads 3"},
      {llama(R"(, "hidden_size": "32")"), "field 'hidden_size' must be an integer"},
      {llama(R"(, "torch_dtype": "float8_e4m3fn")"), "field 'dtype' is 'float8_e4m3fn'"},
      {llama(R"(, "rope_scaling": {"rope_type": "default", "partial_rotary_factor": 0.5})"),
       "rope_scaling.partial_rotary_factor is 0.5; minfer rotates whole heads only"},
      {R"({"architectures": ["FalconForCausalLM"]})", "architecture 'FalconForCausalLM' is not supported"},
      {R"({"vocab_size": 10})", "no 'architectures' and model_type '' is not supported"},
      {R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 64})", "missing field 'hidden_size' (an integer)"},
      {R"({"architectures": ["GPT2LMHeadModel"], "vocab_size": 64, "n_embd": 32, "n_layer": 2, "n_head": 4,
         "n_positions": 16, "scale_attn_by_inverse_layer_idx": true})",
       "field 'scale_attn_by_inverse_layer_idx' is true"},
      // Sizes above ir/Limits.h: once negative byte counts (vocab 2^62) or minutes of planning (1e6 layers).
      {llama(R"(, "vocab_size": 4611686018427387904)"), "field 'vocab_size' is 4611686018427387904, above minfer's limit of 16777216"},
      {llama(R"(, "num_hidden_layers": 1000000)"), "field 'num_hidden_layers' is 1000000, above minfer's limit of 1024"},
      {llama(R"(, "num_hidden_layers": 3000000000)"), "field 'num_hidden_layers' is 3000000000, above minfer's limit of 1024"},
      {llama(R"(, "head_dim": 1073741824)"), "field 'head_dim' is 1073741824, above minfer's limit of 1024"},
  };
  for (const Case &c : cases) {
    std::string err = importError(c.json);
    EXPECT_NE(err.find(c.error), std::string::npos) << "config: " << c.json << "\nerror: " << err;
    EXPECT_EQ(err.rfind("config.json: ", 0), 0u) << err;
  }
}

TEST(HFImport, AcceptsTheFieldsItHonours) {
  // Explicit head_dim different from hidden / heads, MQA, biases, linear rope, a window that never slides.
  auto m = importText(llama(R"(, "num_key_value_heads": 1, "head_dim": 16, "attention_bias": true, "mlp_bias": true,
      "rope_scaling": {"type": "linear", "factor": 2.0}, "sliding_window": 4096, "max_position_embeddings": 2048)"));
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  EXPECT_EQ((*m)->findDim("q_dim")->value, 64);
  EXPECT_EQ((*m)->findDim("kv_dim")->value, 16);
  for (const char *w : {"bq", "bk", "bv", "bo", "b_gate", "b_up", "b_down", "lm_head"})
    EXPECT_GE((*m)->findWeight(w), 0) << w;
  const ir::Op *rope = findOp(**m, ir::OpKind::Rope);
  EXPECT_EQ(rope->enumAttr<ir::RopeSchedule>(ir::Attr::Schedule), ir::RopeSchedule::Linear);
  EXPECT_EQ(rope->floatAttr(ir::Attr::Factor), 2.0);
}

TEST(HFImport, GPT2UsesConv1DTransposedWeightsAndActivationChoice) {
  auto m = importText(R"({"architectures": ["GPT2LMHeadModel"], "vocab_size": 64, "n_embd": 32, "n_layer": 2,
      "n_head": 4, "n_positions": 16, "activation_function": "gelu", "tie_word_embeddings": false})");
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  const ir::WeightDecl &w = (*m)->weights[(*m)->findWeight("c_attn_w")];
  EXPECT_TRUE(w.transposed);
  EXPECT_EQ(w.tensor, "transformer.h.{l}.attn.c_attn.weight");
  EXPECT_NE(findOp(**m, ir::OpKind::GeluErf), nullptr);
  EXPECT_GE((*m)->findWeight("lm_head"), 0);
  EXPECT_EQ((*m)->findDim("ffn")->value, 128); // n_inner defaults to 4 * n_embd
}

} // namespace
