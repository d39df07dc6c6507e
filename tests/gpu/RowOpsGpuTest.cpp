// tests/gpu/RowOpsGpuTest.cpp — the row-op kernels on a GPU (CTest label `gpu`; each test skips without
// one), each against its reference: ir::evalOp of the IR op for norms, embedding, pointwise ops and rope
// (random bf16-rounded inputs, never zeros, outputs poisoned with NaN first, rows 1, 7, 64, 300); exact
// cache contents for the KV write. Argmax and sampling are in SamplingGpuTest.cpp. Failures print the spec
// name, the rows and the worst element.
#include "GpuHarness.h"
#include "common/TestModels.h"

#include "compiler/kernels/RowOps.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

using namespace minfer;
using gputest::expectMatches;

namespace {

const int64_t kRows[] = {1, 7, 64, 300};

using gputest::run;

// A module whose graph is `body` (ending in `%y = ...`), and its last op of `kind`: the op to evaluate.
struct OneOp {
  std::unique_ptr<ir::Module> m;
  const ir::Op *op = nullptr;
};
OneOp oneOp(const std::string &decls, const std::string &body, ir::OpKind kind) {
  OneOp out;
  out.m = test::parseVerified("model \"t\"\n" + decls + "graph(%tokens: i32[T], %positions: i32[T]) {\n" + body +
                              "\n  return %y\n}\n");
  if (!out.m) return out;
  for (const ir::Item &item : out.m->items)
    if (const ir::Op *op = std::get_if<ir::Op>(&item); op && op->kind == kind) out.op = op;
  return out;
}

// Evaluates the op on `operands`; its first result.
ir::Tensor reference(const OneOp &o, std::vector<const ir::Tensor *> operands) {
  auto r = ir::evalOp(*o.m, *o.op, operands);
  if (!r) {
    ADD_FAILURE() << "evalOp: " << llvm::toString(r.takeError());
    return {};
  }
  return std::move((*r)[0]);
}

// expectMatches, and on a mismatch the worst element, so a failure says where to look.
void expectClose(const ir::Tensor &got, const ir::Tensor &ref, const std::string &what,
                 double tol = gputest::kBf16Tolerance) {
  expectMatches(got, ref, tol, what);
  if (got.data.size() != ref.data.size() || gputest::relError(got, ref) < tol) return;
  size_t worst = 0;
  double worstErr = -1;
  for (size_t i = 0; i < got.data.size(); ++i) {
    double e = std::isnan(got.data[i]) ? INFINITY : std::abs(double(got.data[i]) - ref.data[i]);
    if (e > worstErr) worstErr = e, worst = i;
  }
  int64_t cols = ref.cols();
  ADD_FAILURE() << what << ": worst element row " << worst / cols << " col " << worst % cols << ": got "
                << got.data[worst] << ", want " << ref.data[worst];
}

// Rounds `t` to `dtype` in place (so the reference sees what the kernel reads) and uploads it in that dtype.
llvm::Expected<cuda::DeviceBuffer> uploadWeight(ir::Tensor &t, ir::DType dtype) {
  if (dtype == ir::DType::F32) return gputest::uploadVector(t.data);
  std::vector<uint16_t> bits(t.data.size());
  for (size_t i = 0; i < bits.size(); ++i) {
    bits[i] = dtype == ir::DType::F16 ? floatToF16(t.data[i]) : floatToBf16(t.data[i]);
    t.data[i] = dtype == ir::DType::F16 ? f16ToFloat(bits[i]) : bf16ToFloat(bits[i]);
  }
  return gputest::uploadVector(bits);
}

std::string dtypeStr(ir::DType t) { return ir::dtypeName(t).str(); }

// ---- norms --------------------------------------------------------------------------------------------

struct NormCase {
  NormKind kind;
  NormFusion fusion;
  ir::DType weight;
  int64_t dim;
};

std::string normCaseName(const NormCase &c) {
  return std::string(c.kind == NormKind::Rms ? "rms" : "layer") + (c.fusion == NormFusion::ResidualAdd ? "_residual" : "") +
         "_" + dtypeStr(c.weight) + "_d" + std::to_string(c.dim);
}

// CTest lists each parameterised test with its parameter: printed by name, not as bytes.
[[maybe_unused]] void PrintTo(const NormCase &c, std::ostream *os) { *os << normCaseName(c); }

std::vector<NormCase> normCases() {
  std::vector<NormCase> cases;
  for (NormKind k : {NormKind::Rms, NormKind::Layer})
    for (NormFusion f : {NormFusion::None, NormFusion::ResidualAdd}) {
      for (int64_t d : {64, 768, 896, 2048, 4096, 100}) cases.push_back({k, f, ir::DType::BF16, d});
      for (ir::DType w : {ir::DType::F16, ir::DType::F32})
        for (int64_t d : {768, 2048}) cases.push_back({k, f, w, d});
    }
  return cases;
}

class NormKernel : public ::testing::TestWithParam<NormCase> {};

TEST_P(NormKernel, MatchesInterpreter) {
  MINFER_REQUIRE_GPU();
  const NormCase c = GetParam();
  const bool layer = c.kind == NormKind::Layer, fused = c.fusion == NormFusion::ResidualAdd;
  NormSpec spec(c.kind, c.dim, c.weight, c.fusion);
  ASSERT_FALSE(spec.verify()) << spec.name();
  GPU_TRY(kernel, gputest::buildKernel(spec));
  const std::string w = dtypeStr(c.weight);
  OneOp o = oneOp("dim d = " + std::to_string(c.dim) + "\nweight @e : bf16[4, d] = \"e\"\nweight @g : " + w +
                      "[d] = \"g\"\n" + (layer ? "weight @b : " + w + "[d] = \"b\"\n" : ""),
                  "  %x = embedding %tokens, @e : bf16[T, d]\n  %y = " +
                      std::string(layer ? "layer_norm %x, @g, @b" : "rms_norm %x, @g") + " {eps = 0.00001} : bf16[T, d]",
                  layer ? ir::OpKind::LayerNorm : ir::OpKind::RmsNorm);
  ASSERT_TRUE(o.op);
  std::mt19937 rng(c.dim * 7 + int(c.kind) * 3 + int(c.fusion));
  // Gains around 1, shifts around 0: never zeros (bf16 rounding of N(1, 0.1) is never 0).
  ir::Tensor gamma = gputest::randomBf16({c.dim}, rng, 1.0f, 0.1f), beta = gputest::randomBf16({c.dim}, rng, 0.1f, 0.1f);
  GPU_TRY(gBuf, uploadWeight(gamma, c.weight));
  GPU_TRY(bBuf, uploadWeight(beta, c.weight));
  for (int64_t rows : kRows) {
    SCOPED_TRACE(spec.name() + " rows=" + std::to_string(rows));
    // A mean offset so layer_norm's centring matters.
    ir::Tensor a = gputest::randomBf16({rows, c.dim}, rng, 0.3f, 1.5f), b = gputest::randomBf16({rows, c.dim}, rng, -0.2f, 1.0f);
    ir::Tensor x = a;
    if (fused) // the kernel normalises s = bf16(a + b), as the unfused add would store it
      for (size_t i = 0; i < x.data.size(); ++i) x.data[i] = bf16ToFloat(floatToBf16(a.data[i] + b.data[i]));
    ir::Tensor want = layer ? reference(o, {&x, &gamma, &beta}) : reference(o, {&x, &gamma});
    GPU_TRY(aBuf, gputest::uploadBf16(a));
    GPU_TRY(bInBuf, gputest::uploadBf16(b));
    GPU_TRY(yBuf, gputest::poisonedBf16(rows * c.dim));
    GPU_TRY(sBuf, gputest::poisonedBf16(rows * c.dim));
    const int r = int(rows);
    const float eps = 1e-5f;
    NormParams p{.a = aBuf.ptr(), .gamma = gBuf.ptr(), .y = yBuf.ptr(), .rows = r, .eps = eps};
    if (layer) p.beta = bBuf.ptr();
    if (fused) p.b = bInBuf.ptr(), p.sum = sBuf.ptr();
    MINFER_ASSERT_OK(run(kernel, spec, rows, p));
    GPU_TRY(y, gputest::downloadBf16(yBuf, {rows, c.dim}));
    expectClose(y, want, spec.name() + " rows=" + std::to_string(rows));
    if (fused) { // the new residual stream is exactly bf16(a + b)
      GPU_TRY(s, gputest::downloadBf16(sBuf, {rows, c.dim}));
      size_t wrong = 0;
      for (size_t i = 0; i < s.data.size(); ++i) wrong += !(s.data[i] == x.data[i]);
      EXPECT_EQ(wrong, 0u) << "residual sum elements differing from bf16(a + b)";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sweep, NormKernel, ::testing::ValuesIn(normCases()),
                         [](const auto &info) { return normCaseName(info.param); });

TEST(NormKernel, ResidualSumMayOverwriteItsInput) {
  // The fused kernel updates the residual stream in place: sum aliases a.
  MINFER_REQUIRE_GPU();
  const int64_t d = 2048, rows = 64;
  NormSpec spec(NormKind::Rms, d, ir::DType::BF16, NormFusion::ResidualAdd);
  GPU_TRY(kernel, gputest::buildKernel(spec));
  OneOp o = oneOp("dim d = 2048\nweight @e : bf16[4, d] = \"e\"\nweight @g : bf16[d] = \"g\"\n",
                  "  %x = embedding %tokens, @e : bf16[T, d]\n  %y = rms_norm %x, @g {eps = 0.00001} : bf16[T, d]",
                  ir::OpKind::RmsNorm);
  ASSERT_TRUE(o.op);
  std::mt19937 rng(3);
  ir::Tensor a = gputest::randomBf16({rows, d}, rng), b = gputest::randomBf16({rows, d}, rng);
  ir::Tensor gamma = gputest::randomBf16({d}, rng, 1.0f, 0.1f), s = a;
  for (size_t i = 0; i < s.data.size(); ++i) s.data[i] = bf16ToFloat(floatToBf16(a.data[i] + b.data[i]));
  ir::Tensor want = reference(o, {&s, &gamma});
  GPU_TRY(aBuf, gputest::uploadBf16(a));
  GPU_TRY(bBuf, gputest::uploadBf16(b));
  GPU_TRY(gBuf, gputest::uploadBf16(gamma));
  GPU_TRY(yBuf, gputest::poisonedBf16(rows * d));
  MINFER_ASSERT_OK(run(kernel, spec, rows,
                       NormParams{.a = aBuf.ptr(), .b = bBuf.ptr(), .gamma = gBuf.ptr(), .sum = aBuf.ptr(),
                                  .y = yBuf.ptr(), .rows = int(rows), .eps = 1e-5f}));
  GPU_TRY(y, gputest::downloadBf16(yBuf, {rows, d}));
  GPU_TRY(newA, gputest::downloadBf16(aBuf, {rows, d}));
  expectClose(y, want, spec.name() + " in place");
  EXPECT_EQ(gputest::relError(newA, s), 0.0);
}

// ---- embedding ----------------------------------------------------------------------------------------

TEST(EmbeddingKernel, MatchesInterpreterForEveryTableType) {
  MINFER_REQUIRE_GPU();
  const int64_t tableRows = 1000;
  for (ir::DType dt : {ir::DType::BF16, ir::DType::F16, ir::DType::F32})
    for (int64_t d : {64, 768, 896, 2048, 4096, 50}) {
      EmbeddingSpec spec(d, dt);
      SCOPED_TRACE(spec.name());
      GPU_TRY(kernel, gputest::buildKernel(spec));
      OneOp o = oneOp("dim d = " + std::to_string(d) + "\nweight @t : " + dtypeStr(dt) + "[" + std::to_string(tableRows) +
                          ", d] = \"t\"\n",
                      "  %y = embedding %tokens, @t : bf16[T, d]", ir::OpKind::Embedding);
      ASSERT_TRUE(o.op);
      std::mt19937 rng(d);
      ir::Tensor table = gputest::randomBf16({tableRows, d}, rng, 0.f, 2.f);
      if (dt == ir::DType::F32) // values bf16 cannot hold, so the kernel's rounding is exercised
        for (float &x : table.data) x *= 1.0009765625f;
      GPU_TRY(tBuf, uploadWeight(table, dt));
      for (int64_t rows : kRows) {
        ir::Tensor ids({rows});
        std::vector<int32_t> idBits(rows);
        std::uniform_int_distribution<int> pick(0, int(tableRows) - 1);
        for (int64_t r = 0; r < rows; ++r) ids.data[r] = float(idBits[r] = r == 0 ? int(tableRows) - 1 : pick(rng));
        ir::Tensor want = reference(o, {&ids, &table});
        GPU_TRY(idBuf, gputest::uploadVector(idBits));
        GPU_TRY(yBuf, gputest::poisonedBf16(rows * d));
        MINFER_ASSERT_OK(run(kernel, spec, rows,
                             EmbeddingParams{.ids = idBuf.ptr(), .table = tBuf.ptr(), .out = yBuf.ptr(),
                                             .rows = int(rows), .table_rows = int(tableRows)}));
        GPU_TRY(y, gputest::downloadBf16(yBuf, {rows, d}));
        expectClose(y, want, spec.name() + " rows=" + std::to_string(rows));
      }
    }
}

// embedding_sum (GPT-2's token and learned-position tables): both gathers added, rounded once, against the
// interpreter's op; a second id outside its table writes a NaN row too.
TEST(EmbeddingKernel, SumOfTwoTablesMatchesInterpreter) {
  MINFER_REQUIRE_GPU();
  const int64_t tableRows = 1000, table2Rows = 300;
  for (auto [dt, dt2] : {std::pair{ir::DType::BF16, ir::DType::F32}, {ir::DType::F16, ir::DType::BF16}})
    for (int64_t d : {768, 64, 50}) {
      EmbeddingSpec spec(d, dt, dt2);
      SCOPED_TRACE(spec.name());
      GPU_TRY(kernel, gputest::buildKernel(spec));
      std::string n = std::to_string(d);
      OneOp o = oneOp("dim d = " + n + "\nweight @t : " + dtypeStr(dt) + "[" + std::to_string(tableRows) +
                          ", d] = \"t\"\nweight @u : " + dtypeStr(dt2) + "[" + std::to_string(table2Rows) + ", d] = \"u\"\n",
                      "  %y = embedding_sum %tokens, @t, %positions, @u : bf16[T, d]", ir::OpKind::EmbeddingSum);
      ASSERT_TRUE(o.op);
      std::mt19937 rng(d + 7);
      ir::Tensor table = gputest::randomBf16({tableRows, d}, rng, 0.f, 2.f);
      ir::Tensor table2 = gputest::randomBf16({table2Rows, d}, rng, 0.f, 2.f);
      if (dt2 == ir::DType::F32) // values bf16 cannot hold: the sum is rounded once, not each row first
        for (float &x : table2.data) x *= 1.0009765625f;
      GPU_TRY(tBuf, uploadWeight(table, dt));
      GPU_TRY(uBuf, uploadWeight(table2, dt2));
      for (int64_t rows : kRows) {
        ir::Tensor ids({rows}), ids2({rows});
        std::vector<int32_t> idBits(rows), id2Bits(rows);
        std::uniform_int_distribution<int> pick(0, int(tableRows) - 1), pick2(0, int(table2Rows) - 1);
        for (int64_t r = 0; r < rows; ++r) {
          ids.data[r] = float(idBits[r] = pick(rng));
          ids2.data[r] = float(id2Bits[r] = r == 0 ? int(table2Rows) - 1 : pick2(rng));
        }
        ir::Tensor want = reference(o, {&ids, &table, &ids2, &table2});
        GPU_TRY(idBuf, gputest::uploadVector(idBits));
        GPU_TRY(id2Buf, gputest::uploadVector(id2Bits));
        GPU_TRY(yBuf, gputest::poisonedBf16(rows * d));
        MINFER_ASSERT_OK(run(kernel, spec, rows,
                             EmbeddingParams{.ids = idBuf.ptr(), .table = tBuf.ptr(), .out = yBuf.ptr(),
                                             .rows = int(rows), .table_rows = int(tableRows), .ids2 = id2Buf.ptr(),
                                             .table2 = uBuf.ptr(), .table2_rows = int(table2Rows)}));
        GPU_TRY(y, gputest::downloadBf16(yBuf, {rows, d}));
        expectClose(y, want, spec.name() + " rows=" + std::to_string(rows));
        // Exactly the interpreter's fp32 sum rounded once (the f32 table's values are not bf16's, so rounding
        // each row first would differ).
        for (size_t i = 0; i < y.data.size(); ++i)
          ASSERT_EQ(y.data[i], bf16ToFloat(floatToBf16(want.data[i]))) << spec.name() << " rows=" << rows << " element " << i;
      }
    }
  // The second table's ids are checked as the first's.
  const int64_t d = 768, rows = 3;
  EmbeddingSpec spec(d, ir::DType::BF16, ir::DType::BF16);
  GPU_TRY(kernel, gputest::buildKernel(spec));
  std::mt19937 rng(3);
  ir::Tensor table = gputest::randomBf16({4, d}, rng);
  GPU_TRY(tBuf, gputest::uploadBf16(table));
  std::vector<int32_t> ids = {0, 1, 2}, ids2 = {3, 4, -1};
  GPU_TRY(idBuf, gputest::uploadVector(ids));
  GPU_TRY(id2Buf, gputest::uploadVector(ids2));
  GPU_TRY(yBuf, gputest::uploadVector(std::vector<uint16_t>(rows * d, floatToBf16(1.0f))));
  MINFER_ASSERT_OK(run(kernel, spec, rows,
                       EmbeddingParams{.ids = idBuf.ptr(), .table = tBuf.ptr(), .out = yBuf.ptr(), .rows = int(rows),
                                       .table_rows = 4, .ids2 = id2Buf.ptr(), .table2 = tBuf.ptr(), .table2_rows = 4}));
  GPU_TRY(y, gputest::downloadBf16(yBuf, {rows, d}));
  for (int64_t i = 0; i < d; ++i) {
    ASSERT_EQ(y.row(0)[i], bf16ToFloat(floatToBf16(table.row(0)[i] + table.row(3)[i]))) << "col " << i;
    ASSERT_TRUE(std::isnan(y.row(1)[i])) << "row 1 (second id 4 of 4 rows) col " << i;
    ASSERT_TRUE(std::isnan(y.row(2)[i])) << "row 2 (second id -1) col " << i;
  }
}

TEST(EmbeddingKernel, OutOfRangeIdsWriteNaNRows) {
  MINFER_REQUIRE_GPU();
  const int64_t d = 768, tableRows = 10, rows = 5;
  EmbeddingSpec spec(d, ir::DType::BF16);
  GPU_TRY(kernel, gputest::buildKernel(spec));
  std::mt19937 rng(1);
  ir::Tensor table = gputest::randomBf16({tableRows, d}, rng);
  GPU_TRY(tBuf, gputest::uploadBf16(table));
  std::vector<int32_t> ids = {3, -1, int(tableRows), 9, 0};
  GPU_TRY(idBuf, gputest::uploadVector(ids));
  GPU_TRY(yBuf, gputest::poisonedBf16(rows * d));
  // Fill with a non-NaN value first, so the NaN rows are known to have been written by the kernel.
  GPU_TRY(zero, gputest::uploadVector(std::vector<uint16_t>(rows * d, floatToBf16(1.0f))));
  MINFER_ASSERT_OK(cuda::copyDeviceToDevice(yBuf.ptr(), zero.ptr(), rows * d * 2));
  MINFER_ASSERT_OK(run(kernel, spec, rows,
                             EmbeddingParams{.ids = idBuf.ptr(), .table = tBuf.ptr(), .out = yBuf.ptr(),
                                             .rows = int(rows), .table_rows = int(tableRows)}));
  GPU_TRY(y, gputest::downloadBf16(yBuf, {rows, d}));
  for (int64_t r = 0; r < rows; ++r) {
    bool bad = ids[r] < 0 || ids[r] >= tableRows;
    for (int64_t i = 0; i < d; ++i) {
      float got = y.row(r)[i];
      if (bad) ASSERT_TRUE(std::isnan(got)) << "row " << r << " (id " << ids[r] << ") col " << i;
      else ASSERT_EQ(got, table.row(ids[r])[i]) << "row " << r << " col " << i;
    }
  }
}

// ---- pointwise ----------------------------------------------------------------------------------------

struct PointwiseCase {
  PointwiseOp op;
  int64_t cols;
};

[[maybe_unused]] void PrintTo(const PointwiseCase &c, std::ostream *os) {
  *os << std::string(pointwiseOpName(c.op)) << "_c" << c.cols;
}

std::vector<PointwiseCase> pointwiseCases() {
  std::vector<PointwiseCase> cases;
  for (PointwiseOp op : {PointwiseOp::Scale, PointwiseOp::GeluTanh, PointwiseOp::GeluErf, PointwiseOp::Silu,
                         PointwiseOp::Relu, PointwiseOp::Add, PointwiseOp::Mul, PointwiseOp::SiluMul})
    for (int64_t cols : {768, 5632, 321}) cases.push_back({op, cols});
  return cases;
}

class PointwiseKernel : public ::testing::TestWithParam<PointwiseCase> {};

TEST_P(PointwiseKernel, MatchesInterpreter) {
  MINFER_REQUIRE_GPU();
  const PointwiseCase c = GetParam();
  PointwiseSpec spec(c.op, c.cols);
  GPU_TRY(kernel, gputest::buildKernel(spec));
  const float factor = -0.75f;
  // The IR line of the op; silu_mul is checked as silu then mul in fp32.
  std::string line = c.op == PointwiseOp::Scale  ? "scale %x {factor = -0.75}"
                     : c.op == PointwiseOp::SiluMul ? "silu %x"
                     : isBinary(c.op)             ? std::string(pointwiseOpName(c.op)) + " %x, %x"
                                                  : std::string(pointwiseOpName(c.op)) + " %x";
  const std::string decls = "dim d = " + std::to_string(c.cols) + "\nweight @e : bf16[4, d] = \"e\"\n";
  const std::string x = "  %x = embedding %tokens, @e : bf16[T, d]\n";
  std::optional<ir::OpKind> kind;
#define OP(Id, ...)                                                                                          \
  if (pointwiseOpOf(ir::OpKind::Id) == (c.op == PointwiseOp::SiluMul ? PointwiseOp::Silu : c.op)) kind = ir::OpKind::Id;
#include "ir/Ops.def"
  ASSERT_TRUE(kind);
  OneOp op = oneOp(decls, x + "  %y = " + line + " : bf16[T, d]", *kind);
  ASSERT_TRUE(op.op);
  OneOp mul = oneOp(decls, x + "  %y = mul %x, %x : bf16[T, d]", ir::OpKind::Mul);
  ASSERT_TRUE(mul.op);
  std::mt19937 rng(c.cols + int(c.op));
  for (int64_t rows : kRows) {
    SCOPED_TRACE(spec.name() + " rows=" + std::to_string(rows));
    // Wide enough to reach the tails of gelu and silu; 0.25 keeps every value away from 0 and below 0.
    ir::Tensor a = gputest::randomBf16({rows, c.cols}, rng, 0.25f, 3.f), b = gputest::randomBf16({rows, c.cols}, rng, -0.5f, 2.f);
    ir::Tensor want = isBinary(c.op) && c.op != PointwiseOp::SiluMul ? reference(op, {&a, &b}) : reference(op, {&a});
    if (c.op == PointwiseOp::SiluMul) {
      ir::Tensor s = want;
      want = reference(mul, {&s, &b});
    }
    GPU_TRY(aBuf, gputest::uploadBf16(a));
    GPU_TRY(bBuf, gputest::uploadBf16(b));
    GPU_TRY(yBuf, gputest::poisonedBf16(rows * c.cols));
    PointwiseParams p{.a = aBuf.ptr(), .y = yBuf.ptr(), .rows = int(rows), .arg = factor};
    if (isBinary(c.op)) p.b = bBuf.ptr();
    MINFER_ASSERT_OK(run(kernel, spec, rows, p));
    GPU_TRY(y, gputest::downloadBf16(yBuf, {rows, c.cols}));
    expectClose(y, want, spec.name() + " rows=" + std::to_string(rows));
    if (rows == 64) { // in place: y aliases the first input
      p.y = aBuf.ptr();
      MINFER_ASSERT_OK(run(kernel, spec, rows, p));
      GPU_TRY(inPlace, gputest::downloadBf16(aBuf, {rows, c.cols}));
      EXPECT_EQ(gputest::relError(inPlace, y), 0.0) << "in place differs from out of place";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sweep, PointwiseKernel, ::testing::ValuesIn(pointwiseCases()), [](const auto &info) {
  return std::string(pointwiseOpName(info.param.op)) + "_c" + std::to_string(info.param.cols);
});

// SiLU (epilogue.cuh ActSilu: __expf and __fdividef) over its whole range, element by element against the
// interpreter's double-precision x / (1 + exp(-x)): the tails where exp(-x) overflows fp32 (x < -87, where
// the hardware reciprocal gives -0 and the exact value is below 1e-36) and where it underflows (x > 87,
// silu(x) = x), and everything between, each value within one bf16 step of the reference.
TEST(PointwiseKernel, SiluMatchesTheInterpreterOverItsWholeRange) {
  MINFER_REQUIRE_GPU();
  const int64_t cols = 768;
  PointwiseSpec spec(PointwiseOp::Silu, cols);
  GPU_TRY(kernel, gputest::buildKernel(spec));
  const std::string decls = "dim d = " + std::to_string(cols) + "\nweight @e : bf16[4, d] = \"e\"\n";
  OneOp op = oneOp(decls, "  %x = embedding %tokens, @e : bf16[T, d]\n  %y = silu %x : bf16[T, d]", ir::OpKind::Silu);
  ASSERT_TRUE(op.op);
  ir::Tensor x({2, cols});
  for (int64_t i = 0; i < cols; ++i) { // row 0: -120 .. 120 in even steps; row 1: -1e4 .. -1e-4, 1e4 .. 1e-4
    const double t = double(i) / double(cols - 1);
    x.data[size_t(i)] = bf16ToFloat(floatToBf16(float(-120.0 + 240.0 * t)));
    const double mag = std::pow(10.0, 4.0 - 8.0 * double(i % 384) / 383.0);
    x.data[size_t(cols + i)] = bf16ToFloat(floatToBf16(float(i < 384 ? -mag : mag)));
  }
  const float specials[] = {0.f, -87.f, -87.5f, -88.f, -88.5f, -89.f, 87.f, 88.5f};
  for (size_t s = 0; s < std::size(specials); ++s) x.data[size_t(cols) + 100 + s] = specials[s]; // and these
  ir::Tensor want = reference(op, {&x});
  GPU_TRY(xBuf, gputest::uploadBf16(x));
  GPU_TRY(yBuf, gputest::poisonedBf16(2 * cols));
  PointwiseParams p{.a = xBuf.ptr(), .y = yBuf.ptr(), .rows = 2};
  MINFER_ASSERT_OK(run(kernel, spec, 2, p));
  GPU_TRY(y, gputest::downloadBf16(yBuf, {2, cols}));
  for (size_t i = 0; i < y.data.size(); ++i) {
    const double ref = want.data[i], got = y.data[i];
    // One bf16 step (2^-7 relative: both sides are rounded to bf16), or 1e-30 absolute below that.
    EXPECT_LE(std::abs(got - ref), std::max(std::abs(ref) * 0x1p-7, 1e-30))
        << "silu(" << x.data[i] << "): got " << got << ", want " << ref;
  }
}

// ---- rope ---------------------------------------------------------------------------------------------

struct RopeCase {
  RopeStyle style;
  std::string schedule; // the IR attributes after `style = ...`
  std::string label;
  int64_t heads, headDim;
};

std::vector<RopeCase> ropeCases() {
  std::vector<RopeCase> cases;
  const std::pair<std::string, std::string> schedules[] = {
      {"theta = 10000.0, schedule = default", "default"},
      {"theta = 10000.0, schedule = linear, factor = 4.0", "linear"},
      {"theta = 500000.0, schedule = llama3, factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, "
       "original_max_pos = 8192",
       "llama3"}};
  for (RopeStyle st : {RopeStyle::Half, RopeStyle::Interleaved})
    for (const auto &[attrs, label] : schedules)
      for (auto [h, hd] : std::vector<std::pair<int64_t, int64_t>>{{4, 64}, {8, 128}, {3, 6}})
        cases.push_back({st, attrs, label, h, hd});
  return cases;
}

std::string ropeCaseName(const RopeCase &c);
[[maybe_unused]] void PrintTo(const RopeCase &c, std::ostream *os) { *os << ropeCaseName(c); }

std::string ropeCaseName(const RopeCase &c) {
  return std::string(c.style == RopeStyle::Half ? "half_" : "interleaved_") + c.label + "_h" + std::to_string(c.heads) +
         "_d" + std::to_string(c.headDim);
}

OneOp ropeOp(const RopeCase &c) {
  return oneOp("dim d = " + std::to_string(c.heads * c.headDim) + "\nweight @e : bf16[4, d] = \"e\"\n",
               "  %x = embedding %tokens, @e : bf16[T, d]\n  %y = rope %x, %positions {heads = " + std::to_string(c.heads) +
                   ", head_dim = " + std::to_string(c.headDim) + ", " + c.schedule +
                   ", style = " + (c.style == RopeStyle::Half ? "half" : "interleaved") + "} : bf16[T, d]",
               ir::OpKind::Rope);
}

std::vector<float> invFreq(const ir::Op &op) {
  std::vector<float> f;
  for (double v : ir::ropeInverseFrequencies(op)) f.push_back(float(v));
  return f;
}

// Positions in [0, 4000], including both ends.
std::vector<int32_t> randomPositions(int64_t rows, std::mt19937 &rng) {
  std::uniform_int_distribution<int> d(0, 4000);
  std::vector<int32_t> p(rows);
  for (int64_t r = 0; r < rows; ++r) p[r] = r == 0 ? 4000 : r == 1 ? 0 : d(rng);
  return p;
}

class RopeKernel : public ::testing::TestWithParam<RopeCase> {};

TEST_P(RopeKernel, MatchesInterpreter) {
  MINFER_REQUIRE_GPU();
  const RopeCase c = GetParam();
  const int64_t width = c.heads * c.headDim;
  RopeSpec spec(c.heads, c.headDim, c.style);
  GPU_TRY(kernel, gputest::buildKernel(spec));
  OneOp o = ropeOp(c);
  ASSERT_TRUE(o.op);
  GPU_TRY(freqBuf, gputest::uploadVector(invFreq(*o.op)));
  std::mt19937 rng(width);
  for (int64_t rows : kRows) {
    SCOPED_TRACE(spec.name() + " " + c.label + " rows=" + std::to_string(rows));
    ir::Tensor x = gputest::randomBf16({rows, width}, rng), pos({rows});
    std::vector<int32_t> positions = randomPositions(rows, rng);
    for (int64_t r = 0; r < rows; ++r) pos.data[r] = float(positions[r]);
    ir::Tensor want = reference(o, {&x, &pos});
    GPU_TRY(xBuf, gputest::uploadBf16(x));
    GPU_TRY(pBuf, gputest::uploadVector(positions));
    GPU_TRY(yBuf, gputest::poisonedBf16(rows * width));
    RopeParams p{.x = xBuf.ptr(), .y = yBuf.ptr(), .positions = pBuf.ptr(), .inv_freq = freqBuf.ptr(), .rows = int(rows)};
    MINFER_ASSERT_OK(run(kernel, spec, rows, p));
    GPU_TRY(y, gputest::downloadBf16(yBuf, {rows, width}));
    expectClose(y, want, spec.name() + " " + c.label + " rows=" + std::to_string(rows));
    if (rows == 7) { // in place
      p.y = xBuf.ptr();
      MINFER_ASSERT_OK(run(kernel, spec, rows, p));
      GPU_TRY(inPlace, gputest::downloadBf16(xBuf, {rows, width}));
      EXPECT_EQ(gputest::relError(inPlace, y), 0.0) << "in place differs from out of place";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sweep, RopeKernel, ::testing::ValuesIn(ropeCases()),
                         [](const auto &info) { return ropeCaseName(info.param); });

// ---- the KV-cache write -------------------------------------------------------------------------------

// Checks every cache row: rows written this step hold `want` (rows in order of `slots`), all others keep
// the 0xFFFF poison.
void expectCache(const std::vector<uint16_t> &cache, int64_t kvd, const std::vector<int64_t> &slots,
                 const std::vector<uint16_t> &want, const std::string &what) {
  std::vector<int64_t> writer(cache.size() / kvd, -1);
  for (size_t r = 0; r < slots.size(); ++r)
    if (slots[r] >= 0) writer[slots[r]] = int64_t(r);
  size_t badWritten = 0, badKept = 0;
  for (size_t slot = 0; slot < writer.size(); ++slot)
    for (int64_t i = 0; i < kvd; ++i) {
      uint16_t got = cache[slot * kvd + i];
      if (writer[slot] < 0) badKept += got != 0xFFFF;
      else badWritten += got != want[writer[slot] * kvd + i];
    }
  EXPECT_EQ(badWritten, 0u) << what << ": elements of written cache rows differ";
  EXPECT_EQ(badKept, 0u) << what << ": elements of unwritten cache rows lost their poison";
}

TEST(KvWriteKernel, WritesEveryRowToItsSlotAndNothingElse) {
  MINFER_REQUIRE_GPU();
  const int64_t batch = 3, maxSeq = 128;
  for (auto [kvHeads, headDim] : std::vector<std::pair<int64_t, int64_t>>{{2, 64}, {8, 128}, {3, 6}})
    for (std::optional<RopeStyle> rope : {std::optional<RopeStyle>(), std::optional<RopeStyle>(RopeStyle::Half),
                                          std::optional<RopeStyle>(RopeStyle::Interleaved)}) {
      const int64_t kvd = kvHeads * headDim;
      KvWriteSpec spec(kvHeads, headDim, rope);
      SCOPED_TRACE(spec.name());
      GPU_TRY(kernel, gputest::buildKernel(spec));
      RopeCase rc{rope.value_or(RopeStyle::Half), "theta = 10000.0, schedule = default", "default", kvHeads, headDim};
      OneOp o = ropeOp(rc);
      ASSERT_TRUE(o.op);
      GPU_TRY(freqBuf, gputest::uploadVector(invFreq(*o.op)));
      std::mt19937 rng(kvd);
      for (int64_t rows : kRows) {
        // Distinct random slots; with more than one row, the last is invalid (pos = max_seq, or seq = -1)
        // and must be skipped.
        std::vector<int64_t> all(batch * maxSeq);
        std::iota(all.begin(), all.end(), 0);
        std::shuffle(all.begin(), all.end(), rng);
        std::vector<int32_t> seqOf(rows), posOf(rows);
        std::vector<int64_t> slots(rows);
        for (int64_t r = 0; r < rows; ++r) {
          slots[r] = all[r];
          seqOf[r] = int32_t(all[r] / maxSeq);
          posOf[r] = int32_t(all[r] % maxSeq);
        }
        if (rows > 1) {
          slots[rows - 1] = -1;
          if (rows % 2) posOf[rows - 1] = int32_t(maxSeq);
          else seqOf[rows - 1] = -1;
        }
        ir::Tensor k = gputest::randomBf16({rows, kvd}, rng), v = gputest::randomBf16({rows, kvd}, rng);
        std::vector<uint16_t> wantK = gputest::toBf16(k), wantV = gputest::toBf16(v);
        GPU_TRY(kBuf, gputest::uploadBf16(k));
        GPU_TRY(vBuf, gputest::uploadBf16(v));
        GPU_TRY(sBuf, gputest::uploadVector(seqOf));
        GPU_TRY(pBuf, gputest::uploadVector(posOf));
        GPU_TRY(kc, gputest::poisonedBf16(batch * maxSeq * kvd));
        GPU_TRY(vc, gputest::poisonedBf16(batch * maxSeq * kvd));
        KvWriteParams p{.k = kBuf.ptr(), .v = vBuf.ptr(), .k_cache = kc.ptr(), .v_cache = vc.ptr(),
                        .seq_of = sBuf.ptr(), .pos_of = pBuf.ptr(), .rows = int(rows), .max_seq = int(maxSeq)};
        if (rope) p.inv_freq = freqBuf.ptr();
        MINFER_ASSERT_OK(run(kernel, spec, rows, p));
        std::vector<uint16_t> kCache(batch * maxSeq * kvd), vCache(kCache.size());
        MINFER_ASSERT_OK(kc.download(kCache.data(), kCache.size() * 2));
        MINFER_ASSERT_OK(vc.download(vCache.data(), vCache.size() * 2));
        const std::string what = spec.name() + " rows=" + std::to_string(rows);
        expectCache(vCache, kvd, slots, wantV, what + " v");
        if (!rope) {
          expectCache(kCache, kvd, slots, wantK, what + " k");
          continue;
        }
        // k was roped at its cache position: compare the written rows with the interpreter's rope, and
        // check the rest kept their poison through expectCache with the kernel's own rows.
        ir::Tensor pos({rows});
        for (int64_t r = 0; r < rows; ++r) pos.data[r] = float(posOf[r]);
        ir::Tensor roped = reference(o, {&k, &pos});
        std::vector<uint16_t> gotRows(rows * kvd, 0);
        int64_t valid = rows > 1 ? rows - 1 : rows;
        ir::Tensor got({valid, kvd}), want({valid, kvd});
        for (int64_t r = 0; r < valid; ++r)
          for (int64_t i = 0; i < kvd; ++i) {
            gotRows[r * kvd + i] = kCache[slots[r] * kvd + i];
            got.row(r)[i] = bf16ToFloat(gotRows[r * kvd + i]);
            want.row(r)[i] = roped.row(r)[i];
          }
        expectCache(kCache, kvd, slots, gotRows, what + " k"); // unwritten rows kept their poison
        expectClose(got, want, what + " roped k");
      }
    }
}

} // namespace
