// tests/unit/ParserTest.cpp — parsing the examples, printing round trips, and structure of what is parsed.
#include "common/TestModels.h"

#include "ir/Diagnostics.h"
#include "ir/Printer.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace minfer;

namespace {

class Examples : public ::testing::TestWithParam<const char *> {};

TEST_P(Examples, ParseVerifyAndRoundTrip) {
  std::string path = std::string(MINFER_SOURCE_DIR) + "/examples/" + GetParam();
  auto m = ir::parseModuleFile(path);
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  ASSERT_FALSE(bool(ir::verifyModule(**m)));
  std::string printed = ir::printModule(**m);
  auto again = test::parseVerified(printed);
  ASSERT_TRUE(again);
  EXPECT_EQ(ir::printModule(*again), printed);
  EXPECT_EQ((*m)->values.size(), again->values.size());
  EXPECT_EQ((*m)->weights.size(), again->weights.size());
}

INSTANTIATE_TEST_SUITE_P(AllExamples, Examples,
                         ::testing::Values("gpt2-124m.ir", "tinyllama-1.1b.ir", "llama-2-7b.ir", "qwen2.5-0.5b.ir",
                                           "llama-3.2-1b.ir"),
                         [](const auto &info) {
                           std::string n = info.param;
                           for (char &c : n)
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

TEST(Parser, ReadsDimsWeightsAndTheRepeatBlock) {
  auto m = test::parseVerified(test::tinyLlamaText());
  ASSERT_TRUE(m);
  EXPECT_EQ(m->name, "tiny");
  ASSERT_NE(m->findDim("kv_dim"), nullptr);
  EXPECT_EQ(m->findDim("kv_dim")->value, 8);
  int wk = m->findWeight("wk");
  ASSERT_GE(wk, 0);
  EXPECT_TRUE(m->weights[wk].perLayer());
  EXPECT_EQ(m->weights[wk].tensorName(1), "l1.wk");
  EXPECT_FALSE(m->weights[m->findWeight("embed")].perLayer());
  ASSERT_EQ(m->items.size(), 4u); // embedding, repeat, rms_norm, matmul
  const auto &r = std::get<ir::Repeat>(m->items[1]);
  EXPECT_EQ(r.count.value, 2);
  EXPECT_EQ(r.body.size(), 16u);
  EXPECT_EQ(m->numKvSlots(), 2);
  std::vector<int64_t> counts = m->weightLayerCounts();
  EXPECT_EQ(counts[wk], 2);
  EXPECT_EQ(counts[m->findWeight("nf")], 1);
}

TEST(Parser, DimsCompareByValueAndPrintByName) {
  auto m = test::parseVerified(test::tinyLlamaText());
  ASSERT_TRUE(m);
  const ir::Type &t = m->weights[m->findWeight("wk")].type;
  EXPECT_EQ(t.str(), "bf16[kv_dim, hidden]");
  ir::Type lit{ir::DType::BF16, {ir::Dim::constant(8), ir::Dim::constant(16)}};
  EXPECT_EQ(t, lit);
  ir::Type tokens{ir::DType::BF16, {ir::Dim::tokens(), ir::Dim::constant(16)}};
  ir::Type context{ir::DType::BF16, {ir::Dim::context(), ir::Dim::constant(16)}};
  EXPECT_NE(tokens, context);
}

TEST(Parser, ErrorsCarryFileLineColumnAndACaret) {
  auto m = ir::parseModuleString("model \"m\"\ndim d = 4\ndim d = 5\n", "dup.ir");
  ASSERT_FALSE(bool(m));
  std::string text = ir::renderError(m.takeError());
  EXPECT_EQ(text, "dup.ir:3:5: error: redefinition of dim 'd'\n"
                  "dim d = 5\n"
                  "    ^\n"
                  "dup.ir:2:5: note: previous definition is here\n"
                  "dim d = 4\n"
                  "    ^\n");
}

TEST(Parser, ErrorMessagesAreBoundedAndPrintable) {
  // A 1 MB identifier: the message quotes it and the diagnostic shows its line, both clipped.
  std::string huge(1 << 20, 'x');
  auto m = ir::parseModuleString("model \"m\"\n" + huge + "\n", "huge.ir");
  ASSERT_FALSE(bool(m));
  std::string text = ir::renderError(m.takeError());
  EXPECT_LT(text.size(), ir::kMaxMessageLines * (ir::kMaxLineBytes + 32));
  EXPECT_NE(text.find("huge.ir:2:1: error:"), std::string::npos) << text;
  EXPECT_NE(text.find("more bytes]"), std::string::npos) << text;

  // Binary input: control bytes and invalid UTF-8 come out escaped, valid UTF-8 stays as it is.
  EXPECT_EQ(ir::clipMessage(std::string("a\x01" "b\xff\xc3\xa9\x1b[2J", 10)), "a\\x01b\\xff\xc3\xa9\\x1b[2J");
  EXPECT_EQ(ir::clipMessage("one\ntwo\n"), "one\ntwo\n");

  // Many lines: the first kMaxMessageLines are kept, the rest is counted.
  std::string lines;
  for (int i = 0; i < 1000; ++i) lines += "line\n";
  std::string clipped = ir::clipMessage(lines);
  EXPECT_EQ(std::count(clipped.begin(), clipped.end(), '\n'), long(ir::kMaxMessageLines) + 1);
  EXPECT_NE(clipped.find("... [" + std::to_string(5 * (1000 - ir::kMaxMessageLines)) + " more bytes]"),
            std::string::npos)
      << clipped;
}

TEST(Parser, MissingFileIsAnErrorNamingIt) {
  auto m = ir::parseModuleFile("/nonexistent/model.ir");
  ASSERT_FALSE(bool(m));
  EXPECT_NE(llvm::toString(m.takeError()).find("cannot read '/nonexistent/model.ir'"), std::string::npos);
}

TEST(Parser, EmptyAndTruncatedInputsAreErrors) {
  for (const char *text : {"", "model", "model \"m\" graph(", "model \"m\" graph(%tokens: i32[T]) {",
                           "model \"m\" dim x = 99999999999999999999999"}) {
    auto m = ir::parseModuleString(text, "t.ir");
    EXPECT_FALSE(bool(m)) << text;
    if (!m) {
      EXPECT_NE(llvm::toString(m.takeError()).find("t.ir:1:"), std::string::npos) << text;
    }
  }
}

TEST(Printer, FloatsReadBackExactly) {
  for (double d : {1e-5, 1e-6, 10000.0, 500000.0, 1e6, 0.125, 1.0 / 3.0, 1e-12, 3e20}) {
    std::string s = ir::formatFloat(d);
    EXPECT_EQ(std::stod(s), d) << s;
    EXPECT_NE(s.find_first_of(".e"), std::string::npos) << s;
  }
  EXPECT_EQ(ir::formatFloat(500000.0), "500000.0");
  EXPECT_EQ(ir::formatFloat(1e-5), "0.00001");
}

} // namespace
