// tests/gpu/GemvGpuTest.cpp — templates/gemv.cuh on the GPU against the interpreter's matmul (CTest label
// `gpu`; skipped with the reason when there is no GPU).
//
// Both kernels, gemv (fp32 FMA) and gemvMma (tensor cores). For each (N, K) of the gemm test plus GPT-2's
// lm_head (N = 50257, odd, with K = 768 = 3 x 256), every M from 1 to 8, 16 and 19 runs the heuristic default tile
// (FMA up to M = 2, tensor cores above) with the epilogues none, bias, residual and bias + gelu_tanh, and
// four other tiles (FMA: one row per warp in 8-warp blocks, 4 rows per warp in 2-warp blocks; tensor
// cores: 2 and 16 warps); M = 3 runs every epilogue; M = 11 runs 8-row tiles and M = 19 16-row tiles (rows beyond MAX_M take a
// second pass over W); the residual epilogue also runs in place. Outputs are poisoned first and compared
// with ir::evalOp.
#include "MatmulGpuTest.h"

#include "compiler/kernels/Gemm.h"
#include "compiler/kernels/Gemv.h"

using namespace minfer;
using namespace minfer::gputest;

namespace {

class GemvKernel : public testing::TestWithParam<Shape> {};

TEST_P(GemvKernel, MatchesInterpreter) {
  MINFER_REQUIRE_GPU();
  const auto [n, k] = GetParam();
  auto target = deviceTarget();
  ASSERT_TRUE(bool(target)) << llvm::toString(target.takeError());
  auto info = cuda::deviceInfo();
  ASSERT_TRUE(bool(info)) << llvm::toString(info.takeError());
  auto problem = MatmulProblem::create(n, k, static_cast<unsigned>(n * 17 + k));
  ASSERT_TRUE(problem);
  KernelSet kernels;

  for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 8, 11, 16, 19}) {
    std::mt19937 rng(static_cast<unsigned>(m * 104729 + n));
    ir::Tensor a = randomBf16({m, k}, rng), res = randomBf16({m, n}, rng);
    auto aDev = uploadBf16(a), resDev = uploadBf16(res);
    auto cDev = cuda::DeviceBuffer::alloc(static_cast<size_t>(m * n * 2));
    ASSERT_TRUE(aDev && resDev && cDev) << "device buffers for M=" << m;
    std::vector<int64_t> rows = rowsToCheck(m, n, k);
    std::map<Epilogue, ir::Tensor> refs;
    auto refFor = [&](Epilogue e) -> const ir::Tensor * {
      if (!refs.count(e)) {
        auto r = problem->reference(a, res, e);
        if (!r) {
          ADD_FAILURE() << "reference: " << llvm::toString(r.takeError());
          return nullptr;
        }
        refs[e] = std::move(*r);
      }
      return &refs[e];
    };
    auto run = [&](GemvTile tile, Epilogue e) {
      const ir::Tensor *ref = refFor(e);
      if (!ref) return;
      GemvSpec spec(n, k, e, tile);
      runAndCompare(kernels, spec, *problem, m, *aDev, *cDev, resDev->ptr(), rows, *ref,
                    spec.name() + " M=" + std::to_string(m));
    };

    const GemvTile dflt = defaultGemvTile(*target, std::min(m, kGemvMaxRows), n, k, info->smCount);
    for (Epilogue e : {Epilogue::None, Epilogue::Bias, Epilogue::Residual, Epilogue::BiasGeluTanh}) run(dflt, e);
    run(GemvTile{dflt.maxM, 1, 8, false}, Epilogue::BiasResidual);
    run(GemvTile{dflt.maxM, 4, 2, false}, Epilogue::None);
    run(GemvTile{dflt.maxM, 1, 2, true}, Epilogue::Bias);
    run(GemvTile{dflt.maxM, 1, 16, true}, Epilogue::Residual);
    if (m == 3)
      for (const Epilogue &e : allPointwiseEpilogues()) run(dflt, e);
    run(dflt, Epilogue::pointwise(true, Activation::Silu, true, true));

    // In place: C is the residual buffer.
    GemvSpec spec(n, k, Epilogue::Residual, dflt);
    MINFER_ASSERT_OK(cDev->upload(toBf16(res).data(), static_cast<size_t>(m * n * 2)));
    runAndCompare(kernels, spec, *problem, m, *aDev, *cDev, cDev->ptr(), rows, *refFor(Epilogue::Residual),
                  spec.name() + " in place, M=" + std::to_string(m), /*keepC=*/true);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemvKernel,
                         testing::Values(Shape{64, 64}, Shape{321, 64}, Shape{136, 96}, Shape{256, 2048},
                                         Shape{2048, 2048}, Shape{5632, 2048}, Shape{321, 200}, Shape{50257, 768}),
                         shapeName);

} // namespace
