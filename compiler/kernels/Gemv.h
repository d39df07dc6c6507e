// compiler/kernels/Gemv.h — the decode matmul kernel family (templates/gemv.cuh, gemv_wgmma.cuh):
// C[M, N] = epi(pro(A[M, K]) · W[N, K]^T) for M of 1 to 16 rows, bound by reading W once. Same kernel arguments as gemm (Gemm.h):
//   bf16 *C [M, N], const bf16 *A [M, K], const bf16 *W [N, K], int M, EpiParams (Epilogue.h)
// plus an optional prologue: a norm of A's rows (gamma, beta, eps in EpiParams), folded from the IR.
#pragma once

#include "jit/Target.h"
#include "compiler/kernels/Epilogue.h"
#include "compiler/kernels/KernelSpec.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace minfer {

// Up to this many rows a matmul is memory-bound on W and runs as a gemv; above it, gemm's tensor cores win.
// 16: decode at batch 16 (H200, TinyLlama) took 3.36 ms a step through gemm's 128-row tiles, where the
// weights alone need 0.52 ms at the copy bandwidth; gemvMma reads W once for all 16 rows.
constexpr int64_t kGemvMaxRows = 16;

// Three kernels:
//   fp32 FMA (gemv.cuh gemv; mma and wgmma false): a warp owns rowsPerWarp rows of W and computes them for
//     up to maxM rows of A at once; a block is `warps` warps. Fastest at M = 1..2 before Hopper.
//   tensor cores (gemv.cuh gemvMma; mma true): a block of `warps` warps owns 16 rows of W, its warps
//     splitting K; up to maxM <= 16 rows of A ride along as one or two mma n8 operands. Fastest at M = 3..16
//     before Hopper. rowsPerWarp does not apply and must be 1.
//   Hopper (gemv_wgmma.cuh gemvWgmma; wgmma true, sm_90a only, GemvTile::hopper): a block owns 64 rows of W
//     as wgmma's A operand and the rows of A as its N side, streamed by TMA through a ring of `stages` slots
//     of `bk` of K (bk * 128 bytes of W each); a cluster of `split` blocks splits K and adds up in the first
//     block's shared memory. One consumer warpgroup and a producer warp (warps = 5); an RMS norm prologue
//     but not LayerNorm's.
// M above maxM stays correct (W is read once per maxM rows) but wastes bandwidth.
struct GemvTile {
  int maxM = 1, rowsPerWarp = 1, warps = 4;
  bool mma = false;
  bool wgmma = false;
  int bk = 0, stages = 0, split = 1; // wgmma only

  // The Hopper kernel's tile: maxM rows of A, `stages` slots of `bk` (64, 128 or 256) of K, a cluster of
  // `split` blocks along K.
  static GemvTile hopper(int maxM, int bk, int stages, int split) {
    return GemvTile{maxM, 1, 5, false, true, bk, stages, split};
  }

  // The fp32 FMA kernel (the only one with rows per warp, and with the argmax epilogue).
  bool fma() const { return !mma && !wgmma; }
  int threads() const { return 32 * warps; }
  int rowsPerBlock() const { return wgmma ? 64 : mma ? 16 : rowsPerWarp * warps; }
  // The wgmma kernel's rows of A a pass (wgmma's N): 8 up to maxM 8, else 16.
  int mmaN() const { return maxM <= 8 ? 8 : 16; }
  // Dynamic shared memory of a block: 0 but for the wgmma kernel (gemv_wgmma.cuh kGemvWgmmaSharedBytes).
  int64_t sharedBytes() const;
  // "m4_r2_w4", "m8_mma_w8" for the tensor-core kernel, "m16_wgmma_k128_s8_split4" for the Hopper one, as
  // it appears in spec names.
  std::string str() const;
  bool operator==(const GemvTile &o) const = default;
  friend std::ostream &operator<<(std::ostream &os, const GemvTile &t) { return os << t.str(); }
};

// Success when gemv.cuh (gemv_wgmma.cuh) accepts `tile` for this K, else why not (the template's
// static_asserts); with a target, also that the target has the kernel's instructions.
llvm::Error checkGemvTile(const GemvTile &tile, int64_t k, const Target *target = nullptr);
// The tile written as str() writes it; nullopt for anything else.
std::optional<GemvTile> parseGemvTile(llvm::StringRef);

struct GemvSpec : KernelSpec {
  int64_t n = 0, k = 0; // W is [n, k]
  Epilogue epi;
  GemvTile tile;
  Prologue pro; // a norm of A's rows folded in (decode)
  // W loads per lane in flight: 8 as a kernel of its own (not in the name); a task's own (taskType).
  int loads = 8;
  static constexpr int kTaskLoads = 8;
  // As a task: W streams through the persistent kernel's weight ring (GemvMmaRingTask, the tensor-core body with
  // every epilogue, argmax included) instead of global loads.
  bool stream = false;
  // A streaming task's tile: this many groups of 16 rows of W (1..8), so that its tiles go once round the grid.
  int ringGroups = 1;

  GemvSpec() = default;
  GemvSpec(int64_t n, int64_t k, Epilogue epi, GemvTile tile, Prologue pro = {})
      : n(n), k(k), epi(epi), tile(tile), pro(pro) {}

  // gemv_bf16_n2048_k2048_m4_r2_w4_epi_none, gemv_bf16_n2048_k2048_m8_mma_w8_epi_none
  std::string name() const override;
  std::string header() const override { return tile.wgmma ? "gemv_wgmma.cuh" : "gemv.cuh"; }
  const ParamsLayout &params() const override { return MatmulParams::layout(); }
  // minfer::gemv<2048, 2048, 4, 2, 4, minfer::EpiNone>, minfer::gemvMma<2048, 2048, 8, 8, minfer::EpiNone>
  std::string entry() const override;
  // The tile's shared memory, plus, for the wgmma kernel with a norm prologue, the block's share of gamma; a
  // streaming task's scratch (gemv.cuh MmaRingScratch) in the persistent kernel's dynamic shared memory.
  int64_t sharedBytes() const;
  // grid ceil(n / tile.rowsPerBlock()) (times the split), block 32 * warps, sharedBytes(); independent of
  // rows.
  LaunchDims launch(int64_t rows) const override;
  // The wgmma kernel's: W [n, k] in 64 x 64 boxes, A [rows, k] in 64 x mmaN boxes.
  std::vector<TensorMapArg> tensorMaps(int64_t rows) const override;
  llvm::json::Object toJSON() const override;
  // checkGemvTile for this spec, plus n >= 1: success when gemv.cuh instantiates it (and, with a target,
  // the target runs it).
  llvm::Error validate(const Target *target = nullptr) const;
  llvm::Error validate(const Target &target) const override { return validate(&target); }
  std::string tuningKey() const override; // gemv_bf16_n2560_k2048_epi_qkv_h32_kv4_d64_half_pro_rms_bf16
  std::string tileName() const override { return tile.str(); }
  std::shared_ptr<KernelSpec> withTile(llvm::StringRef tile, const Target &) const override;
  std::vector<std::shared_ptr<KernelSpec>> tuningCandidates(const Target &, int64_t rows) const override;
  // A wgmma tile with one slot fewer and one more, then with one block fewer and one more in the cluster that
  // splits K. Timed alone, in a chain of itself, these show little; in a step they decide how much of W streams
  // in under the kernel before and which neighbours' blocks share an SM with this one's (bench/NOTES.md,
  // session 29: TinyLlama's gate/up at 5 slots, not 4 or 6, took 1% off the step at one row and at 16).
  // Other tiles have none.
  std::vector<std::shared_ptr<KernelSpec>> stepNeighbours(const Target &) const override;
  // As a task: threads / 32 warps (gemvMma splits K between more or fewer warps), kTaskLoads loads per lane
  // in flight (the persistent kernel holds few warps an SM), and for the FMA kernel rows per warp enough for
  // those loads on a short K and for one round of tiles over `grid` blocks, up to 8; when gemv.cuh takes it.
  // A wgmma tile's task is the tensor-core kernel's (gemvMma) with the same maxM.
  std::shared_ptr<KernelSpec> asTask(int threads, int grid) const override;
  std::string taskType() const override; // minfer::GemvTask<...>, minfer::GemvMmaTask<...>, minfer::GemvMmaRingTask<...>
  // A task of asTask's as GemvMmaRingTask: the tensor-core tile with the same warps and a maxM of at least
  // maxRows (every row of A in the ring's one pass over W), and as many groups of 16 rows a tile (up to 8) as
  // take the tiles once round `grid` blocks: each block then normalises its activations once a task, and no
  // block gets a tile more than another but for a last, shorter round; null for more than kGemvMaxRows rows.
  std::shared_ptr<KernelSpec> asStreamingTask(int64_t maxRows, int grid) const override;
  // The largest piece (gemv.cuh MmaRingGeometry): 16 rows of the padded stride of a piece's columns.
  int64_t ringPieceBytes() const override;

private:
  std::string instance(const char *fma, const char *mma) const; // entry() and taskType() with these names
};

// Whether a decode plan of up to `maxRows` rows folds a norm of `kind` into the prologue of the gemvs that
// read it, instead of launching it. Up to 2 rows, every norm. From 3 rows, where the kernel is gemvWgmma
// (sm_90a), RMS norms: that kernel sums the squares of A as A streams through K with W, at no extra pass.
// Elsewhere above 2 rows the norm keeps its launch: every block of gemvMma would first read all rows of A for
// the statistics (H200, TinyLlama at batch 16: 2.08 ms a step folded, 1.80 unfolded).
bool gemvFoldsNorm(const Target &target, int64_t maxRows, Prologue::Kind kind);

// The tile to use without an autotuner entry: maxM = M rounded up to 1, 2, 4, 8 or 16.
//  - On sm_90a, the wgmma kernel (a slot of 128 of K, a split of 2 where N has fewer 64-row tiles than SMs):
//    from M = 3, and at M = 1 and 2 where `pro` is an RMS norm or W has 4M weights or more; never with a
//    LayerNorm in `pro` (only the FMA kernel folds one).
//  - Otherwise, M <= 2: the FMA kernel with rowsPerWarp = maxM (4 at M = 1 on sm_90a with a LayerNorm in
//    `pro` and 4M weights or more: GPT-2's lm_head), halved while N / rowsPerWarp < 8 warps per SM, 4 warps
//    per block; M >= 3: the mma.sync tensor-core kernel with the most warps (4, 8 or 16) that
//    keep all ceil(N / 16) blocks in one wave.
// `smCount` 0 means target.nominalSmCount().
GemvTile defaultGemvTile(const Target &target, int64_t m, int64_t n, int64_t k, int smCount = 0,
                         Prologue::Kind pro = Prologue::Kind::None);

// Every tile the autotuner should time for this problem: maxM fixed by M as above; the FMA kernel with
// rowsPerWarp 1..8 and 2..8 warps per block, the tensor-core kernel with 2..16 warps, and on sm_90a from
// maxM 2 the wgmma kernel with slots of 64, 128 and 256 of K, 2..12 of them, and splits 1, 2 and 4.
std::vector<GemvTile> gemvTileCandidates(const Target &target, int64_t m, int64_t n, int64_t k);

} // namespace minfer
