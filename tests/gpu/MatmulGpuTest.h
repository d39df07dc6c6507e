// tests/gpu/MatmulGpuTest.h — what the gemm and gemv GPU tests share: a one-matmul IR module whose ops
// (matmul with and without bias, add, and each activation) give the reference for every epilogue through
// ir::evalOp; bf16 inputs drawn once per shape; the launch of a matmul kernel; and a comparison that says
// which element went wrong.
//
// The reference of epilogue e on rows R of A is evalOp(matmul[, bias]) on those rows, then evalOp(act),
// evalOp(scale), then evalOp(add residual): the interpreter's own ops, in the policy's order (epilogue.cuh). For large
// problems only a sample of rows is checked against the reference (every tile boundary of the last rows
// included), but every element of the output is checked to have been written.
#pragma once

#include "GpuHarness.h"

#include "common/TestModels.h"
#include "compiler/kernels/Epilogue.h"
#include "jit/KernelCache.h"
#include "jit/ParallelCompile.h"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

namespace minfer::gputest {

// A weight shape [n, k] of the parameterised matmul tests, named for test output.
struct Shape {
  int64_t n, k;
};
inline void PrintTo(const Shape &s, std::ostream *os) { *os << "N=" << s.n << " K=" << s.k; }
inline std::string shapeName(const testing::TestParamInfo<Shape> &info) {
  return "n" + std::to_string(info.param.n) + "_k" + std::to_string(info.param.k);
}

// The message of a failed Expected (taken), "" for a value: for one failure line over several results.
template <typename T> std::string errorText(llvm::Expected<T> &e) {
  return e ? std::string() : llvm::toString(e.takeError());
}

// The factor a scaling epilogue multiplies by in these tests.
constexpr float kEpilogueScale = 0.75f;

// Runs a gemm or gemv kernel over `rows` with a pointwise epilogue's arguments (scale kEpilogueScale).
inline llvm::Error launchMatmul(const GpuKernel &k, const KernelSpec &spec, int64_t rows, MatmulParams p) {
  p.rows = static_cast<int32_t>(rows);
  p.epi.scale = kEpilogueScale;
  if (auto e = launchKernel(k.fn, spec, rows, p)) return e;
  return cuda::synchronize();
}

// W [n, k] ~ N(0, 1/k) so that the accumulators are ~N(0, 1) (activations see both signs and the tanh
// knee); A, bias and residual ~ N(0, 1). All bf16-rounded.
class MatmulProblem {
public:
  int64_t n, k;

  static std::unique_ptr<MatmulProblem> create(int64_t n, int64_t k, unsigned seed) {
    auto p = std::unique_ptr<MatmulProblem>(new MatmulProblem(n, k));
    p->module = test::parseVerified(moduleText(n, k));
    if (!p->module) return nullptr;
    for (const ir::Item &item : p->module->items) {
      const ir::Op *op = std::get_if<ir::Op>(&item);
      if (!op) continue;
      if (op->kind == ir::OpKind::Matmul) (op->operands.size() == 3 ? p->matmulBias : p->matmul) = op;
      else p->pointwise[op->info().mnemonic.str()] = op;
    }
    std::mt19937 rng(seed);
    p->w = randomBf16({n, k}, rng, 0, 1 / std::sqrt(float(k)));
    p->bias = randomBf16({n}, rng);
    auto wBuf = uploadBf16(p->w), bBuf = uploadBf16(p->bias);
    if (!wBuf || !bBuf) {
      ADD_FAILURE() << "upload: " << errorText(wBuf) << errorText(bBuf);
      return nullptr;
    }
    p->wDev = std::move(*wBuf);
    p->biasDev = std::move(*bBuf);
    return p;
  }

  // The reference for rows `rows` of A (a [rows, k] tensor of those rows) and the matching rows of the
  // residual, for epilogue `e`.
  llvm::Expected<ir::Tensor> reference(const ir::Tensor &aRows, const ir::Tensor &resRows, Epilogue e) const {
    auto acc = e.bias ? ir::evalOp(*module, *matmulBias, {&aRows, &w, &bias})
                      : ir::evalOp(*module, *matmul, {&aRows, &w});
    if (!acc) return acc.takeError();
    ir::Tensor v = std::move((*acc)[0]);
    if (e.act != Activation::None) {
      auto act = ir::evalOp(*module, *pointwise.at(ir::enumText(e.act).str()), {&v});
      if (!act) return act.takeError();
      v = std::move((*act)[0]);
    }
    if (e.scale) {
      auto scaled = ir::evalOp(*module, *pointwise.at("scale"), {&v});
      if (!scaled) return scaled.takeError();
      v = std::move((*scaled)[0]);
    }
    if (e.residual) {
      auto sum = ir::evalOp(*module, *pointwise.at("add"), {&v, &resRows});
      if (!sum) return sum.takeError();
      v = std::move((*sum)[0]);
    }
    return v;
  }

  cuda::DevicePtr weightsPtr() const { return wDev.ptr(); } // W [n, k]
  cuda::DevicePtr biasPtr() const { return biasDev.ptr(); }   // bias [n]

private:
  MatmulProblem(int64_t n, int64_t k) : n(n), k(k) {}

  // %x [T, k] from an embedding (any value of the right type will do: evalOp takes operands directly).
  static std::string moduleText(int64_t n, int64_t k) {
    std::ostringstream s;
    s << "model \"matmul_test\"\n\ndim n = " << n << "\ndim k = " << k << "\n\n"
      << "weight @e : bf16[4, k] = \"e\"\nweight @w : bf16[n, k] = \"w\"\nweight @b : bf16[n] = \"b\"\n\n"
      << "graph(%tokens: i32[T]) {\n"
      << "  %x = embedding %tokens, @e : bf16[T, k]\n"
      << "  %y = matmul %x, @w : bf16[T, n]\n"
      << "  %yb = matmul %x, @w, @b : bf16[T, n]\n"
      << "  %g1 = gelu_tanh %y : bf16[T, n]\n"
      << "  %g2 = gelu_erf %g1 : bf16[T, n]\n"
      << "  %g3 = silu %g2 : bf16[T, n]\n"
      << "  %g4 = relu %g3 : bf16[T, n]\n"
      << "  %g5 = scale %g4 {factor = " << kEpilogueScale << "} : bf16[T, n]\n"
      << "  %out = add %g5, %yb : bf16[T, n]\n"
      << "  return %out\n}\n";
    return s.str();
  }

  std::unique_ptr<ir::Module> module;
  const ir::Op *matmul = nullptr, *matmulBias = nullptr;
  std::map<std::string, const ir::Op *> pointwise; // add, scale, gelu_tanh, gelu_erf, silu, relu
  ir::Tensor w, bias;
  cuda::DeviceBuffer wDev, biasDev;
};

// The rows checked against the reference: all of them for small problems; else the first rows, the last
// 136 (the tails of every tile height), and an even sample between.
inline std::vector<int64_t> rowsToCheck(int64_t m, int64_t n, int64_t k) {
  std::vector<int64_t> rows;
  if (m * n * k <= (int64_t(1) << 28)) {
    for (int64_t r = 0; r < m; ++r) rows.push_back(r);
    return rows;
  }
  std::set<int64_t> s;
  for (int64_t r = 0; r < std::min<int64_t>(m, 8); ++r) s.insert(r);
  for (int64_t r = std::max<int64_t>(0, m - 136); r < m; ++r)
    if (r >= m - 8 || r % 8 == 0 || r % 64 == 63) s.insert(r);
  for (int64_t r = 0; r < m; r += std::max<int64_t>(1, m / 24)) s.insert(r);
  return {s.begin(), s.end()};
}

inline ir::Tensor selectRows(const ir::Tensor &t, const std::vector<int64_t> &rows) {
  ir::Tensor out({static_cast<int64_t>(rows.size()), t.cols()});
  for (size_t i = 0; i < rows.size(); ++i) std::copy_n(t.row(rows[i]), t.cols(), out.row(static_cast<int64_t>(i)));
  return out;
}

// Compares rows `rows` of the kernel's output with the reference and checks that every element of the
// output was written; on failure says where: the first unwritten element and the worst one.
inline void expectOutputMatches(const ir::Tensor &got, const std::vector<int64_t> &rows, const ir::Tensor &ref,
                                const std::string &what) {
  size_t nan = countNaN(got);
  if (nan) {
    int64_t first = 0;
    while (!std::isnan(got.data[first])) ++first;
    ADD_FAILURE() << what << ": " << nan << " of " << got.numel() << " elements unwritten or NaN; first at row "
                  << first / got.cols() << " col " << first % got.cols();
    return;
  }
  ir::Tensor sub = selectRows(got, rows);
  double err = relError(sub, ref);
  if (err < kBf16Tolerance) return;
  int64_t worst = 0;
  double worstDiff = -1;
  for (int64_t i = 0; i < sub.numel(); ++i) {
    double d = std::fabs(double(sub.data[i]) - ref.data[i]);
    if (d > worstDiff) worstDiff = d, worst = i;
  }
  ADD_FAILURE() << what << ": relative error " << err << " over " << rows.size() << " rows; worst at row "
                << rows[worst / sub.cols()] << " col " << worst % sub.cols() << ": got " << sub.data[worst]
                << ", want " << ref.data[worst];
}

// Compiles each spec once per test (kernels are looked up by name).
class KernelSet {
public:
  // Compiles `specs` for `target` at once, in worker processes through the default disk cache
  // (jit/ParallelCompile.h, as FusedMatmul does), so that get() then only loads them from the cache. One at a
  // time in this process NVRTC took most of a GemmKernel shape's 35-95 s (~80 kernels each). A compile error
  // fails the test and names the kernel.
  void precompile(const std::vector<const KernelSpec *> &specs, const Target &target) {
    std::vector<KernelSource> sources;
    std::set<std::string> names;
    for (const KernelSpec *spec : specs)
      if (names.insert(spec->name()).second) sources.push_back(kernelSource(*spec));
    cache.emplace(KernelCache::openDefault());
    cacheTarget = target;
    auto compiled = compileAll(sources, target, {}, *cache, std::max(1u, std::thread::hardware_concurrency()));
    if (!compiled) ADD_FAILURE() << "compiling " << sources.size() << " kernels: " << llvm::toString(compiled.takeError());
  }

  const GpuKernel *get(const KernelSpec &spec) {
    auto it = kernels.find(spec.name());
    if (it != kernels.end()) return &it->second;
    auto built = cache ? loadKernel(spec, cacheTarget, &*cache) : buildKernel(spec);
    if (!built) {
      ADD_FAILURE() << "building " << spec.name() << ": " << llvm::toString(built.takeError());
      return nullptr;
    }
    return &kernels.emplace(spec.name(), std::move(*built)).first->second;
  }

private:
  std::map<std::string, GpuKernel> kernels;
  std::optional<KernelCache> cache; // after precompile(): where the kernels are
  Target cacheTarget;
};

// What a matmul's prologue reads besides W in MatmulCase's checks: its gains, LayerNorm's beta and eps; rows of
// A to use instead of the case's own (as many, of the same width); the rows' squares given in rowSqParts parts a
// row.
struct PrologueInputs {
  cuda::DevicePtr gamma = 0, beta = 0;
  float eps = 0;
  cuda::DevicePtr otherA = 0, rowSq = 0;
  int rowSqParts = 0;
};

// One M of a matmul test: A [m, k] and the residual [m, n] drawn from `seed` and uploaded, the output
// C [m, n], the rows checked, and the reference of each epilogue on those rows (computed on first use).
class MatmulCase {
public:
  static std::unique_ptr<MatmulCase> create(const MatmulProblem &p, int64_t m, unsigned seed) {
    auto c = std::unique_ptr<MatmulCase>(new MatmulCase(p, m));
    std::mt19937 rng(seed);
    c->a = randomBf16({m, p.k}, rng);
    c->res = randomBf16({m, p.n}, rng);
    auto aBuf = uploadBf16(c->a), resBuf = uploadBf16(c->res);
    auto cBuf = cuda::DeviceBuffer::alloc(static_cast<size_t>(m * p.n * 2));
    if (!aBuf || !resBuf || !cBuf) {
      ADD_FAILURE() << "device buffers for M=" << m << ": " << errorText(aBuf) << errorText(resBuf)
                    << errorText(cBuf);
      return nullptr;
    }
    c->aDev = std::move(*aBuf);
    c->resDev = std::move(*resBuf);
    c->cDev = std::move(*cBuf);
    c->rows = rowsToCheck(m, p.n, p.k);
    c->aRows = selectRows(c->a, c->rows);
    c->resRows = selectRows(c->res, c->rows);
    return c;
  }

  // The reference of epilogue `e`; nullptr, with the failure added, when the interpreter fails.
  const ir::Tensor *reference(Epilogue e) {
    auto it = refs.find(e);
    if (it != refs.end()) return &it->second;
    auto r = problem.reference(aRows, resRows, e);
    if (!r) {
      ADD_FAILURE() << "reference: " << llvm::toString(r.takeError());
      return nullptr;
    }
    return &refs.emplace(e, std::move(*r)).first->second;
  }

  // Runs `spec` (a GemmSpec or GemvSpec of the problem's shape) with C poisoned first and compares the
  // checked rows with the reference of its epilogue.
  template <typename Spec> void check(KernelSet &kernels, const Spec &spec) {
    if (const ir::Tensor *ref = reference(spec.epi))
      runAndCompare(kernels, spec, resDev.ptr(), *ref, spec.name() + " M=" + std::to_string(m), /*keepC=*/false);
  }

  // The same with an RMS norm of A's rows folded in (spec.pro, gamma on the device as `gammaDev`, bf16): the
  // reference normalises the rows in double, rounds them to bf16 as the norm kernel stores them, then runs
  // the epilogue's reference on them. Row r of A is scaled by 2^(r % 5 - 2) first (0.25 to 4, exact in
  // bf16): the norm all but undoes it, so a missing or misplaced 1 / rms is off by up to 16 times, where
  // rows of rms ~1 would hide it within the tolerance.
  template <typename Spec>
  // With `givenRowSquares` (a wgmma gemm with Prologue::rowSquares, its gains in W: gamma all ones) the
  // kernel reads the rows' sums of squares instead, given in two unequal parts computed here in double.
  void checkRmsNormed(KernelSet &kernels, const Spec &spec, const ir::Tensor &gamma, cuda::DevicePtr gammaDev, float eps,
                      bool givenRowSquares = false) {
    ir::Tensor scaled = a;
    for (int64_t r = 0; r < scaled.rows(); ++r)
      for (int64_t i = 0; i < scaled.cols(); ++i) scaled.row(r)[i] *= std::ldexp(1.f, static_cast<int>(r % 5) - 2);
    auto scaledDev = uploadBf16(scaled);
    ASSERT_TRUE(bool(scaledDev)) << llvm::toString(scaledDev.takeError());
    std::vector<double> sums(static_cast<size_t>(scaled.rows() * 2));
    for (int64_t r = 0; r < scaled.rows(); ++r)
      for (int64_t i = 0; i < scaled.cols(); ++i) {
        const double x = bf16ToFloat(floatToBf16(scaled.row(r)[i])); // as uploaded
        sums[static_cast<size_t>(r * 2 + (i < scaled.cols() / 3 ? 0 : 1))] += x * x;
      }
    auto partialsDev = uploadVector(std::vector<float>(sums.begin(), sums.end()));
    ASSERT_TRUE(bool(partialsDev)) << llvm::toString(partialsDev.takeError());
    ir::Tensor normed = selectRows(scaled, rows);
    for (int64_t r = 0; r < normed.rows(); ++r) {
      float *x = normed.row(r);
      double squares = 0;
      for (int64_t i = 0; i < normed.cols(); ++i) squares += double(x[i]) * x[i];
      double inv = 1 / std::sqrt(squares / double(normed.cols()) + eps);
      for (int64_t i = 0; i < normed.cols(); ++i) x[i] = bf16ToFloat(floatToBf16(float(x[i] * inv * gamma.data[i])));
    }
    auto ref = problem.reference(normed, resRows, spec.epi);
    ASSERT_TRUE(bool(ref)) << "reference: " << llvm::toString(ref.takeError());
    runAndCompare(kernels, spec, resDev.ptr(), *ref, spec.name() + " M=" + std::to_string(m), /*keepC=*/false,
                  {.gamma = gammaDev,
                   .eps = eps,
                   .otherA = scaledDev->ptr(),
                   .rowSq = givenRowSquares ? partialsDev->ptr() : 0,
                   .rowSqParts = givenRowSquares ? 2 : 0});
  }

  // A folded LayerNorm with f32 gamma and beta (GPT-2's): A's rows scaled and moved far from zero (row r by
  // kOffsets[r % 4]: -300, row 0's, leaves a spread of a few bf16 steps of 2), where a one-pass variance or a subtraction
  // of the mean after the products would lose the spread to cancellation. The reference normalises the rows as
  // uploaded in double, rounds to bf16 (what the norm kernel stores), then multiplies.
  template <typename Spec>
  void checkLayerNormed(KernelSet &kernels, const Spec &spec, const ir::Tensor &gamma, const ir::Tensor &beta,
                        cuda::DevicePtr gammaDev, cuda::DevicePtr betaDev, float eps) {
    static constexpr float kOffsets[] = {-300.f, 24.f, 0.f, 3.f}; // row 0 far off too: M = 1 checks only it
    ir::Tensor shifted = a;
    for (int64_t r = 0; r < shifted.rows(); ++r)
      for (int64_t i = 0; i < shifted.cols(); ++i)
        shifted.row(r)[i] = bf16ToFloat(floatToBf16(shifted.row(r)[i] * std::ldexp(1.f, static_cast<int>(r % 3) - 1) +
                                                    kOffsets[r % 4]));
    auto shiftedDev = uploadBf16(shifted);
    ASSERT_TRUE(bool(shiftedDev)) << llvm::toString(shiftedDev.takeError());
    ir::Tensor normed = selectRows(shifted, rows);
    for (int64_t r = 0; r < normed.rows(); ++r) {
      float *x = normed.row(r);
      const int64_t k = normed.cols();
      double mean = 0, var = 0;
      for (int64_t i = 0; i < k; ++i) mean += x[i];
      mean /= double(k);
      for (int64_t i = 0; i < k; ++i) var += (x[i] - mean) * (x[i] - mean);
      const double inv = 1 / std::sqrt(var / double(k) + eps);
      for (int64_t i = 0; i < k; ++i)
        x[i] = bf16ToFloat(floatToBf16(float((x[i] - mean) * inv * gamma.data[i] + beta.data[i])));
    }
    auto ref = problem.reference(normed, resRows, spec.epi);
    ASSERT_TRUE(bool(ref)) << "reference: " << llvm::toString(ref.takeError());
    runAndCompare(kernels, spec, resDev.ptr(), *ref, spec.name() + " LayerNorm, M=" + std::to_string(m), /*keepC=*/false,
                  {.gamma = gammaDev, .beta = betaDev, .eps = eps, .otherA = shiftedDev->ptr()});
  }

  // The same in place: C is the residual buffer (the residual stream updated by an output projection).
  template <typename Spec> void checkInPlace(KernelSet &kernels, const Spec &spec) {
    const ir::Tensor *ref = reference(spec.epi);
    if (!ref) return;
    MINFER_ASSERT_OK(cDev.upload(toBf16(res).data(), static_cast<size_t>(m * problem.n * 2)));
    runAndCompare(kernels, spec, cDev.ptr(), *ref, spec.name() + " in place, M=" + std::to_string(m),
                  /*keepC=*/true);
  }

  // Runs `spec` over no rows of A: the launch succeeds and leaves C (poisoned first) as it was.
  void checkNoRows(KernelSet &kernels, const KernelSpec &spec) {
    const GpuKernel *k = kernels.get(spec);
    if (!k) return;
    MINFER_ASSERT_OK(cDev.fill(0xFF));
    MatmulParams params{.C = cDev.ptr(), .A = aDev.ptr(), .W = problem.weightsPtr()};
    params.epi.bias = problem.biasPtr();
    params.epi.residual = resDev.ptr();
    MINFER_ASSERT_OK(launchMatmul(*k, spec, 0, params));
    std::vector<uint16_t> bits(static_cast<size_t>(m * problem.n));
    MINFER_ASSERT_OK(cDev.download(bits.data(), bits.size() * 2));
    EXPECT_EQ(static_cast<size_t>(std::count(bits.begin(), bits.end(), uint16_t(0xFFFF))), bits.size())
        << spec.name() << " wrote C with no rows";
  }

  const int64_t m;

private:
  MatmulCase(const MatmulProblem &p, int64_t m) : m(m), problem(p) {}

  // Runs `spec` over the m rows of A (or of pro.otherA) with C as the output (poisoned first unless `keepC`)
  // and compares the checked rows with `ref`.
  void runAndCompare(KernelSet &kernels, const KernelSpec &spec, cuda::DevicePtr residual, const ir::Tensor &ref,
                     const std::string &what, bool keepC, const PrologueInputs &pro = {}) {
    const GpuKernel *k = kernels.get(spec);
    if (!k) return;
    if (!keepC) MINFER_ASSERT_OK(cDev.fill(0xFF));
    MatmulParams params{.C = cDev.ptr(), .A = pro.otherA ? pro.otherA : aDev.ptr(), .W = problem.weightsPtr()};
    params.epi.bias = problem.biasPtr();
    params.epi.residual = residual;
    params.epi.gamma = pro.gamma;
    params.epi.beta = pro.beta;
    params.epi.eps = pro.eps;
    params.epi.row_sq = pro.rowSq;
    params.epi.row_sq_parts = pro.rowSqParts;
    MINFER_ASSERT_OK(launchMatmul(*k, spec, m, params));
    auto got = downloadBf16(cDev, {m, problem.n});
    ASSERT_TRUE(bool(got)) << llvm::toString(got.takeError());
    expectOutputMatches(*got, rows, ref, what);
  }

  const MatmulProblem &problem;
  ir::Tensor a, res;             // A [m, k], residual [m, n]
  cuda::DeviceBuffer aDev, resDev, cDev;
  std::vector<int64_t> rows;     // the rows of C checked against the reference
  ir::Tensor aRows, resRows;     // those rows of A and of the residual
  std::map<Epilogue, ir::Tensor> refs;
};

// The fixture of the parameterised gemm and gemv tests; GetParam() is the weight shape [n, k]. Skips without
// a GPU; else holds the device's target and info, the problem of the shape (W and bias drawn from seed
// n * ProblemSeed + k) and the kernels built so far. caseFor(m) draws one M's inputs from m * CaseSeed + n.
template <unsigned ProblemSeed, unsigned CaseSeed> class MatmulKernelTest : public testing::TestWithParam<Shape> {
protected:
  void SetUp() override {
    MINFER_REQUIRE_GPU();
    GPU_TRY(t, deviceTarget());
    target = t;
    GPU_TRY(i, cuda::deviceInfo());
    info = i;
    problem = MatmulProblem::create(n, k, static_cast<unsigned>(n * ProblemSeed + k));
    ASSERT_TRUE(problem);
  }

  // One M's inputs and output; nullptr (the failure added) when the device buffers cannot be had.
  std::unique_ptr<MatmulCase> caseFor(int64_t m) {
    return MatmulCase::create(*problem, m, static_cast<unsigned>(m * CaseSeed + n));
  }

  const int64_t n = GetParam().n, k = GetParam().k;
  Target target;
  cuda::DeviceInfo info;
  std::unique_ptr<MatmulProblem> problem;
  KernelSet kernels;
};

} // namespace minfer::gputest
