// tests/gpu/GemvGpuTest.cpp — templates/gemv.cuh and gemv_wgmma.cuh on the GPU against the interpreter's
// matmul (CTest label `gpu`; skipped with the reason when there is no GPU).
//
// The kernels gemv (fp32 FMA) and gemvMma (tensor cores), and on sm_90a gemvWgmma. For each (N, K) of the
// gemm test plus GPT-2's lm_head (N = 50257, odd, with K = 768 = 3 x 256), every M from 1 to 8, 16 and 19
// runs the heuristic default tile (FMA up to M = 2, tensor cores above; wgmma from M = 3 on sm_90a, at 2 from
// 16M weights and at 1 from 4M) with the epilogues none, bias, residual and bias + gelu_tanh, and four other
// tiles (FMA: one row per warp in 8-warp blocks, 4 rows per warp in 2-warp blocks; tensor cores: 2 and 16
// warps); M = 3 runs every epilogue; M = 11 runs 8-row tiles and M = 19 16-row tiles (rows beyond MAX_M take
// a second pass over W); the residual epilogue also runs in place. On sm_90a three wgmma tiles more: slices
// of 256, 64 and 128 of K with splits 1, 2 and 4 (the last in place too), each also over no rows at M = 1 and
// with a folded RMS norm (the reference normalises A in double first). Every M also runs a folded LayerNorm
// (f32 gains, rows moved far from zero) in three FMA tiles and one tensor-core tile. Outputs are poisoned first
// and compared with ir::evalOp.
#include "MatmulGpuTest.h"

#include "compiler/kernels/Gemm.h"
#include "compiler/kernels/Gemv.h"

using namespace minfer;
using namespace minfer::gputest;

namespace {

// W and bias from seed n * 17 + k, A and the residual from m * 104729 + n.
class GemvKernel : public MatmulKernelTest<17, 104729> {};

TEST_P(GemvKernel, MatchesInterpreter) {
  // gamma of a folded RMS norm, ~N(1, 0.2), bf16.
  std::mt19937 rng(static_cast<unsigned>(k));
  const ir::Tensor gamma = randomBf16({k}, rng, 1, 0.2f);
  GPU_TRY(gammaDev, uploadBf16(gamma));
  ir::Tensor ones({k});
  std::fill(ones.data.begin(), ones.data.end(), 1.f);
  // gamma and beta of a folded LayerNorm, f32 (GPT-2's), ~N(1, 0.2) and ~N(0, 0.2).
  const ir::Tensor lnGamma = randomBf16({k}, rng, 1, 0.2f), lnBeta = randomBf16({k}, rng, 0, 0.2f);
  GPU_TRY(lnGammaDev, uploadVector(lnGamma.data));
  GPU_TRY(lnBetaDev, uploadVector(lnBeta.data));
  const Prologue layer{Prologue::Kind::Layer, ir::DType::F32};
  for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 8, 11, 16, 19}) {
    auto c = caseFor(m);
    ASSERT_TRUE(c);
    auto run = [&](GemvTile tile, Epilogue e) { c->check(kernels, GemvSpec(n, k, e, tile)); };
    const GemvTile dflt = defaultGemvTile(target, std::min(m, kGemvMaxRows), n, k, info.smCount);
    for (Epilogue e : {Epilogue::None, Epilogue::Bias, Epilogue::Residual, Epilogue::BiasGeluTanh}) run(dflt, e);
    run(GemvTile{dflt.maxM, 1, 8, false}, Epilogue::BiasResidual);
    run(GemvTile{dflt.maxM, 4, 2, false}, Epilogue::None);
    run(GemvTile{dflt.maxM, 1, 2, true}, Epilogue::Bias);
    run(GemvTile{dflt.maxM, 1, 16, true}, Epilogue::Residual);
    if (m == 3)
      for (const Epilogue &e : allPointwiseEpilogues()) run(dflt, e);
    run(dflt, Epilogue::pointwise(true, Activation::Silu, true, true));
    c->checkInPlace(kernels, GemvSpec(n, k, Epilogue::Residual, dflt));
    // A folded LayerNorm (the block's two-pass statistics) on rows far from zero: the FMA kernel in three tiles
    // (4 rows a warp: GPT-2's lm_head at one row on sm_90a), the tensor-core one in one.
    for (GemvTile t : {GemvTile{dflt.maxM, 2, 4, false}, GemvTile{dflt.maxM, 1, 8, false}, GemvTile{dflt.maxM, 4, 4, false},
                       GemvTile{dflt.maxM, 1, 4, true}})
      c->checkLayerNormed(kernels, GemvSpec(n, k, Epilogue::BiasGeluTanh, t, layer), lnGamma, lnBeta, lnGammaDev.ptr(),
                          lnBetaDev.ptr(), 1e-5f);
    if (target.hasWgmma()) {
      // The wgmma kernel: no split in 256-wide slices (K = 96 and 200: boxes past K), a split of 2 through a
      // ring of 2 64-wide slots (it wraps every other slice), a split of 4 in 128-wide slices (where K has
      // the slices), in place too, and a split of 3 in 64-wide slices (ranks with unequal shares of K).
      const Epilogue es[] = {Epilogue::BiasGeluTanh, Epilogue::Residual, Epilogue::Bias, Epilogue::Residual};
      const int bks[] = {256, 64, 128, 64}, splits[] = {1, 2, 4, 3};
      for (int i = 0; i < 4; ++i) {
        GemvTile t = GemvTile::hopper(dflt.maxM, bks[i], i == 1 ? 2 : 4, splits[i]);
        if (llvm::Error e = checkGemvTile(t, k, &target)) {
          llvm::consumeError(std::move(e));
          continue;
        }
        run(t, es[i]);
        if (i == 2) c->checkInPlace(kernels, GemvSpec(n, k, Epilogue::Residual, t));
        if (m == 1) c->checkNoRows(kernels, GemvSpec(n, k, es[i], t));
        // A folded RMS norm: each rank's sums of squares meet in rank 0 with its partial products.
        c->checkRmsNormed(kernels, GemvSpec(n, k, es[i], t, Prologue{Prologue::Kind::Rms, ir::DType::BF16}), gamma,
                          gammaDev.ptr(), 1e-5f);
        // With unit gains (gamma rides in W): only the sums of squares, no gamma read (null here).
        c->checkRmsNormed(kernels, GemvSpec(n, k, es[i], t, Prologue::rmsUnitGain()), ones, 0, 1e-5f);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemvKernel,
                         testing::Values(Shape{64, 64}, Shape{321, 64}, Shape{136, 96}, Shape{256, 2048},
                                         Shape{2048, 2048}, Shape{5632, 2048}, Shape{321, 200}, Shape{50257, 768}),
                         shapeName);

} // namespace
