// tests/gpu/GemmGpuTest.cpp — templates/gemm.cuh on the GPU against the interpreter's matmul (CTest label
// `gpu`; skipped with the reason when there is no GPU).
//
// For each (N, K) — square, odd N (the test vocab 321), K not a multiple of BK (96, 200), the TinyLlama
// projections — and each M in {1, 3, 17, 64, 130, 2048} (tails of every tile height), three tiles (the
// heuristic default, 64x64, 128x128x32 with 3 stages and 2x4 warps) run with the epilogues none, bias,
// residual and bias + gelu_tanh; outputs are poisoned first and compared with ir::evalOp. Every epilogue
// runs on two small shapes, and the residual epilogue also in place (C aliasing the residual).
#include "MatmulGpuTest.h"

#include "compiler/kernels/Gemm.h"

using namespace minfer;
using namespace minfer::gputest;

namespace {

class GemmKernel : public testing::TestWithParam<Shape> {};

TEST_P(GemmKernel, MatchesInterpreter) {
  MINFER_REQUIRE_GPU();
  const auto [n, k] = GetParam();
  auto target = deviceTarget();
  ASSERT_TRUE(bool(target)) << llvm::toString(target.takeError());
  auto info = cuda::deviceInfo();
  ASSERT_TRUE(bool(info)) << llvm::toString(info.takeError());
  auto problem = MatmulProblem::create(n, k, static_cast<unsigned>(n * 31 + k));
  ASSERT_TRUE(problem);
  KernelSet kernels;

  for (int64_t m : {1, 3, 17, 64, 130, 2048}) {
    std::mt19937 rng(static_cast<unsigned>(m * 7919 + n));
    ir::Tensor a = randomBf16({m, k}, rng), res = randomBf16({m, n}, rng);
    auto aDev = uploadBf16(a), resDev = uploadBf16(res);
    auto cDev = cuda::DeviceBuffer::alloc(static_cast<size_t>(m * n * 2));
    ASSERT_TRUE(aDev && resDev && cDev) << "device buffers for M=" << m;
    std::vector<int64_t> rows = rowsToCheck(m, n, k);
    ir::Tensor aRows = selectRows(a, rows), resRows = selectRows(res, rows);

    std::map<Epilogue, ir::Tensor> refs;
    auto refFor = [&](Epilogue e) -> const ir::Tensor * {
      if (!refs.count(e)) {
        auto r = problem->reference(aRows, resRows, e);
        if (!r) {
          ADD_FAILURE() << "reference: " << llvm::toString(r.takeError());
          return nullptr;
        }
        refs[e] = std::move(*r);
      }
      return &refs[e];
    };

    std::vector<GemmTile> tiles = {defaultGemmTile(*target, m, n, k, info->smCount), GemmTile{64, 64, 32, 4, 2, 2},
                                   GemmTile{128, 128, 32, 3, 2, 4}};
    for (size_t i = 0; i < tiles.size(); ++i) {
      if (std::find(tiles.begin(), tiles.begin() + i, tiles[i]) != tiles.begin() + i) continue;
      for (Epilogue e : {Epilogue::None, Epilogue::Bias, Epilogue::Residual, Epilogue::BiasGeluTanh}) {
        GemmSpec spec(n, k, e, tiles[i]);
        const ir::Tensor *ref = refFor(e);
        if (!ref) return;
        runAndCompare(kernels, spec, *problem, m, *aDev, *cDev, resDev->ptr(), rows, *ref,
                      spec.name() + " M=" + std::to_string(m));
      }
    }

    // In place: C is the residual buffer (the residual stream updated by an output projection).
    GemmSpec spec(n, k, Epilogue::Residual, tiles[0]);
    MINFER_ASSERT_OK(cDev->upload(toBf16(res).data(), static_cast<size_t>(m * n * 2)));
    runAndCompare(kernels, spec, *problem, m, *aDev, *cDev, cDev->ptr(), rows, *refFor(Epilogue::Residual),
                  spec.name() + " in place, M=" + std::to_string(m), /*keepC=*/true);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemmKernel,
                         testing::Values(Shape{64, 64}, Shape{321, 64}, Shape{136, 96}, Shape{256, 2048},
                                         Shape{2048, 2048}, Shape{5632, 2048}, Shape{321, 200}),
                         shapeName);

// Every epilogue policy, on an odd N (scalar stores) and an even one (paired stores), M with a tail.
TEST(GemmKernelEpilogues, EveryEpilogueMatchesInterpreter) {
  MINFER_REQUIRE_GPU();
  for (Shape s : {Shape{321, 64}, Shape{136, 96}}) {
    auto problem = MatmulProblem::create(s.n, s.k, 11);
    ASSERT_TRUE(problem);
    KernelSet kernels;
    const int64_t m = 130;
    std::mt19937 rng(5);
    ir::Tensor a = randomBf16({m, s.k}, rng), res = randomBf16({m, s.n}, rng);
    auto aDev = uploadBf16(a), resDev = uploadBf16(res);
    auto cDev = cuda::DeviceBuffer::alloc(static_cast<size_t>(m * s.n * 2));
    ASSERT_TRUE(aDev && resDev && cDev);
    std::vector<int64_t> rows = rowsToCheck(m, s.n, s.k);
    std::vector<Epilogue> epilogues = allPointwiseEpilogues();
    epilogues.push_back(Epilogue::pointwise(true, Activation::GeluTanh, true, true));
    for (const Epilogue &e : epilogues) {
      auto ref = problem->reference(a, res, e);
      ASSERT_TRUE(bool(ref)) << llvm::toString(ref.takeError());
      GemmSpec spec(s.n, s.k, e, GemmTile{64, 64, 64, 3, 2, 2});
      runAndCompare(kernels, spec, *problem, m, *aDev, *cDev, resDev->ptr(), rows, *ref, spec.name() + " M=130");
    }
  }
}

} // namespace
