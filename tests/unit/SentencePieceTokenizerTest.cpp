// SentencePieceTokenizerTest.cpp — io/SentencePieceTokenizer (tokenizer.model) against Hugging Face: every
// case of tests/fixtures/tokenizers/llama2_sp (written by tests/golden/make_tokenizer_fixtures.py) encodes
// to HF's ids and decodes to HF's text, also the id sequences that no text encodes to; the tokenizer_config
// flags (legacy=false, added tokens) change encoding as transformers' LlamaTokenizer does; bad model files
// and bad text are errors that say what is wrong.
#include "io/TokenizerFormats.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MemoryBuffer.h"

#include "common/TestFiles.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace minfer;
using namespace minfer::tok;

namespace {

namespace json = llvm::json;
using llvm::StringRef;
using test::failsMentioning;

std::string fixtureDir() { return std::string(MINFER_SOURCE_DIR) + "/tests/fixtures/tokenizers/llama2_sp"; }
std::string modelPath() { return fixtureDir() + "/tokenizer.model"; }

json::Value readJson(const std::string &path) {
  auto buf = llvm::MemoryBuffer::getFile(path);
  if (!buf) {
    ADD_FAILURE() << "cannot read " << path;
    return nullptr;
  }
  auto v = json::parse((*buf)->getBuffer());
  if (!v) {
    ADD_FAILURE() << path << ": " << llvm::toString(v.takeError());
    return nullptr;
  }
  return std::move(*v);
}

// The fixture's tokenizer_config.json, with `edit` applied.
json::Object fixtureConfig(llvm::function_ref<void(json::Object &)> edit = [](json::Object &) {}) {
  json::Value v = readJson(fixtureDir() + "/tokenizer_config.json");
  json::Object o = v.getAsObject() ? std::move(*v.getAsObject()) : json::Object();
  edit(o);
  return o;
}

std::unique_ptr<Tokenizer> load(const json::Object *config) {
  auto t = loadSentencePieceTokenizer(modelPath(), config);
  if (!t) {
    ADD_FAILURE() << llvm::toString(t.takeError());
    return nullptr;
  }
  return std::move(*t);
}

std::string show(llvm::ArrayRef<int32_t> ids) {
  std::string s = "[";
  for (int32_t id : ids) s += (s.size() > 1 ? ", " : "") + std::to_string(id);
  return s + "]";
}

// A JSON string literal of `s`, so that spaces, tabs and CRs in a failure message can be seen.
std::string shown(StringRef s) {
  std::string out;
  llvm::raw_string_ostream os(out);
  os << json::Value(s.str());
  return os.str();
}

// Every case of the fixture (cases.json, decode_cases.json) and streaming are checked through loadTokenizer
// with the other styles (TokenizerTest.cpp, Styles/TokenizerFixture.*/llama2_sp); these tests cover what is
// particular to SentencePiece.


TEST(SentencePieceTokenizer, DescribesItselfAndItsDefaults) {
  std::unique_ptr<Tokenizer> tok;
  json::Object config = fixtureConfig();
  ASSERT_TRUE(tok = load(&config));
  EXPECT_EQ(tok->describe(), "tokenizer.model (SentencePiece BPE, " + std::to_string(tok->vocabSize()) + " pieces)");
  EXPECT_GE(tok->vocabSize(), 259); // <unk> <s> </s> and the 256 byte pieces
  EXPECT_EQ(tok->special.bos, std::optional<int32_t>(1));
  EXPECT_EQ(tok->special.eos, std::vector<int32_t>{2});
  EXPECT_TRUE(tok->special.addBos);
  EXPECT_EQ(show(tok->encode("<s>").get()), "[1]");
  EXPECT_EQ(tok->decode({1, 2, 0}).get(), "<s></s><unk>");
}

// Without a tokenizer_config.json the tokenizer is LlamaTokenizer's defaults: <unk> <s> </s> are split out,
// legacy encoding; the same as the fixture's config (which only restates them).
TEST(SentencePieceTokenizer, WithoutAConfigUsesLlamaTokenizersDefaults) {
  std::unique_ptr<Tokenizer> bare, configured;
  json::Object config = fixtureConfig();
  ASSERT_TRUE(bare = load(nullptr));
  ASSERT_TRUE(configured = load(&config));
  for (StringRef text : {"Hello world", "<s>Hi</s> there <unk>", " x", "abc\n\ndef"})
    EXPECT_EQ(show(bare->encode(text).get()), show(configured->encode(text).get())) << shown(text);
}

// legacy=false (transformers 4's slow LlamaTokenizer): one "▁" before the whole text and none after a
// special token, so text with special tokens decodes back to itself; a piece that starts with a space keeps
// exactly that space, so plain text encodes as with legacy=true.
TEST(SentencePieceTokenizer, LegacyFalsePrefixesOnlyTheStartOfTheText) {
  std::unique_ptr<Tokenizer> legacy, modern;
  json::Object legacyConfig = fixtureConfig();
  json::Object modernConfig = fixtureConfig([](json::Object &o) { o["legacy"] = false; });
  ASSERT_TRUE(legacy = load(&legacyConfig));
  ASSERT_TRUE(modern = load(&modernConfig));
  auto roundTrip = [](const Tokenizer &t, StringRef text) { return t.decode(t.encode(text).get()).get(); };
  for (StringRef text : {"Hello world", " Hello", "  two spaces", "a\nb", "x", "don't stop", "\u2581x \u2581"})
    EXPECT_EQ(show(modern->encode(text).get()), show(legacy->encode(text).get())) << shown(text);
  for (StringRef text : {"Hello</s>world", "<s>Hello", "<s> Hello", "a<unk>b</s>", "</s>\n<s>"}) {
    EXPECT_EQ(shown(roundTrip(*modern, text)), shown(text));
    EXPECT_NE(shown(roundTrip(*legacy, text)), shown(text)) << "legacy=true adds a space after a special token";
  }
  // "<s>Hello": the "▁" put before the text is dropped again in front of the special token (decode alone
  // would not show it: the decoder strips one leading space).
  std::vector<int32_t> ids = modern->encode("<s>Hello").get();
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], 1);
}

// Added tokens of tokenizer_config.json beyond <unk> <s> </s>, with HF's AddedToken flags: rstrip / lstrip
// eat the spaces beside the token, single_word splits it out only between spaces. (Checked once against
// transformers 4.57.6's LlamaTokenizer with the same config, not by this test.)
TEST(SentencePieceTokenizer, AddedTokensAreSplitOutWithTheirFlags) {
  json::Object config = fixtureConfig([](json::Object &o) {
    json::Object &atd = *o.getObject("added_tokens_decoder");
    atd["1000"] = json::Object{{"content", "<|user|>"}, {"lstrip", true}, {"rstrip", true}, {"special", false}};
    atd["1001"] = json::Object{{"content", "<|assistant|>"}, {"single_word", true}, {"special", true}};
    o["additional_special_tokens"] = json::Array{"<|assistant|>"};
  });
  std::unique_ptr<Tokenizer> tok;
  ASSERT_TRUE(tok = load(&config));
  EXPECT_EQ(tok->vocabSize(), 1002);
  auto enc = [&](StringRef text) { return tok->encode(text).get(); };
  auto cat = [](std::vector<int32_t> a, llvm::ArrayRef<int32_t> b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  EXPECT_EQ(show(enc("hi <|user|>  there")), show(cat(cat(enc("hi"), {1000}), enc("there"))));
  EXPECT_EQ(show(enc("a <|assistant|> b")), show(cat(cat(enc("a "), {1001}), enc(" b"))));
  EXPECT_EQ(show(enc("a<|assistant|>b")), show(cat(enc("a<|assistant|>"), enc("b"))));
  EXPECT_FALSE(llvm::is_contained(enc("a<|assistant|>b"), 1001));
  EXPECT_EQ(tok->decode({1000, 1001}).get(), "<|user|><|assistant|>");
}

class SentencePieceFiles : public test::TempDirTest {
protected:
  SentencePieceFiles() : TempDirTest("minfer-sp") {}
};

TEST_F(SentencePieceFiles, ACorruptOrMissingModelIsAnErrorNamingTheFile) {
  std::string bad = writeRaw("tokenizer.model", "this is not a SentencePiece model\n");
  EXPECT_TRUE(failsMentioning(loadSentencePieceTokenizer(bad, nullptr), {bad, "not a SentencePiece model"}));
  // Cut short in the middle of a piece.
  std::string model = test::readFile(modelPath());
  ASSERT_GT(model.size(), 1000u);
  writeRaw("tokenizer.model", StringRef(model).take_front(model.size() / 2));
  EXPECT_TRUE(failsMentioning(loadSentencePieceTokenizer(bad, nullptr), {bad, "not a SentencePiece model"}));
  writeRaw("tokenizer.model", "");
  EXPECT_TRUE(failsMentioning(loadSentencePieceTokenizer(bad, nullptr), {bad, "not a SentencePiece model"}));
  std::string missing = path("missing.model");
  EXPECT_TRUE(failsMentioning(loadSentencePieceTokenizer(missing, nullptr), {missing, "cannot read"}));
}

TEST(SentencePieceTokenizer, TextThatIsNotUtf8AndIdsOutsideTheVocabularyAreErrors) {
  std::unique_ptr<Tokenizer> tok;
  ASSERT_TRUE(tok = load(nullptr));
  EXPECT_TRUE(failsMentioning(tok->encode("ab\xC3("), {"not valid UTF-8", "byte 2"}));
  EXPECT_TRUE(failsMentioning(tok->encode("<s>\xFF"), {"not valid UTF-8", "byte 3"}));
  EXPECT_TRUE(failsMentioning(tok->decode({1, int32_t(tok->vocabSize())}), {"outside the vocabulary"}));
  EXPECT_TRUE(failsMentioning(tok->decode({-1}), {"outside the vocabulary"}));
}

TEST(SentencePieceTokenizer, BadConfigFieldsAreNamed) {
  json::Object sampling =
      fixtureConfig([](json::Object &o) { o["sp_model_kwargs"] = json::Object{{"enable_sampling", true}}; });
  EXPECT_TRUE(failsMentioning(loadSentencePieceTokenizer(modelPath(), &sampling),
                              {"tokenizer_config.json", "sp_model_kwargs.enable_sampling"}));
  json::Object legacy = fixtureConfig([](json::Object &o) { o["legacy"] = "yes"; });
  EXPECT_TRUE(failsMentioning(loadSentencePieceTokenizer(modelPath(), &legacy), {"tokenizer_config.json", "'legacy'"}));
  json::Object atd = fixtureConfig([](json::Object &o) {
    (*o.getObject("added_tokens_decoder"))["x"] = json::Object{{"content", "<x>"}};
  });
  EXPECT_TRUE(failsMentioning(loadSentencePieceTokenizer(modelPath(), &atd), {"added_tokens_decoder.x", "token id"}));
}

} // namespace
