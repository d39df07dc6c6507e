// tests/unit/TokenizerTest.cpp — the checkpoint tokenizers against Hugging Face: every case of every
// fixture (tests/fixtures/tokenizers/<style>/cases.json, written by tests/golden/make_tokenizer_fixtures.py
// from HF `tokenizers` / transformers) must encode to HF's ids and decode to HF's text; streaming gives the
// same text; BOS/EOS come from the checkpoint's configs; unsupported files are refused naming the field.
#include "common/TestFiles.h"

#include "io/Nfc.h"
#include "io/Tokenizer.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

using namespace minfer;
using namespace minfer::tok;

namespace {

namespace json = llvm::json;

std::string fixtureDir(llvm::StringRef style) {
  return std::string(MINFER_SOURCE_DIR) + "/tests/fixtures/tokenizers/" + style.str();
}

struct Case {
  std::string text, decoded;
  std::vector<int32_t> ids;
  std::optional<std::vector<int32_t>> withSpecials;
};

std::vector<int32_t> idsOf(const json::Array &a) {
  std::vector<int32_t> out;
  for (const json::Value &v : a) out.push_back(int32_t(*v.getAsInteger()));
  return out;
}

std::vector<Case> readCases(llvm::StringRef style) {
  std::vector<Case> out;
  auto buf = llvm::MemoryBuffer::getFile(fixtureDir(style) + "/cases.json");
  if (!buf) {
    ADD_FAILURE() << "no cases.json for " << style.str();
    return out;
  }
  auto v = json::parse((*buf)->getBuffer());
  if (!v || !v->getAsArray()) {
    ADD_FAILURE() << "cases.json of " << style.str() << " is not a JSON list";
    return out;
  }
  for (const json::Value &c : *v->getAsArray()) {
    const json::Object &o = *c.getAsObject();
    Case k{o.getString("text")->str(), o.getString("decoded")->str(), idsOf(*o.getArray("ids")), std::nullopt};
    if (const json::Array *w = o.getArray("ids_with_specials")) k.withSpecials = idsOf(*w);
    out.push_back(std::move(k));
  }
  return out;
}

// The text as a JSON string: escapes make control and invisible characters readable in a failure.
std::string asJson(const std::string &text) { return llvm::formatv("{0}", json::Value(text)).str(); }

std::string join(llvm::ArrayRef<int32_t> ids) {
  std::string s;
  for (int32_t id : ids) s += (s.empty() ? "" : ",") + std::to_string(id);
  return s;
}

class TokenizerFixture : public ::testing::TestWithParam<const char *> {};

TEST_P(TokenizerFixture, EveryCaseGivesHuggingFacesIdsAndText) {
  auto tok = loadTokenizer(fixtureDir(GetParam()));
  ASSERT_TRUE(bool(tok)) << llvm::toString(tok.takeError());
  std::vector<Case> cases = readCases(GetParam());
  ASSERT_GT(cases.size(), 20u);
  int failures = 0;
  for (const Case &c : cases) {
    auto ids = (*tok)->encode(c.text);
    ASSERT_TRUE(bool(ids)) << llvm::toString(ids.takeError());
    auto text = (*tok)->decode(c.ids);
    ASSERT_TRUE(bool(text)) << llvm::toString(text.takeError());
    if (*ids != c.ids || *text != c.decoded) ++failures;
    EXPECT_EQ(join(*ids), join(c.ids)) << "encoding " << asJson(c.text);
    EXPECT_EQ(*text, c.decoded) << "decoding the ids of " << asJson(c.text);
    if (c.withSpecials) {
      auto prompt = (*tok)->encodePrompt(c.text);
      ASSERT_TRUE(bool(prompt)) << llvm::toString(prompt.takeError());
      EXPECT_EQ(join(*prompt), join(*c.withSpecials)) << "with BOS as the checkpoint adds it: " << asJson(c.text);
    }
  }
  EXPECT_EQ(failures, 0) << "of " << cases.size() << " cases";
}

// Hand-picked id sequences (decode_cases.json): bytes of a character split over tokens or not UTF-8 at all,
// special tokens between them; HF's text with skip_special_tokens=False (minfer always keeps them).
TEST_P(TokenizerFixture, DecodeCasesGiveHuggingFacesText) {
  auto tok = loadTokenizer(fixtureDir(GetParam()));
  ASSERT_TRUE(bool(tok)) << llvm::toString(tok.takeError());
  auto buf = llvm::MemoryBuffer::getFile(fixtureDir(GetParam()) + "/decode_cases.json");
  ASSERT_TRUE(bool(buf));
  auto v = json::parse((*buf)->getBuffer());
  ASSERT_TRUE(v && v->getAsArray());
  int checked = 0;
  for (const json::Value &c : *v->getAsArray()) {
    const json::Object &o = *c.getAsObject();
    if (o.getBoolean("skip_special_tokens").getValueOr(true)) continue;
    std::vector<int32_t> ids = idsOf(*o.getArray("ids"));
    auto text = (*tok)->decode(ids);
    ASSERT_TRUE(bool(text)) << llvm::toString(text.takeError());
    EXPECT_EQ(asJson(*text), asJson(o.getString("decoded")->str())) << "ids " << join(ids);
    ++checked;
  }
  EXPECT_GT(checked, 10);
}

// Streaming: the pieces pushed one token at a time concatenate to the whole decode, and no piece ends in
// the middle of a UTF-8 sequence.
TEST_P(TokenizerFixture, StreamingGivesTheWholeTextInValidPieces) {
  auto tok = loadTokenizer(fixtureDir(GetParam()));
  ASSERT_TRUE(bool(tok)) << llvm::toString(tok.takeError());
  for (const Case &c : readCases(GetParam())) {
    TextStream stream(**tok);
    std::string printed;
    for (int32_t id : c.ids) {
      auto piece = stream.push(id);
      ASSERT_TRUE(bool(piece)) << llvm::toString(piece.takeError());
      EXPECT_EQ(utf8::firstInvalid(*piece), std::string::npos) << asJson(c.text);
      printed += *piece;
    }
    auto rest = stream.finish();
    ASSERT_TRUE(bool(rest));
    printed += *rest;
    EXPECT_EQ(printed, c.decoded) << "streaming " << asJson(c.text);
  }
}

INSTANTIATE_TEST_SUITE_P(Styles, TokenizerFixture,
                         ::testing::Values("gpt2", "gpt2_merges_strings", "tiny_gpt2", "llama3", "qwen2", "llama2_sp"),
                         [](const auto &info) { return std::string(info.param); });

TEST(Tokenizer, SpecialTokensComeFromTheCheckpointConfigs) {
  auto gpt2 = loadTokenizer(fixtureDir("gpt2"));
  ASSERT_TRUE(bool(gpt2)) << llvm::toString(gpt2.takeError());
  EXPECT_FALSE((*gpt2)->special.addBos);
  ASSERT_EQ((*gpt2)->special.eos.size(), 1u);
  EXPECT_EQ((*gpt2)->decode((*gpt2)->special.eos).get(), "<|endoftext|>");

  auto llama3 = loadTokenizer(fixtureDir("llama3"));
  ASSERT_TRUE(bool(llama3)) << llvm::toString(llama3.takeError());
  EXPECT_TRUE((*llama3)->special.addBos);
  ASSERT_TRUE((*llama3)->special.bos);
  EXPECT_EQ((*llama3)->decode({*(*llama3)->special.bos}).get(), "<|begin_of_text|>");
  // generation_config.json's list: the end of text and the end of a turn.
  ASSERT_EQ((*llama3)->special.eos.size(), 2u);
  EXPECT_EQ((*llama3)->decode((*llama3)->special.eos).get(), "<|end_of_text|><|eot_id|>");
}

TEST(Tokenizer, Utf8LossyReplacesEachMaximalInvalidSubpart) {
  // Rust's String::from_utf8_lossy, which HF's decode uses.
  EXPECT_EQ(utf8::lossy("a\xC3"), "a\xEF\xBF\xBD");                             // cut short at the end
  EXPECT_EQ(utf8::lossy("\xE2\x82"), "\xEF\xBF\xBD");                           // one subpart, one U+FFFD
  EXPECT_EQ(utf8::lossy("\xE2\x82\xAC"), "\xE2\x82\xAC");                       // the euro sign, whole
  EXPECT_EQ(utf8::lossy("\xF0\x80\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"); // an overlong lead: each byte
  EXPECT_EQ(utf8::lossy("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"); // a surrogate: each byte
  EXPECT_EQ(utf8::lossy("\xFF" "b"), "\xEF\xBF\xBD" "b");
  EXPECT_EQ(utf8::firstInvalid("ok \xC3\xA9 \xC3"), 6u);
  EXPECT_EQ(utf8::firstInvalid("ok \xC3\xA9"), std::string::npos);
}

// Expected values from Python's unicodedata.normalize("NFC", ...), Unicode 14.
TEST(Tokenizer, NfcComposesReordersAndKeepsExclusions) {
  EXPECT_EQ(nfc("e\u0301"), "\u00e9");                       // e + acute -> é
  EXPECT_EQ(nfc("\u212b"), "\u00c5");                        // ANGSTROM SIGN, a singleton -> Å
  EXPECT_EQ(nfc("\u1112\u1161\u11ab"), "\ud55c");            // Hangul jamo L V T -> 한
  EXPECT_EQ(nfc("q\u0307\u0323"), "q\u0323\u0307");          // marks ordered by combining class
  EXPECT_EQ(nfc("\u1e0b\u0323"), "\u1e0d\u0307");            // the dot below composes first
  EXPECT_EQ(nfc("\u0958"), "\u0915\u093c");                  // a composition exclusion stays decomposed
  EXPECT_EQ(nfc("a\u0301\u0301"), "\u00e1\u0301");           // the second acute is blocked by the first
  EXPECT_EQ(nfc("\u0344"), "\u0308\u0301");                  // a non-starter decomposition
  EXPECT_EQ(nfc("plain ASCII, \u00e9t\u00e9"), "plain ASCII, \u00e9t\u00e9");
}

class TokenizerFiles : public test::TempDirTest {
protected:
  TokenizerFiles() : test::TempDirTest("minfer-tok") {}
  // The gpt2 fixture's tokenizer.json with `edit` applied, in a directory of its own.
  std::string editedGpt2(llvm::function_ref<void(json::Object &)> edit) {
    auto buf = llvm::MemoryBuffer::getFile(fixtureDir("gpt2") + "/tokenizer.json");
    EXPECT_TRUE(bool(buf));
    auto v = json::parse((*buf)->getBuffer());
    EXPECT_TRUE(bool(v));
    edit(*v->getAsObject());
    std::string text;
    llvm::raw_string_ostream os(text);
    os << *v;
    writeRaw("tokenizer.json", os.str());
    return Dir;
  }
};

TEST_F(TokenizerFiles, UnsupportedPartsAreRefusedNamingTheField) {
  EXPECT_TRUE(test::failsMentioning(loadTokenizer(editedGpt2([](json::Object &o) {
                                      (*o.getObject("pre_tokenizer"))["type"] = "Whitespace";
                                    })),
                                    {"tokenizer.json", "pre_tokenizer.type", "Whitespace"}));
  EXPECT_TRUE(test::failsMentioning(loadTokenizer(editedGpt2([](json::Object &o) {
                                      o["normalizer"] = json::Object{{"type", "NFKC"}};
                                    })),
                                    {"normalizer.type", "NFKC"}));
  EXPECT_TRUE(test::failsMentioning(loadTokenizer(editedGpt2([](json::Object &o) {
                                      (*o.getObject("model"))["type"] = "WordPiece";
                                    })),
                                    {"model.type", "WordPiece"}));
  EXPECT_TRUE(test::failsMentioning(loadTokenizer(editedGpt2([](json::Object &o) {
                                      o.getObject("model")->getArray("merges")->push_back("no_such_token x");
                                    })),
                                    {"model.merges[", "not in the vocabulary"}));
}

// Llama 2's tokenizer.json (a SentencePiece BPE with byte fallback, as transformers converts it) is read
// from its tokenizer.model, which the checkpoints ship beside it; alone, it is refused naming the field.
TEST(Tokenizer, ASentencePieceTokenizerJsonAloneIsRefusedNamingTheField) {
  EXPECT_TRUE(test::failsMentioning(loadTokenizer(fixtureDir("llama2_json")),
                                    {"llama2_json/tokenizer.json", "model.byte_fallback", "tokenizer.model"}));
}

TEST_F(TokenizerFiles, ADirectoryWithoutATokenizerIsNamed) {
  EXPECT_TRUE(test::failsMentioning(loadTokenizer(Dir), {"no tokenizer", "tokenizer.json"}));
  EXPECT_TRUE(test::failsMentioning(loadTokenizer(path("missing")), {"missing", "not a directory"}));
}

TEST(Tokenizer, TextThatIsNotUtf8AndIdsOutsideTheVocabularyAreErrors) {
  auto tok = loadTokenizer(fixtureDir("gpt2"));
  ASSERT_TRUE(bool(tok)) << llvm::toString(tok.takeError());
  EXPECT_TRUE(test::failsMentioning((*tok)->encode("ab\xC3("), {"not valid UTF-8", "byte 2"}));
  EXPECT_TRUE(test::failsMentioning((*tok)->decode({1, int32_t((*tok)->vocabSize())}), {"outside the vocabulary"}));
}

} // namespace
