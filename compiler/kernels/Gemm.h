// compiler/kernels/Gemm.h — the prefill matmul kernel family (templates/gemm.cuh): its spec, which tile
// shapes are valid on a target, the autotuner's candidates and the heuristic default.
//
// A GemmSpec fixes everything but M: C[M, N] = epi(A[M, K] · W[N, K]^T), bf16 in and out, fp32
// accumulation. Kernel arguments, in order (the same for gemv, Gemv.h):
//   bf16 *C [M, N], const bf16 *A [M, K], const bf16 *W [N, K], int M, EpiParams {bias [N], residual [M, N]}
// A, W and C 16-byte aligned; C may alias the residual, never A or W.
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

// One block computes a bm x bn tile of C, walking K in bk-wide slices through a `stages`-deep ring of
// shared-memory buffers. Two kernels:
//   * mma.sync (gemm.cuh, every target): warpsM x warpsN warps, each owning a (bm/warpsM) x (bn/warpsN)
//     warp tile; "m128n128k32_s4_w2x2";
//   * wgmma (gemm_wgmma.cuh, sm_90a): TMA loads, one producer and bm / 64 consumer warpgroups, bk 64,
//     persistent blocks; warpsM and warpsN unused (0); "wgmma_m128n256_s4". With `pingpong` the two
//     consumers take whole 128-row tiles in turn instead of sharing each: "wgmma_m128n128_s4_pp". With
//     `cluster` 2 the blocks run as pairs that share each W box (TMA multicast): "wgmma_m128n80_s8_c2".
struct GemmTile {
  int bm = 128, bn = 128, bk = 32, stages = 4, warpsM = 2, warpsN = 2;
  bool wgmma = false;
  bool pingpong = false;
  int cluster = 1; // wgmma: 2 for blocks paired over vertically adjacent tiles, W loaded once a pair

  // A wgmma tile: bm 64 or 128, bn a multiple of 16 from 16 to 256 (64, 128 and 256, or a width fitted to
  // the SMs: fittedWgmmaTiles).
  static GemmTile hopper(int bm, int bn, int stages) { return GemmTile{bm, bn, 64, stages, 0, 0, true}; }
  // A ping-pong wgmma tile: 128 rows, bn up to 176 (one consumer holds the whole tile's accumulators).
  static GemmTile hopperPingpong(int bn, int stages) { return GemmTile{128, bn, 64, stages, 0, 0, true, true}; }
  // The same wgmma tile run by pairs of blocks (gemmWgmmaPair).
  GemmTile paired() const {
    GemmTile t = *this;
    t.cluster = 2;
    return t;
  }

  int threads() const { return wgmma ? 128 * (bm / 64 + 1) : 32 * warpsM * warpsN; }
  // mma.sync: STAGES * (BM + BN) * BK * 2, the ring of A and W slices, bf16; wgmma: the same ring plus two
  // barriers per slot and 1 KB to align it (kWgmmaSharedBytes).
  int sharedBytes() const {
    return wgmma ? stages * (bm + bn) * 128 + stages * 16 + 1024 : stages * (bm + bn) * bk * 2;
  }
  // "m128n128k32_s4_w2x2", "wgmma_m128n256_s4", "wgmma_m128n128_s4_pp" or "wgmma_m128n80_s8_c2", as it
  // appears in spec names.
  std::string str() const;
  bool operator==(const GemmTile &o) const = default;
  friend std::ostream &operator<<(std::ostream &os, const GemmTile &t) { return os << t.str(); }
};

// Success when gemm.cuh accepts `tile` for this K on `target`, else why not: the static_asserts of the
// template, checked before NVRTC sees them, plus the target's shared-memory limit.
llvm::Error checkGemmTile(const GemmTile &tile, int64_t k, const Target &target);
// The tile written as str() writes it; nullopt for anything else.
std::optional<GemmTile> parseGemmTile(llvm::StringRef);

struct GemmSpec : KernelSpec {
  int64_t n = 0, k = 0; // W is [n, k]
  Epilogue epi;
  GemmTile tile;
  // An RMS norm of A's rows whose gains ride in W and whose rows' squares the gemm before wrote
  // (Prologue::rmsRowSquares), folded in: wgmma tiles only.
  Prologue pro;
  // wgmma tiles: the persistent grid's size limit, one block per SM (the target's nominal count; the plan
  // sets it). Not part of the name: the code is the same whatever it is.
  int smCount = 132;

  GemmSpec() = default;
  GemmSpec(int64_t n, int64_t k, Epilogue epi, GemmTile tile, Prologue pro = {})
      : n(n), k(k), epi(epi), tile(tile), pro(pro) {}

  // gemm_bf16_n5632_k2048_m128n128k32_s4_w2x2_epi_bias (+ _pro_rms_sq)
  std::string name() const override;
  std::string header() const override { return tile.wgmma ? "gemm_wgmma.cuh" : "gemm.cuh"; }
  const ParamsLayout &params() const override { return MatmulParams::layout(); }
  // minfer::gemm<5632, 2048, 128, 128, 32, 4, 2, 2, minfer::EpiBias>, or for a wgmma tile
  // minfer::gemmWgmma<5632, 2048, 256, 2, 4, minfer::EpiBias> (N, K, BN, consumers, stages, policy), with
  // a `true` for a ping-pong tile, and the prologue's policy where there is one
  std::string entry() const override;
  // mma.sync: grid (ceil(n / bn), ceil(rows / bm)) — at least one block row, so rows = 0 is a harmless
  // launch — block 32 * warpsM * warpsN; wgmma: grid min(tiles, smCount), at least 1, block 128 * (bm / 64
  // + 1); shared tile.sharedBytes().
  LaunchDims launch(int64_t rows) const override;
  // wgmma: A [rows, k] in 64 x bm boxes and W [n, k] in 64 x bn boxes.
  std::vector<TensorMapArg> tensorMaps(int64_t rows) const override;
  llvm::json::Object toJSON() const override;
  std::string tuningKey() const override; // gemm_bf16_n5632_k2048_epi_bias (+ _pro_rms_sq)
  std::string tileName() const override { return tile.str(); }
  std::shared_ptr<KernelSpec> withTile(llvm::StringRef tile, const Target &) const override;
  std::vector<std::shared_ptr<KernelSpec>> tuningCandidates(const Target &, int64_t rows) const override;
  // checkGemmTile for this spec, plus n >= 1 and a prologue only on a wgmma tile and with row squares:
  // success when gemm.cuh or gemm_wgmma.cuh instantiates it for `target`.
  llvm::Error validate(const Target &target) const override;
};

// The tile to use when the autotuner has no entry: of 128x128 (its BK and stages sized so two blocks fit
// an SM of `target`), 64x128, 64x64 and 32x64, the one that minimises waves of blocks over the SMs times
// per-block work over the tile's measured efficiency (see Gemm.cpp). `smCount` 0 means
// target.nominalSmCount().
GemmTile defaultGemmTile(const Target &target, int64_t m, int64_t n, int64_t k, int smCount = 0);

// Wgmma tiles whose count fits the SMs (sm_90a, m >= 64): for bm 64 and 128, the two widths of 64 to 256
// in steps of 16, other than 64, 128 and 256, with the least cost = waves of tiles over `smCount` SMs x
// bm x bn / efficiency, the efficiency modelled as the square root of the tile's arithmetic intensity
// bm bn / (bm + bn) relative to 128x256's. M = 512, N = 2560 gets 128x80 (128 tiles, one wave) where
// 128x128 leaves 52 of 132 SMs idle; each ring as deep as shared memory allows; the 128-row ones up to
// 176 wide also as ping-pong (the other consumer's main loop hides an epilogue). `smCount` 0 means
// target.nominalSmCount(). Empty on other targets.
std::vector<GemmTile> fittedWgmmaTiles(const Target &target, int64_t m, int64_t n, int smCount = 0);

// Every tile the autotuner should time for this problem: a curated set of warp layouts crossed with
// bk in {32, 64} and 2..4 stages, and on sm_90a the wgmma tiles (bm 64 or 128, bn 64, 128 and 256, 4 stages
// or as many as fit, and fittedWgmmaTiles), keeping those checkGemmTile accepts and whose bm is not far
// above m.
std::vector<GemmTile> gemmTileCandidates(const Target &target, int64_t m, int64_t n, int64_t k);

} // namespace minfer
