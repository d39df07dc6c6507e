// compiler/kernels/Gemv.h — the decode matmul kernel family (templates/gemv.cuh): C[M, N] = epi(A[M, K] ·
// W[N, K]^T) for M of 1 to 8 rows, bound by reading W once. Same kernel arguments as gemm (Gemm.h):
//   bf16 *C [M, N], const bf16 *A [M, K], const bf16 *W [N, K], int M, EpiParams {bias [N], residual [M, N]}
#pragma once

#include "compiler/Target.h"
#include "compiler/kernels/Epilogue.h"
#include "compiler/kernels/KernelSpec.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace minfer {

// Up to this many rows a matmul is memory-bound on W and runs as a gemv; above it, gemm's tensor cores win.
constexpr int64_t kGemvMaxRows = 8;

// A warp owns rowsPerWarp rows of W and computes them for up to maxM rows of A at once; a block is
// `warps` warps. M above maxM stays correct (W is read once per maxM rows) but wastes bandwidth.
struct GemvTile {
  int maxM = 1, rowsPerWarp = 1, warps = 4;

  int threads() const { return 32 * warps; }
  int rowsPerBlock() const { return rowsPerWarp * warps; }
  // "m4_r2_w4", as it appears in spec names.
  std::string str() const;
  bool operator==(const GemvTile &o) const = default;
  friend std::ostream &operator<<(std::ostream &os, const GemvTile &t) { return os << t.str(); }
};

// Success when gemv.cuh accepts `tile` for this K, else why not (the template's static_asserts).
llvm::Error checkGemvTile(const GemvTile &tile, int64_t k);

struct GemvSpec : KernelSpec {
  int64_t n = 0, k = 0; // W is [n, k]
  Epilogue epi = Epilogue::None;
  GemvTile tile;

  GemvSpec() = default;
  GemvSpec(int64_t n, int64_t k, Epilogue epi, GemvTile tile) : n(n), k(k), epi(epi), tile(tile) {}

  // gemv_bf16_n2048_k2048_m4_r2_w4_epi_none
  std::string name() const override;
  std::string header() const override { return "gemv.cuh"; }
  // minfer::gemv<2048, 2048, 4, 2, 4, minfer::EpiNone>
  std::string entry() const override;
  // grid ceil(n / (rowsPerWarp * warps)), block 32 * warps, no shared memory; independent of rows.
  LaunchDims launch(int64_t rows) const override;
  llvm::json::Object toJSON() const override;
  // checkGemvTile for this spec, plus n >= 1: success when gemv.cuh instantiates it.
  llvm::Error validate() const;
};

// The tile to use without an autotuner entry: maxM = M rounded up to 1, 2, 4 or 8; rowsPerWarp = min(4,
// maxM) (each activation load then serves several W rows), halved while N / rowsPerWarp < 8 warps per SM;
// 4 warps per block. `smCount` 0 means nominalSmCount(target).
GemvTile defaultGemvTile(const Target &target, int64_t m, int64_t n, int64_t k, int smCount = 0);

// Every tile the autotuner should time for this problem: maxM fixed by M as above, rowsPerWarp 1..8 and
// 2..8 warps per block.
std::vector<GemvTile> gemvTileCandidates(const Target &target, int64_t m, int64_t n, int64_t k);

} // namespace minfer
