// tests/unit/InterpreterTest.cpp — the reference interpreter's op semantics, each against values worked
// out independently here (closed forms, hand computations), plus KV-cache and batch behaviour.
#include "common/TestModels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <sstream>

using namespace minfer;
using minfer::test::parseVerified;

namespace {

// Runs `text` with the named weights (every declared weight must be given) on `tokens`; returns the logits.
ir::Tensor run(const std::string &text, const std::map<std::string, ir::Tensor> &weights,
               std::vector<int32_t> tokens) {
  auto m = parseVerified(text);
  if (!m) return {};
  ir::WeightSet set;
  for (const ir::WeightDecl &w : m->weights) set.byDecl.push_back({weights.at(w.name)});
  auto interp = ir::Interpreter::create(*m, set, 1, 64);
  EXPECT_TRUE(bool(interp)) << (interp ? "" : llvm::toString(interp.takeError()));
  if (!interp) return {};
  auto out = (*interp)->step(0, tokens);
  EXPECT_TRUE(bool(out)) << (out ? "" : llvm::toString(out.takeError()));
  return out ? *out : ir::Tensor();
}

ir::Tensor tensor(std::vector<int64_t> shape, std::vector<float> data) {
  ir::Tensor t(std::move(shape));
  t.data = std::move(data);
  return t;
}

// One op applied to row `tokens` of the table @e [4, 4]: `%y = <op line>` must produce f32[T, 4].
std::string unaryModule(const std::string &opLine, const std::string &extraWeights = "") {
  return "model \"t\"\ndim d = 4\nweight @e : f32[4, d] = \"e\"\n" + extraWeights +
         "graph(%tokens: i32[T], %positions: i32[T]) {\n  %x = embedding %tokens, @e : f32[T, d]\n  " + opLine +
         "\n  return %y\n}\n";
}

const ir::Tensor kTable = tensor({4, 4}, {1, 2, 3, 4, -1, 0.5f, 2, -3, 0.25f, -0.5f, 1.5f, 2.5f, 3, -2, 1, 0});

TEST(InterpreterOps, RmsNormDividesByRootMeanSquare) {
  ir::Tensor g = tensor({4}, {1, 1, 2, 0.5f});
  auto y = run(unaryModule("%y = rms_norm %x, @g {eps = 1e-6} : f32[T, d]", "weight @g : f32[d] = \"g\"\n"),
               {{"e", kTable}, {"g", g}}, {0});
  double rms = std::sqrt((1 + 4 + 9 + 16) / 4.0 + 1e-6); // sqrt(7.5 + eps)
  std::vector<double> want = {1 / rms, 2 / rms, 2 * 3 / rms, 0.5 * 4 / rms};
  ASSERT_EQ(y.numel(), 4);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y.data[i], want[i], 1e-6);
}

TEST(InterpreterOps, LayerNormCentresScalesAndShifts) {
  ir::Tensor g = tensor({4}, {1, 2, 1, 1}), b = tensor({4}, {0, 0, 1, -1});
  auto y = run(unaryModule("%y = layer_norm %x, @g, @b {eps = 1e-5} : f32[T, d]",
                           "weight @g : f32[d] = \"g\"\nweight @b : f32[d] = \"b\"\n"),
               {{"e", kTable}, {"g", g}, {"b", b}}, {0});
  double sd = std::sqrt(1.25 + 1e-5); // mean 2.5, biased variance 1.25
  std::vector<double> want = {-1.5 / sd, 2 * -0.5 / sd, 0.5 / sd + 1, 1.5 / sd - 1};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y.data[i], want[i], 1e-6);
}

TEST(InterpreterOps, PointwiseFunctionsMatchClosedForms) {
  // Row 0 holds 1, 2, 3, 4; the expected values are the textbook definitions evaluated here.
  struct Case { const char *op; double (*f)(double); };
  Case cases[] = {
      {"gelu_tanh", [](double x) { return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }},
      {"gelu_erf", [](double x) { return 0.5 * x * (1 + std::erf(x * 0.7071067811865476)); }},
      {"silu", [](double x) { return x / (1 + std::exp(-x)); }},
      {"relu", [](double x) { return x > 0 ? x : 0.0; }},
  };
  for (const Case &c : cases) {
    auto y = run(unaryModule(std::string("%y = ") + c.op + " %x : f32[T, d]"), {{"e", kTable}}, {1});
    ASSERT_EQ(y.numel(), 4) << c.op;
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(y.data[i], c.f(kTable.data[4 + i]), 1e-6) << c.op << " at " << i;
  }
  EXPECT_NEAR(run(unaryModule("%y = gelu_erf %x : f32[T, d]"), {{"e", kTable}}, {0}).data[0], 0.8413447460685429, 1e-6);
  auto s = run(unaryModule("%y = scale %x {factor = -0.5} : f32[T, d]"), {{"e", kTable}}, {0});
  EXPECT_EQ(s.data, (std::vector<float>{-0.5f, -1, -1.5f, -2}));
}

TEST(InterpreterOps, AddMulAndMatmulWithBias) {
  ir::Tensor w = tensor({2, 4}, {1, 0, 0, 0, 1, 1, 1, 1}), b = tensor({2}, {10, -10});
  std::string text = "model \"t\"\ndim d = 4\nweight @e : f32[4, d] = \"e\"\nweight @w : f32[2, d] = \"w\"\n"
                     "weight @b : f32[2] = \"b\"\ngraph(%tokens: i32[T]) {\n"
                     "  %x = embedding %tokens, @e : f32[T, d]\n  %s = add %x, %x : f32[T, d]\n"
                     "  %p = mul %s, %x : f32[T, d]\n  %y = matmul %p, @w, @b : f32[T, 2]\n  return %y\n}\n";
  auto y = run(text, {{"e", kTable}, {"w", w}, {"b", b}}, {0, 2});
  // p = 2 x^2; row 0: x = 1,2,3,4 -> p = 2,8,18,32; row 2: x = .25,-.5,1.5,2.5 -> p = .125,.5,4.5,12.5
  EXPECT_EQ(y.data, (std::vector<float>{2 + 10, 60 - 10, 0.125f + 10, 17.625f - 10}));
}

TEST(InterpreterOps, SplitSlicesTheLastDim) {
  std::string text = "model \"t\"\ndim d = 4\nweight @e : f32[4, d] = \"e\"\ngraph(%tokens: i32[T]) {\n"
                     "  %x = embedding %tokens, @e : f32[T, d]\n"
                     "  %a, %y = split %x {sizes = [1, 3]} : f32[T, 1], f32[T, 3]\n  return %y\n}\n";
  auto y = run(text, {{"e", kTable}}, {3});
  EXPECT_EQ(y.data, (std::vector<float>{-2, 1, 0}));
}

TEST(InterpreterOps, EmbeddingRejectsIdsOutsideTheTable) {
  auto m = parseVerified(unaryModule("%y = relu %x : f32[T, d]"));
  ir::WeightSet set{{{kTable}}};
  auto interp = ir::Interpreter::create(*m, set, 1, 8);
  ASSERT_TRUE(bool(interp));
  auto out = (*interp)->step(0, {4});
  ASSERT_FALSE(bool(out));
  EXPECT_NE(llvm::toString(out.takeError()).find("id 4 at row 0 is outside the 4 rows of @e"), std::string::npos);
}

TEST(InterpreterOps, EmbeddingSumAddsTheRowsOfBothTables) {
  std::string text = "model \"t\"\ndim d = 4\nweight @e : f32[4, d] = \"e\"\nweight @p : f32[2, d] = \"p\"\n"
                     "graph(%tokens: i32[T], %positions: i32[T]) {\n"
                     "  %y = embedding_sum %tokens, @e, %positions, @p : f32[T, d]\n  return %y\n}\n";
  ir::Tensor pos = tensor({2, 4}, {100, 200, 300, 400, -10, -20, -30, -40});
  // Rows at positions 0 and 1: e[2] + p[0], e[0] + p[1].
  auto y = run(text, {{"e", kTable}, {"p", pos}}, {2, 0});
  EXPECT_EQ(y.data, (std::vector<float>{100.25f, 199.5f, 301.5f, 402.5f, -9, -18, -27, -36}));
  // A third token sits at position 2, past the two rows of @p: the error names the second table.
  auto m = parseVerified(text);
  ir::WeightSet set{{{kTable}, {pos}}};
  auto interp = ir::Interpreter::create(*m, set, 1, 8);
  ASSERT_TRUE(bool(interp));
  auto out = (*interp)->step(0, {1, 1, 1});
  ASSERT_FALSE(bool(out));
  EXPECT_NE(llvm::toString(out.takeError()).find("id 2 at row 2 is outside the 2 rows of @p"), std::string::npos);
}

// Rope with head_dim 4: pair 0 turns by p * 1 rad, pair 1 by p * theta^(-1/2) (scaled per schedule).
std::vector<float> ropeAt(const std::string &attrs, int32_t steps, int style_interleaved = 0) {
  std::string text = unaryModule("%y = rope %x, %positions {heads = 1, head_dim = 4, theta = 10000.0, style = " +
                                 std::string(style_interleaved ? "interleaved" : "half") + ", " + attrs +
                                 "} : f32[T, d]");
  auto m = parseVerified(text);
  ir::WeightSet set{{{kTable}}};
  auto interp = ir::Interpreter::create(*m, set, 1, 64);
  std::vector<int32_t> toks(steps, 0); // position p = steps - 1 for the last row
  auto out = (*interp)->step(0, toks);
  EXPECT_TRUE(bool(out));
  return std::vector<float>(out->row(steps - 1), out->row(steps - 1) + 4);
}

TEST(InterpreterOps, RopeHalfRotatesPairsHalfADimApart) {
  auto y = ropeAt("schedule = default", 4); // position 3
  double a0 = 3.0, a1 = 3.0 * 0.01;         // inv_freq = 1, 10000^-0.5
  // (x0, x2) and (x1, x3) rotate: x = 1, 2, 3, 4
  EXPECT_NEAR(y[0], 1 * std::cos(a0) - 3 * std::sin(a0), 1e-6);
  EXPECT_NEAR(y[2], 3 * std::cos(a0) + 1 * std::sin(a0), 1e-6);
  EXPECT_NEAR(y[1], 2 * std::cos(a1) - 4 * std::sin(a1), 1e-6);
  EXPECT_NEAR(y[3], 4 * std::cos(a1) + 2 * std::sin(a1), 1e-6);
  auto p0 = ropeAt("schedule = default", 1); // position 0: identity
  EXPECT_EQ(p0, (std::vector<float>{1, 2, 3, 4}));
}

TEST(InterpreterOps, RopeInterleavedRotatesAdjacentPairs) {
  auto y = ropeAt("schedule = default", 3, 1); // position 2
  double a0 = 2.0, a1 = 0.02;
  EXPECT_NEAR(y[0], 1 * std::cos(a0) - 2 * std::sin(a0), 1e-6);
  EXPECT_NEAR(y[1], 2 * std::cos(a0) + 1 * std::sin(a0), 1e-6);
  EXPECT_NEAR(y[2], 3 * std::cos(a1) - 4 * std::sin(a1), 1e-6);
  EXPECT_NEAR(y[3], 4 * std::cos(a1) + 3 * std::sin(a1), 1e-6);
}

TEST(InterpreterOps, RopeLinearScheduleDividesFrequencies) {
  auto y = ropeAt("schedule = linear, factor = 2.0", 5); // position 4 behaves as position 2
  auto z = ropeAt("schedule = default", 3);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[i], z[i], 1e-6);
}

TEST(InterpreterOps, RopeLlama3ScheduleKeepsHighSlowsLowAndBlendsTheBand) {
  // Wavelengths: pair 0 2*pi, pair 1 2*pi*100 = 628.3. With original 1000, low 1, high 4 the band is
  // [250, 1000]: pair 0 is kept, pair 1 is blended with smooth = (1000/628.3 - 1) / 3.
  auto y = ropeAt("schedule = llama3, factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_pos = 1000", 11);
  double wl = 2 * M_PI / 0.01, smooth = (1000 / wl - 1) / 3, f1 = (1 - smooth) * 0.01 / 8 + smooth * 0.01;
  double a0 = 10.0, a1 = 10.0 * f1;
  EXPECT_NEAR(y[0], 1 * std::cos(a0) - 3 * std::sin(a0), 1e-6);
  EXPECT_NEAR(y[1], 2 * std::cos(a1) - 4 * std::sin(a1), 1e-6);
  // With original 64 pair 1's wavelength (628) is past low_wavelen (64): divided by the factor.
  auto z = ropeAt("schedule = llama3, factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_pos = 64", 11);
  double b1 = 10.0 * 0.01 / 8;
  EXPECT_NEAR(z[3], 4 * std::cos(b1) + 2 * std::sin(b1), 1e-6);
}

// A module of one attention op over the table @e [tableRows, q + k + v], each row (q|k|v) of one token:
// `heads` query heads and `kvHeads` key/value heads of width `headDim`, `attrs` any further attributes
// (", scale = 1.0").
std::string attentionModule(int64_t tableRows, int heads, int kvHeads, int headDim, const std::string &attrs) {
  const int q = heads * headDim, kv = kvHeads * headDim, all = q + 2 * kv;
  std::ostringstream s;
  s << "model \"t\"\nweight @e : f32[" << tableRows << ", " << all << "] = \"e\"\ngraph(%tokens: i32[T]) {\n"
    << "  %x = embedding %tokens, @e : f32[T, " << all << "]\n"
    << "  %q, %k, %v = split %x {sizes = [" << q << ", " << kv << ", " << kv << "]} : f32[T, " << q << "], f32[T, "
    << kv << "], f32[T, " << kv << "]\n"
    << "  %y = attention %q, %k, %v {heads = " << heads << ", kv_heads = " << kvHeads << ", head_dim = " << headDim
    << attrs << "} : f32[T, " << q << "]\n"
    << "  return %y\n}\n";
  return s.str();
}
// That module with `table` as @e, run on tokens 0 and 1.
ir::Tensor runAttention(const ir::Tensor &table, int heads, int kvHeads, int headDim, const std::string &attrs = "") {
  return run(attentionModule(table.rows(), heads, kvHeads, headDim, attrs), {{"e", table}}, {0, 1});
}

// Attention with head_dim 2: the table rows are (q|k|v) for 2 tokens, worked by hand below.
TEST(InterpreterOps, AttentionIsCausalSoftmaxOverTheCache) {
  ir::Tensor e = tensor({2, 6}, {1, 0, /*k*/ 1, 0, /*v*/ 1, 2, //
                                 0, 1, /*k*/ 0, 2, /*v*/ 3, -1});
  auto y = runAttention(e, /*heads=*/1, /*kvHeads=*/1, /*headDim=*/2, ", scale = 1.0");
  // Token 0 sees only itself: y0 = v0. Token 1: scores q1.k0 = 0, q1.k1 = 2 -> weights 1/(1+e^2), e^2/(1+e^2).
  double w0 = 1 / (1 + std::exp(2.0)), w1 = 1 - w0;
  EXPECT_NEAR(y.data[0], 1, 1e-6);
  EXPECT_NEAR(y.data[1], 2, 1e-6);
  EXPECT_NEAR(y.data[2], w0 * 1 + w1 * 3, 1e-6);
  EXPECT_NEAR(y.data[3], w0 * 2 + w1 * -1, 1e-6);
}

TEST(InterpreterOps, AttentionGroupsQueryHeadsOverSharedKvHeads) {
  // 2 query heads, 1 kv head, head_dim 1: both heads read the one kv head; default scale 1/sqrt(1).
  ir::Tensor e = tensor({2, 4}, {1, -1, /*k*/ 1, /*v*/ 5, //
                                 2, 0, /*k*/ 1, /*v*/ -5});
  auto y = runAttention(e, /*heads=*/2, /*kvHeads=*/1, /*headDim=*/1);
  // Row 1: both keys are 1, so every head weighs the two values equally: (5 + -5) / 2 = 0.
  EXPECT_NEAR(y.data[0], 5, 1e-6);
  EXPECT_NEAR(y.data[1], 5, 1e-6);
  EXPECT_NEAR(y.data[2], 0, 1e-6);
  EXPECT_NEAR(y.data[3], 0, 1e-6);
}

class TinyModel : public ::testing::Test {
protected:
  void SetUp() override {
    module = parseVerified(test::tinyLlamaText());
    ASSERT_TRUE(module);
    weights = test::randomWeights(*module, 7);
  }
  std::unique_ptr<ir::Interpreter> make(int64_t batch, int64_t maxSeq) {
    auto i = ir::Interpreter::create(*module, weights, batch, maxSeq);
    EXPECT_TRUE(bool(i));
    return i ? std::move(*i) : nullptr;
  }
  std::unique_ptr<ir::Module> module;
  ir::WeightSet weights;
};

TEST_F(TinyModel, DecodeStepsThroughTheCacheEqualOnePrefill) {
  std::vector<int32_t> tokens = {3, 17, 5, 29, 11, 2};
  auto whole = make(1, 16)->step(0, tokens);
  ASSERT_TRUE(bool(whole));
  auto inc = make(1, 16);
  auto first = inc->step(0, {3, 17, 5});
  ASSERT_TRUE(bool(first));
  for (int t = 0; t < 3; ++t) EXPECT_LT(test::relError({first->row(t), first->row(t) + 32}, {whole->row(t), whole->row(t) + 32}), 1e-6);
  for (int t = 3; t < 6; ++t) {
    auto step = inc->step(0, {tokens[t]});
    ASSERT_TRUE(bool(step));
    EXPECT_LT(test::relError(step->data, {whole->row(t), whole->row(t) + 32}), 1e-5) << "position " << t;
  }
  EXPECT_EQ(inc->length(0), 6);
}

TEST_F(TinyModel, SequencesOfABatchAreIndependent) {
  auto batch = make(2, 16);
  auto a = batch->step(0, {1, 2, 3});
  auto b = batch->step(1, {9, 8});
  auto a2 = batch->step(0, {4});
  ASSERT_TRUE(a && b && a2);
  auto alone = make(1, 16);
  auto ref = alone->step(0, {1, 2, 3, 4});
  ASSERT_TRUE(bool(ref));
  EXPECT_LT(test::relError(a2->data, {ref->row(3), ref->row(3) + 32}), 1e-5);
  auto alone2 = make(1, 16)->step(0, {9, 8});
  ASSERT_TRUE(bool(alone2));
  EXPECT_EQ(b->data, alone2->data);
  batch->reset(0);
  EXPECT_EQ(batch->length(0), 0);
  EXPECT_EQ(batch->length(1), 2);
}

TEST_F(TinyModel, StepPastMaxSeqIsAnErrorAndLeavesTheSequenceUsable) {
  auto interp = make(1, 4);
  ASSERT_TRUE(bool(interp->step(0, {1, 2, 3})));
  auto over = interp->step(0, {4, 5});
  ASSERT_FALSE(bool(over));
  EXPECT_NE(llvm::toString(over.takeError()).find("would hold 5 tokens, more than max_seq 4"), std::string::npos);
  EXPECT_EQ(interp->length(0), 3);
  EXPECT_TRUE(bool(interp->step(0, {4})));
}

TEST_F(TinyModel, GreedyPicksTheArgmaxAndFeedsItBack) {
  auto interp = make(1, 16);
  auto res = ir::generateGreedy(*interp, {{5, 6, 7}}, 4);
  ASSERT_TRUE(bool(res));
  ASSERT_EQ(res->tokens[0].size(), 4u);
  ASSERT_EQ(res->logits[0].shape, (std::vector<int64_t>{3 + 4 - 1, 32}));
  // Recompute independently: one prefill of prompt + generated tokens gives the same rows, and each
  // generated token is the argmax of the row before it.
  std::vector<int32_t> all = {5, 6, 7};
  all.insert(all.end(), res->tokens[0].begin(), res->tokens[0].end() - 1);
  auto ref = make(1, 16)->step(0, all);
  ASSERT_TRUE(bool(ref));
  EXPECT_LT(test::relError(res->logits[0].data, ref->data), 1e-5);
  for (size_t i = 0; i < 4; ++i) {
    const float *row = ref->row(2 + i);
    EXPECT_EQ(res->tokens[0][i], std::max_element(row, row + 32) - row) << "token " << i;
  }
}

TEST(InterpreterCreate, RejectsWeightsOfTheWrongShape) {
  auto m = parseVerified(unaryModule("%y = relu %x : f32[T, d]"));
  ir::WeightSet set{{{tensor({2, 4}, std::vector<float>(8, 1))}}};
  auto interp = ir::Interpreter::create(*m, set, 1, 8);
  ASSERT_FALSE(bool(interp));
  EXPECT_NE(llvm::toString(interp.takeError()).find("@e tensor does not have the declared shape f32[4, d]"), std::string::npos);
}

} // namespace

namespace {

TEST(InterpreterEvalOp, AttentionExtendsTheGivenCacheLikeAStep) {
  auto m = parseVerified(test::tinyLlamaText());
  ASSERT_TRUE(m);
  const auto &body = std::get<ir::Repeat>(m->items[1]).body;
  const ir::Op *attn = nullptr;
  for (const ir::Op &op : body)
    if (op.kind == ir::OpKind::Attention) attn = &op;
  ASSERT_NE(attn, nullptr);
  // q [3, 16], k/v [3, 8] for three tokens; the same with the first two in the cache and one new row.
  std::mt19937 rng(5);
  std::normal_distribution<float> d;
  auto rnd = [&](std::vector<int64_t> s) {
    ir::Tensor t(s);
    for (float &x : t.data) x = d(rng);
    return t;
  };
  ir::Tensor q = rnd({3, 16}), k = rnd({3, 8}), v = rnd({3, 8});
  ir::KvCache empty;
  auto all = ir::evalOp(*m, *attn, {&q, &k, &v}, &empty);
  ASSERT_TRUE(bool(all)) << llvm::toString(all.takeError());
  EXPECT_EQ(empty.k.shape, (std::vector<int64_t>{3, 8}));

  ir::KvCache past;
  past.k = tensor({2, 8}, std::vector<float>(k.data.begin(), k.data.begin() + 16));
  past.v = tensor({2, 8}, std::vector<float>(v.data.begin(), v.data.begin() + 16));
  ir::Tensor q2 = tensor({1, 16}, std::vector<float>(q.data.begin() + 32, q.data.end()));
  ir::Tensor k2 = tensor({1, 8}, std::vector<float>(k.data.begin() + 16, k.data.end()));
  ir::Tensor v2 = tensor({1, 8}, std::vector<float>(v.data.begin() + 16, v.data.end()));
  auto last = ir::evalOp(*m, *attn, {&q2, &k2, &v2}, &past);
  ASSERT_TRUE(bool(last)) << llvm::toString(last.takeError());
  EXPECT_EQ(past.k.shape, (std::vector<int64_t>{3, 8}));
  EXPECT_LT(test::relError((*last)[0].data, {(*all)[0].row(2), (*all)[0].row(2) + 16}), 1e-6);
  // Without a cache, attention is refused.
  auto none = ir::evalOp(*m, *attn, {&q, &k, &v});
  ASSERT_FALSE(bool(none));
  llvm::consumeError(none.takeError());
}

} // namespace
