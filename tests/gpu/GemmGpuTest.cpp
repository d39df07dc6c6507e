// tests/gpu/GemmGpuTest.cpp — templates/gemm.cuh on the GPU against the interpreter's matmul (CTest label
// `gpu`; skipped with the reason when there is no GPU).
//
// For each (N, K) — square, odd N (the test vocab 321), K not a multiple of BK (96, 200), the TinyLlama
// projections — and each M in {1, 3, 17, 64, 130, 2048} (tails of every tile height), three tiles (the
// heuristic default, 64x64, 128x128x32 with 3 stages and 2x4 warps; on sm_90a also twelve wgmma tiles: three
// widths fitted to the SMs, 80, 176 and 176 as ping-pong, and three run by pairs of blocks that share W) run
// with the epilogues none, bias, residual and bias + gelu_tanh; outputs are poisoned first and compared with ir::evalOp. Every epilogue
// runs on two small shapes, and the residual epilogue also in place (C aliasing the residual). Each wgmma tile
// also runs with a folded RMS norm whose gains ride in W and rows' squares given (Prologue::rmsRowSquares).
// Each test lists its kernels first and compiles them at once in worker processes (KernelSet::precompile).
#include "MatmulGpuTest.h"

#include "compiler/kernels/Gemm.h"

using namespace minfer;
using namespace minfer::gputest;

namespace {

// W and bias from seed n * 31 + k, A and the residual from m * 7919 + n.
class GemmKernel : public MatmulKernelTest<31, 7919> {};

TEST_P(GemmKernel, MatchesInterpreter) {
  ir::Tensor ones({k});
  std::fill(ones.data.begin(), ones.data.end(), 1.f);
  // What runs, per M: each spec checked (kind Plain), in place (C aliasing the residual) or with the folded
  // RMS norm; listed first so that every kernel is compiled at once before the first launch.
  enum class Kind { Plain, InPlace, RmsNormed };
  struct Check {
    int64_t m;
    GemmSpec spec;
    Kind kind;
  };
  std::vector<Check> checks;
  const std::vector<int64_t> ms = {1, 3, 17, 64, 130, 2048};
  for (int64_t m : ms) {
    std::vector<GemmTile> tiles = {defaultGemmTile(target, m, n, k, info.smCount), GemmTile{64, 64, 32, 4, 2, 2},
                                   GemmTile{128, 128, 32, 3, 2, 4}};
    if (target.hasWgmma()) // the wgmma kernel: both block heights, every wgmma width, 2 to 8 slots, both schedules
      for (GemmTile t : {GemmTile::hopper(64, 64, 2), GemmTile::hopper(128, 256, 4), GemmTile::hopper(64, 128, 8),
                         GemmTile::hopper(128, 128, 3), GemmTile::hopperPingpong(128, 4),
                         GemmTile::hopperPingpong(64, 8), GemmTile::hopper(128, 80, 8), // and two fitted widths
                         GemmTile::hopper(64, 176, 7), GemmTile::hopperPingpong(176, 5),
                         // pairs of blocks sharing W (TMA multicast), M tails leaving a pair's second tile empty
                         GemmTile::hopper(128, 80, 8).paired(), GemmTile::hopper(64, 128, 8).paired(),
                         GemmTile::hopperPingpong(128, 4).paired()})
        tiles.push_back(t);
    for (size_t i = 0; i < tiles.size(); ++i) {
      if (std::find(tiles.begin(), tiles.begin() + i, tiles[i]) != tiles.begin() + i) continue;
      for (Epilogue e : {Epilogue::None, Epilogue::Bias, Epilogue::Residual, Epilogue::BiasGeluTanh})
        checks.push_back({m, GemmSpec(n, k, e, tiles[i]), Kind::Plain});
    }
    checks.push_back({m, GemmSpec(n, k, Epilogue::Residual, tiles[0]), Kind::InPlace});
    // A folded RMS norm whose gains ride in W (the reference normalises with unit gains) and whose rows'
    // squares are given: every wgmma tile, rows of different scales, the M tails (rows past M read none).
    for (size_t i = 0; i < tiles.size(); ++i)
      if (tiles[i].wgmma && std::find(tiles.begin(), tiles.begin() + i, tiles[i]) == tiles.begin() + i)
        checks.push_back({m,
                          GemmSpec(n, k, i % 2 ? Epilogue::Residual : Epilogue::Bias, tiles[i],
                                   Prologue::rmsRowSquares()),
                          Kind::RmsNormed});
    if (target.hasWgmma()) {
      // Ping-pong on one block: its consumers take every other tile of the whole matrix, in place.
      GemmSpec one(n, k, Epilogue::Residual, GemmTile::hopperPingpong(128, 3));
      one.smCount = 1;
      checks.push_back({m, one, Kind::InPlace});
      // The same on one pair of blocks: each walks every other unit's tile of its rank.
      GemmSpec pair(n, k, Epilogue::Residual, GemmTile::hopperPingpong(128, 3).paired());
      pair.smCount = 2;
      checks.push_back({m, pair, Kind::InPlace});
    }
  }
  std::vector<const KernelSpec *> specs;
  for (const Check &c : checks) specs.push_back(&c.spec);
  kernels.precompile(specs, target);

  for (int64_t m : ms) {
    auto c = caseFor(m);
    ASSERT_TRUE(c);
    for (const Check &check : checks) {
      if (check.m != m) continue;
      switch (check.kind) {
      case Kind::Plain: c->check(kernels, check.spec); break;
      case Kind::InPlace: c->checkInPlace(kernels, check.spec); break;
      case Kind::RmsNormed: c->checkRmsNormed(kernels, check.spec, ones, 0, 1e-5f, /*givenRowSquares=*/true); break;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemmKernel,
                         testing::Values(Shape{64, 64}, Shape{321, 64}, Shape{136, 96}, Shape{256, 2048},
                                         Shape{2048, 2048}, Shape{5632, 2048}, Shape{321, 200}),
                         shapeName);

// Every epilogue policy, on an odd N (scalar stores) and an even one (paired stores), M with a tail.
TEST(GemmKernelEpilogues, EveryEpilogueMatchesInterpreter) {
  MINFER_REQUIRE_GPU();
  GPU_TRY(target, deviceTarget());
  for (Shape s : {Shape{321, 64}, Shape{136, 96}}) {
    auto problem = MatmulProblem::create(s.n, s.k, 11);
    ASSERT_TRUE(problem);
    KernelSet kernels;
    auto c = MatmulCase::create(*problem, /*m=*/130, /*seed=*/5);
    ASSERT_TRUE(c);
    std::vector<Epilogue> epilogues = allPointwiseEpilogues();
    epilogues.push_back(Epilogue::pointwise(true, Activation::GeluTanh, true, true));
    std::vector<GemmTile> tiles = {GemmTile{64, 64, 64, 3, 2, 2}};
    if (target.hasWgmma()) {
      tiles.push_back(GemmTile::hopper(128, 64, 4));
      tiles.push_back(GemmTile::hopperPingpong(64, 4));
      tiles.push_back(GemmTile::hopper(128, 96, 5)); // a fitted width: 12 slices a row, residual groups of 12
      tiles.push_back(GemmTile::hopper(64, 128, 4).paired());
    }
    std::vector<GemmSpec> specs;
    for (const GemmTile &t : tiles)
      for (const Epilogue &e : epilogues) specs.push_back(GemmSpec(s.n, s.k, e, t));
    std::vector<const KernelSpec *> all;
    for (const GemmSpec &spec : specs) all.push_back(&spec);
    kernels.precompile(all, target); // every kernel at once, before the first launch
    for (const GemmSpec &spec : specs) c->check(kernels, spec);
  }
}

} // namespace
