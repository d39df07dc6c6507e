// bench/GemmBench.cpp — suites "gemm" (prefill matmul on tensor cores), "gemm_fused" (the same with each
// model matmul's fused epilogue, below), "gemv" (decode matmul) and "gemv_fused" (batched decode with the
// fused epilogues, below).
//
// Shapes are the projections of TinyLlama-1.1B — q/o (N, K) = (2048, 2048), k/v (256, 2048), gate/up
// (5632, 2048), down (2048, 5632), lm_head (32000, 2048) — and Llama-2-7B — q/k/v/o (4096, 4096), gate/up
// (11008, 4096), down (4096, 11008): W from 1 MB to 90 MB (lm_head 131 MB).
//   gemm at M = 2048 (a 2048-token prefill): flops 2MNK, bytes (MK + NK + MN) * 2. Judged against the
//        cuBLAS rate bench/torch_baseline.py measures on the same shapes.
//   gemv at M = 1, 2 and 4 (decode): bytes NK * 2 + (MK + MN) * 2, the weights dominating. Judged by the
//        fraction of device-to-device copy bandwidth (target >= 80% for W >= 8 MB at M = 1).
// Each shape's default kernel (the heuristic tile, as a plan without an autotuner entry would use) reports
// with baseline "gemm" / "gemv" and shape "M=2048 N=5632 K=2048", which bench/torch_baseline.py reads to
// time torch.matmul on the same dims. A few alternative tiles per shape (what the autotuner would weigh)
// report with baseline "gemm_tuning" / "gemv_tuning", which have no PyTorch counterpart.
// Inputs rotate across enough copies to cover 3x the 50 MB L2 of an H100/H200, so L2 does not flatter.
#include "bench/Bench.h"
#include "runtime/KernelLoader.h"
#include "jit/KernelCache.h"
#include "compiler/kernels/Gemm.h"
#include "compiler/kernels/Gemv.h"

#include <algorithm>
#include <cmath>

namespace minfer::bench {
namespace {

struct Shape {
  int64_t n, k;
};
const Shape kShapes[] = {
    {2048, 2048}, {256, 2048}, {5632, 2048}, {2048, 5632}, {32000, 2048}, // TinyLlama-1.1B
    {4096, 4096}, {11008, 4096}, {4096, 11008},                            // Llama-2-7B
};
// The gemv suite adds GPT-2's (its matrices are the smallest of the examples: how the kernels fill the SMs).
const Shape kGpt2Shapes[] = {{2304, 768}, {768, 768}, {3072, 768}, {768, 3072}};

std::string shapeString(int64_t m, int64_t n, int64_t k) {
  return "M=" + std::to_string(m) + " N=" + std::to_string(n) + " K=" + std::to_string(k);
}

// Times one matmul kernel (gemm or gemv: same arguments) on [m, k] x [n, k]^T with its epilogue `e` (the
// spec's): a residual [m, n] to add; for qkv, one sequence of m tokens at positions 0..m-1 whose K and V go
// to a cache of m positions (the rotation table of m rows); with `norm`, a folded RMS norm's bf16 gamma [k]
// (the gemv prologue).
llvm::Expected<Result> benchMatmul(const KernelSpec &spec, const Epilogue &e, const Target &target, int64_t m,
                                   int64_t n, int64_t k, const char *baseline, bool norm = false) {
  KernelCache cache = KernelCache::openDefault();
  auto kernel = loadKernel(spec, target, &cache);
  if (!kernel) return kernel.takeError();
  const int64_t cols = e.outCols(n);
  const size_t aBytes = size_t(m * k * 2), wBytes = size_t(n * k * 2), cBytes = size_t(m * cols * 2);
  const size_t rBytes = e.residual ? cBytes : 0;
  const int copies = copiesFor(double(aBytes + wBytes + cBytes + rBytes));
  std::vector<cuda::DeviceBuffer> as, ws, cs, rs;
  for (int i = 0; i < copies; ++i) {
    auto a = filled(aBytes), w = filled(wBytes), r = filled(std::max<size_t>(rBytes, 1));
    if (!a) return a.takeError();
    if (!w) return w.takeError();
    if (!r) return r.takeError();
    auto c = cuda::DeviceBuffer::alloc(cBytes);
    if (!c) return c.takeError();
    as.push_back(std::move(*a));
    ws.push_back(std::move(*w));
    rs.push_back(std::move(*r));
    cs.push_back(std::move(*c));
  }
  const int64_t kvCols = int64_t(e.kvHeads) * e.headDim;
  std::vector<int32_t> positions(static_cast<size_t>(m)), seqOf(static_cast<size_t>(m), 0);
  for (int64_t i = 0; i < m; ++i) positions[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  std::vector<double> invFreq(static_cast<size_t>(std::max(e.headDim / 2, 1)), 1.0);
  for (size_t i = 0; e.headDim > 0 && i < invFreq.size(); ++i)
    invFreq[i] = std::pow(10000.0, -2.0 * double(i) / double(e.headDim));
  auto upload = [](const auto &v) -> llvm::Expected<cuda::DeviceBuffer> {
    auto b = cuda::DeviceBuffer::alloc(v.size() * sizeof(v[0]));
    if (!b) return b.takeError();
    if (auto err = b->upload(v.data(), v.size() * sizeof(v[0]))) return err;
    return b;
  };
  const bool roped = e.kind == Epilogue::Kind::Qkv && e.rope != QkvRope::None;
  auto pos = upload(positions), seq = upload(seqOf), rope = upload(rotationTable(invFreq, roped ? m : 1));
  if (!pos) return pos.takeError();
  if (!seq) return seq.takeError();
  if (!rope) return rope.takeError();
  auto gamma = filled(size_t(k * 2));
  if (!gamma) return gamma.takeError();
  // Row squares: written a partial per tile of columns (16 at the narrowest), read as 8 partials a row, each
  // what A's rows give (timing::rowSquarePartial), so a folded norm scales the products as a model's would.
  auto rowSq = filledRowSquares(size_t(m * std::max<int64_t>((n + 15) / 16, 8) * 4), k, 8);
  if (!rowSq) return rowSq.takeError();
  auto kCache = cuda::DeviceBuffer::alloc(size_t(std::max<int64_t>(m * kvCols * 2, 1)));
  auto vCache = cuda::DeviceBuffer::alloc(size_t(std::max<int64_t>(m * kvCols * 2, 1)));
  if (!kCache) return kCache.takeError();
  if (!vCache) return vCache.takeError();
  auto ms = timeMedian([&](int i) -> llvm::Error {
    MatmulParams p{.C = cs[i % copies].ptr(), .A = as[i % copies].ptr(), .W = ws[i % copies].ptr(),
                   .rows = static_cast<int32_t>(m)};
    p.epi.residual = e.residual ? rs[i % copies].ptr() : 0;
    p.epi.max_seq = static_cast<int32_t>(m);
    p.epi.positions = pos->ptr();
    p.epi.seq_of = seq->ptr();
    p.epi.rope = rope->ptr();
    p.epi.k_cache = kCache->ptr();
    p.epi.v_cache = vCache->ptr();
    p.epi.gamma = norm ? gamma->ptr() : 0;
    p.epi.eps = 1e-5f;
    p.epi.row_sq = rowSq->ptr();
    p.epi.row_sq_parts = 8;
    return launchKernel(kernel->fn, spec, m, p);
  });
  if (!ms) return ms.takeError();
  if (auto err = cuda::synchronize()) return err;
  Result r;
  r.kernel = spec.name();
  r.shape = shapeString(m, n, k);
  r.ms = *ms;
  // qkv: C holds q, and K and V go to the cache: every one of the n output columns is written once.
  const size_t outBytes = e.kind == Epilogue::Kind::Qkv ? size_t(m * n * 2) : cBytes;
  r.bytes = double(aBytes + wBytes + outBytes + rBytes);
  r.flops = 2.0 * double(m) * double(n) * double(k);
  r.baseline = baseline;
  return r;
}

// benchMatmul, its result added to `out`, unless --filter leaves the kernel out (bench::selected).
llvm::Error addMatmul(std::vector<Result> &out, const KernelSpec &spec, const Epilogue &e, const Target &target,
                      int64_t m, int64_t n, int64_t k, const char *baseline, bool norm = false) {
  if (!selected(spec.name() + " " + shapeString(m, n, k))) return llvm::Error::success();
  auto r = benchMatmul(spec, e, target, m, n, k, baseline, norm);
  if (!r) return r.takeError();
  out.push_back(*r);
  return llvm::Error::success();
}

struct Device {
  Target target;
  int smCount = 0;
};

llvm::Expected<Device> device() {
  auto info = cuda::deviceInfo();
  if (!info) return info.takeError();
  auto target = deviceTarget(); // sm_90a on Hopper: the wgmma kernel
  if (!target) return target.takeError();
  return Device{*target, info->smCount};
}

llvm::Expected<std::vector<Result>> runGemm(const Ceilings &) {
  auto dev = device();
  if (!dev) return dev.takeError();
  // The model shapes at a 512- and a 2048-token prefill, and 8192^3 (the usual peak-throughput figure).
  struct Problem {
    int64_t m;
    Shape s;
  };
  std::vector<Problem> problems;
  for (int64_t m : {512, 2048})
    for (const Shape &s : kShapes) problems.push_back({m, s});
  problems.push_back({8192, {8192, 8192}});
  std::vector<Result> out;
  for (const auto &[m, s] : problems) {
    GemmTile dflt = defaultGemmTile(dev->target, m, s.n, s.k, dev->smCount);
    GemmSpec spec(s.n, s.k, Epilogue::None, dflt);
    spec.smCount = dev->smCount;
    if (llvm::Error e = addMatmul(out, spec, spec.epi, dev->target, m, s.n, s.k, "gemm")) return e;
    // Alternatives: the mma.sync 128x128 tile with the other slice depth, 8 warps of 64x32 or 128x256 (one
    // block an SM), and 64x64 (more blocks); on sm_90a the other wgmma tiles.
    std::vector<GemmTile> alternatives = {GemmTile{128, 128, 32, 4, 2, 2}, GemmTile{128, 128, 64, 3, 2, 2},
                                          GemmTile{128, 128, 32, 4, 2, 4}, GemmTile{128, 256, 64, 3, 2, 4},
                                          GemmTile{64, 64, 32, 4, 2, 2}};
    if (dev->target.hasWgmma())
      for (GemmTile t : {GemmTile::hopper(128, 256, 4), GemmTile::hopper(128, 128, 7), GemmTile::hopper(64, 256, 5),
                         GemmTile::hopper(64, 128, 8), GemmTile::hopperPingpong(128, 7), GemmTile::hopperPingpong(64, 8)})
        alternatives.push_back(t);
    for (GemmTile t : alternatives) {
      if (t == dflt) continue;
      if (llvm::Error e = checkGemmTile(t, s.k, dev->target)) {
        llvm::consumeError(std::move(e));
        continue;
      }
      GemmSpec alt(s.n, s.k, Epilogue::None, t);
      alt.smCount = dev->smCount;
      if (llvm::Error e = addMatmul(out, alt, alt.epi, dev->target, m, s.n, s.k, "gemm_tuning")) return e;
    }
  }
  return out;
}

llvm::Expected<std::vector<Result>> runGemv(const Ceilings &) {
  auto dev = device();
  if (!dev) return dev.takeError();
  std::vector<Result> out;
  std::vector<Shape> shapes(std::begin(kShapes), std::end(kShapes));
  shapes.insert(shapes.end(), std::begin(kGpt2Shapes), std::end(kGpt2Shapes));
  for (int64_t m : {1, 2, 4}) {
    for (const Shape &s : shapes) {
      GemvTile dflt = defaultGemvTile(dev->target, m, s.n, s.k, dev->smCount);
      if (llvm::Error e = addMatmul(out, GemvSpec(s.n, s.k, Epilogue::None, dflt), Epilogue::None, dev->target, m,
                                    s.n, s.k, "gemv"))
        return e;
      // Alternatives: the FMA kernel at 1, 2, 4 rows per warp, the tensor-core kernel at 4, 8, 16 warps.
      for (GemvTile t : {GemvTile{dflt.maxM, 1, 4, false}, GemvTile{dflt.maxM, 2, 4, false}, GemvTile{dflt.maxM, 4, 4, false},
                         GemvTile{dflt.maxM, 1, 4, true}, GemvTile{dflt.maxM, 1, 8, true}, GemvTile{dflt.maxM, 1, 16, true}}) {
        if (t == dflt) continue;
        if (llvm::Error e = addMatmul(out, GemvSpec(s.n, s.k, Epilogue::None, t), Epilogue::None, dev->target, m,
                                      s.n, s.k, "gemv_tuning"))
          return e;
      }
    }
  }
  return out;
}

// Suite "gemm_fused": each prefill matmul of TinyLlama-1.1B and Llama-2-7B with the epilogue the fusion
// pass gives it — qkv with half-style rope and the K/V cache write, o-proj + residual, gate/up with SiLU
// gating, down + residual — at 512 and 2048 rows. Reported with baseline "gemm", so that
// bench/torch_baseline.py times torch.matmul on the same M, N, K: the fused kernel against a bare cuBLAS
// matmul, as issue 11 asks. The default tile reports as "gemm"; the other wgmma tiles (the ping-pong ones,
// those fitted to the SMs, and pairs of blocks sharing W), and every tile without the epilogue (the
// epilogue's cost), as "gemm_tuning".
struct FusedMatmul {
  int64_t n, k; // W is [n, k]
  Epilogue epi;
};

const FusedMatmul kFusedMatmuls[] = {
    // TinyLlama-1.1B: d 2048, 32 heads, 4 KV heads of 64, ffn 5632; qkv, o, gate/up, down
    {2048 + 2 * 256, 2048, Epilogue::qkv(32, 4, 64, QkvRope::Half, false)},
    {2048, 2048, Epilogue::pointwise(false, Activation::None, true)},
    {2 * 5632, 2048, Epilogue::gated(Activation::Silu)},
    {2048, 5632, Epilogue::pointwise(false, Activation::None, true)},
    // Llama-2-7B: d 4096, 32 heads of 128, ffn 11008
    {3 * 4096, 4096, Epilogue::qkv(32, 32, 128, QkvRope::Half, false)},
    {4096, 4096, Epilogue::pointwise(false, Activation::None, true)},
    {2 * 11008, 4096, Epilogue::gated(Activation::Silu)},
    {4096, 11008, Epilogue::pointwise(false, Activation::None, true)},
};

llvm::Expected<std::vector<Result>> runGemmFused(const Ceilings &) {
  auto dev = device();
  if (!dev) return dev.takeError();
  std::vector<Result> out;
  for (int64_t m : {512, 2048})
    for (const FusedMatmul &f : kFusedMatmuls) {
      GemmTile dflt = defaultGemmTile(dev->target, m, f.n, f.k, dev->smCount);
      std::vector<std::pair<GemmTile, const char *>> tiles = {{dflt, "gemm"}};
      if (dev->target.hasWgmma())
        for (GemmTile t : {GemmTile::hopper(128, 256, 4), GemmTile::hopper(128, 128, 7), GemmTile::hopper(64, 256, 5),
                           GemmTile::hopper(64, 128, 8), GemmTile::hopperPingpong(128, 7), GemmTile::hopperPingpong(64, 8)})
          if (!(t == dflt)) tiles.push_back({t, "gemm_tuning"});
      if (dev->target.hasWgmma()) {
        std::vector<GemmTile> fitted = fittedWgmmaTiles(dev->target, m, f.n, dev->smCount);
        for (const GemmTile &t : fitted)
          if (!(t == dflt)) tiles.push_back({t, "gemm_tuning"});
        // As pairs of blocks sharing W: the fitted tiles and the narrow standard ones (the tuner's pairs).
        fitted.push_back(GemmTile::hopper(64, 128, 8));
        fitted.push_back(GemmTile::hopperPingpong(128, 7));
        for (const GemmTile &t : fitted) tiles.push_back({t.paired(), "gemm_tuning"});
      }
      // Each tile with the epilogue, then without (reported as "gemm_tuning"): what the epilogue costs.
      for (const auto &[t, baseline] : tiles)
        for (bool fused : {true, false}) {
          GemmSpec spec(f.n, f.k, fused ? f.epi : Epilogue{}, t);
          spec.smCount = dev->smCount;
          if (llvm::Error e = spec.validate(dev->target)) {
            llvm::consumeError(std::move(e));
            continue;
          }
          if (llvm::Error e = addMatmul(out, spec, spec.epi, dev->target, m, f.n, f.k, fused ? baseline : "gemm_tuning"))
            return e;
        }
      // The norm folded across two gemms (PlanOptions::gemmFoldsNorm), default tile, as "gemm_prologue": the
      // matmuls that read an RMS norm in a Llama layer (qkv, gate/up) with its 1 / rms from the rows' squares
      // (Prologue::rmsRowSquares), the residual ones (o, down) writing those squares. The fold's cost is the
      // difference from the default tile without it, against the norm launch it removes.
      bool readsNorm = f.epi.kind != Epilogue::Kind::Pointwise || !f.epi.residual;
      if (dflt.wgmma) {
        Epilogue e = f.epi;
        e.rowSquares = !readsNorm;
        GemmSpec spec(f.n, f.k, e, dflt, readsNorm ? Prologue::rmsRowSquares() : Prologue{});
        spec.smCount = dev->smCount;
        if (llvm::Error e = spec.validate(dev->target)) return e;
        if (llvm::Error e = addMatmul(out, spec, spec.epi, dev->target, m, f.n, f.k, "gemm_prologue")) return e;
      }
    }
  return out;
}

// Suite "gemv_fused": batched decode (16 and 8 rows) through the same fused matmuls, plus the two lm_heads
// (plain). The default tile (the plan's without a tuning entry) reports as "gemv", so bench/torch_baseline.py
// times torch.matmul on the same M, N, K; on sm_90a every wgmma tile the tuner would try, and the mma.sync
// kernel at 4 and 8 warps, report as "gemv_tuning". Judged by the fraction of copy bandwidth. On sm_90a the
// matmuls that read an RMS norm in a Llama layer (qkv, gate/up, lm_head) also run their default tile with
// the norm folded in (gemvFoldsNorm), as "gemv_prologue": the prologue's cost is the difference.
llvm::Expected<std::vector<Result>> runGemvFused(const Ceilings &) {
  auto dev = device();
  if (!dev) return dev.takeError();
  std::vector<FusedMatmul> shapes(std::begin(kFusedMatmuls), std::end(kFusedMatmuls));
  shapes.push_back({32000, 2048, Epilogue::None});
  shapes.push_back({32000, 4096, Epilogue::None});
  std::vector<Result> out;
  for (int64_t m : {16, 8})
    for (const FusedMatmul &f : shapes) {
      GemvTile dflt = defaultGemvTile(dev->target, m, f.n, f.k, dev->smCount);
      std::vector<std::pair<GemvTile, const char *>> tiles = {{dflt, "gemv"}};
      for (const GemvTile &t : gemvTileCandidates(dev->target, m, f.n, f.k))
        if ((t.wgmma || (t.mma && (t.warps == 4 || t.warps == 8))) && !(t == dflt)) tiles.push_back({t, "gemv_tuning"});
      for (const auto &[t, baseline] : tiles) {
        GemvSpec spec(f.n, f.k, f.epi, t);
        if (llvm::Error e = spec.validate(dev->target)) {
          llvm::consumeError(std::move(e));
          continue;
        }
        if (llvm::Error e = addMatmul(out, spec, spec.epi, dev->target, m, f.n, f.k, baseline)) return e;
      }
      bool readsNorm = f.epi.kind != Epilogue::Kind::Pointwise || !f.epi.residual;
      Prologue rms{Prologue::Kind::Rms, ir::DType::BF16};
      if (readsNorm && gemvFoldsNorm(dev->target, m, rms.kind))
        for (const Prologue &pro : {rms, Prologue::rmsUnitGain()}) { // with gamma, and with its gains in W
          GemvSpec spec(f.n, f.k, f.epi, dflt, pro);
          if (llvm::Error e = spec.validate(dev->target)) return e;
          if (llvm::Error e = addMatmul(out, spec, spec.epi, dev->target, m, f.n, f.k, "gemv_prologue", /*norm=*/true))
            return e;
        }
    }
  return out;
}

const Registration gemmSuite("gemm", runGemm);
const Registration gemmFusedSuite("gemm_fused", runGemmFused);
const Registration gemvSuite("gemv", runGemv);
const Registration gemvFusedSuite("gemv_fused", runGemvFused);

} // namespace
} // namespace minfer::bench
