// compiler/kernels/Gemm.cpp — naming, launch geometry, validity and tile choice for templates/gemm.cuh.
#include "compiler/kernels/Gemm.h"

#include <cstdio>

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace minfer {

namespace {

llvm::Error invalid(const GemmTile &t, const llvm::Twine &why) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), "gemm tile " + t.str() + ": " + why);
}

} // namespace

std::string GemmTile::str() const {
  if (wgmma)
    return "wgmma_m" + std::to_string(bm) + "n" + std::to_string(bn) + "_s" + std::to_string(stages) +
           (pingpong ? "_pp" : "") + (cluster == 2 ? "_c2" : "");
  return "m" + std::to_string(bm) + "n" + std::to_string(bn) + "k" + std::to_string(bk) + "_s" +
         std::to_string(stages) + "_w" + std::to_string(warpsM) + "x" + std::to_string(warpsN);
}

llvm::Error checkGemmTile(const GemmTile &t, int64_t k, const Target &target) {
  if (k < 8 || k % 8 != 0)
    return invalid(t, "K = " + llvm::Twine(k) + " must be a positive multiple of 8 (16-byte row copies)");
  if (t.wgmma) {
    if (!target.hasWgmma()) return invalid(t, "wgmma tiles need an sm_90a target, not " + target.name);
    if (t.bm != 64 && t.bm != 128) return invalid(t, "BM must be 64 or 128 (one or two consumer warpgroups)");
    if (t.bn < 16 || t.bn > 256 || t.bn % 16 != 0)
      return invalid(t, "BN must be a multiple of 16 from 16 to 256 (a wgmma's N)");
    if (t.bk != 64 || t.warpsM != 0 || t.warpsN != 0) return invalid(t, "BK is 64 and warps are not chosen");
    if (t.cluster != 1 && t.cluster != 2) return invalid(t, "a wgmma tile runs in clusters of 1 or 2 blocks");
    if (t.pingpong && (t.bm != 128 || t.bn > 176))
      return invalid(t, "a ping-pong tile is 128 rows by at most 176 columns (one consumer holds it all)");
  } else {
    if (t.pingpong) return invalid(t, "ping-pong is a schedule of the wgmma kernel");
    if (t.cluster != 1) return invalid(t, "clusters are a schedule of the wgmma kernel");
    if (t.bk != 32 && t.bk != 64 && t.bk != 128) return invalid(t, "BK must be 32, 64 or 128");
    if (t.warpsM < 1 || t.warpsN < 1 || t.warpsM * t.warpsN > 16) return invalid(t, "1 to 16 warps per block");
    if (t.bm <= 0 || t.bm % (16 * t.warpsM) != 0) return invalid(t, "BM must be a multiple of 16 * WARPS_M");
    if (t.bn <= 0 || t.bn % (16 * t.warpsN) != 0) return invalid(t, "BN must be a multiple of 16 * WARPS_N");
    if ((t.bm / t.warpsM) * (t.bn / t.warpsN) > 128 * 64)
      return invalid(t, "a warp tile above 128x64 needs more than 256 accumulator registers per thread");
  }
  if (t.stages < 2) return invalid(t, "STAGES must be at least 2");
  if (t.sharedBytes() > target.maxSharedBytesPerBlock())
    return invalid(t, llvm::Twine(t.sharedBytes()) + " bytes of shared memory exceed the " +
                          llvm::Twine(target.maxSharedBytesPerBlock()) + " a block may use on " + target.name);
  return llvm::Error::success();
}

std::string GemmSpec::name() const {
  return "gemm_bf16_n" + std::to_string(n) + "_k" + std::to_string(k) + "_" + tile.str() + "_epi_" +
         epi.suffix() + pro.suffix();
}

std::string GemmSpec::entry() const {
  if (tile.wgmma)
    return std::string(tile.cluster == 2 ? "minfer::gemmWgmmaPair<" : "minfer::gemmWgmma<") + std::to_string(n) +
           ", " + std::to_string(k) + ", " + std::to_string(tile.bn) + ", " + std::to_string(tile.bm / 64) + ", " +
           std::to_string(tile.stages) + ", " + epi.policy() +
           (pro.kind != Prologue::Kind::None ? std::string(tile.pingpong ? ", true, " : ", false, ") + pro.policy() + ">"
                                             : tile.pingpong ? ", true>" : ">");
  return "minfer::gemm<" + std::to_string(n) + ", " + std::to_string(k) + ", " + std::to_string(tile.bm) + ", " +
         std::to_string(tile.bn) + ", " + std::to_string(tile.bk) + ", " + std::to_string(tile.stages) + ", " +
         std::to_string(tile.warpsM) + ", " + std::to_string(tile.warpsN) + ", " + epi.policy() +
         ">";
}

LaunchDims GemmSpec::launch(int64_t rows) const {
  LaunchDims d;
  if (tile.wgmma) {
    // Units: tiles, or pairs of vertically adjacent tiles for a pair of blocks (gemmWgmmaPair); one block
    // (pair) per SM (two SMs) at most.
    const int c = tile.cluster;
    uint64_t units =
        llvm::divideCeil(llvm::divideCeil(std::max<int64_t>(rows, 0), tile.bm), c) * llvm::divideCeil(n, tile.bn);
    d.grid = {static_cast<unsigned>(std::clamp<uint64_t>(units, 1, std::max(smCount / c, 1)) * c), 1, 1};
    d.block = {static_cast<unsigned>(tile.threads()), 1, 1};
    d.sharedBytes = static_cast<unsigned>(tile.sharedBytes());
    return d;
  }
  d.grid = {static_cast<unsigned>(llvm::divideCeil(n, tile.bn)),
            static_cast<unsigned>(std::max<uint64_t>(1, llvm::divideCeil(std::max<int64_t>(rows, 0), tile.bm))),
            1};
  d.block = {static_cast<unsigned>(tile.threads()), 1, 1};
  d.sharedBytes = static_cast<unsigned>(tile.sharedBytes());
  return d;
}

std::vector<TensorMapArg> GemmSpec::tensorMaps(int64_t rows) const {
  if (!tile.wgmma) return {};
  // At least one row: a map cannot be empty, and with no rows the kernel has no tiles to load.
  // A pair's block loads half of each W box and multicasts it to both.
  return {TensorMapArg{"A", k, std::max<int64_t>(rows, 1), 64, tile.bm},
          TensorMapArg{"W", k, n, 64, tile.bn / tile.cluster}};
}

llvm::json::Object GemmSpec::toJSON() const {
  llvm::json::Object t{{"bm", tile.bm}, {"bn", tile.bn}, {"bk", tile.bk}, {"stages", tile.stages}};
  if (tile.wgmma) {
    t["kind"] = "wgmma";
    t["consumer_warpgroups"] = tile.bm / 64;
    t["schedule"] = tile.pingpong ? "pingpong" : "cooperative";
    t["cluster"] = tile.cluster;
  } else {
    t["warps_m"] = tile.warpsM;
    t["warps_n"] = tile.warpsN;
  }
  llvm::json::Object o{
      {"family", "gemm"},         {"n", n}, {"k", k}, {"epilogue", epi.suffix()},
      {"prologue", pro.kind == Prologue::Kind::None ? "none" : pro.suffix().substr(5)}, {"tile", std::move(t)},
      {"threads", tile.threads()}, {"shared_bytes", tile.sharedBytes()},
  };
  if (tile.wgmma) o["persistent_blocks"] = smCount;
  return o;
}

llvm::Error GemmSpec::validate(const Target &target) const {
  if (n < 1)
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "gemm: N = %lld must be at least 1", (long long)n);
  if (auto e = epi.validate(n)) return e;
  if (epi.argmax)
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "gemm: the argmax epilogue runs in gemv only");
  if (pro.kind != Prologue::Kind::None && !(pro.kind == Prologue::Kind::Rms && pro.unitGain && pro.rowSquares))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "gemm: a folded norm is an RMS norm with its gains in W and its rows' squares "
                                   "from the gemm before, not %s",
                                   pro.suffix().c_str());
  if (pro.rowSquares && epi.rowSquares)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "gemm: one row_sq buffer: a gemm reads its rows' squares or writes them, not both");
  if ((pro.kind != Prologue::Kind::None || epi.rowSquares) && !tile.wgmma)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "gemm: a folded RMS norm and row squares run in the wgmma kernel only, not %s",
                                   tile.str().c_str());
  return checkGemmTile(tile, k, target);
}

namespace {

// The most slots of a wgmma tile's ring that fit a block's shared memory, at most 8.
int wgmmaStages(const Target &target, int bm, int bn) {
  int stages = 8;
  while (stages > 2 && GemmTile::hopper(bm, bn, stages).sharedBytes() > target.maxSharedBytesPerBlock()) --stages;
  return stages;
}

} // namespace

GemmTile defaultGemmTile(const Target &target, int64_t m, int64_t n, int64_t k, int smCount) {
  if (smCount <= 0) smCount = target.nominalSmCount();
  // sm_90a from 128 rows up (prefill): the wgmma kernel. Of its four tiles, the one with the fewest waves
  // of tiles over the SMs times a tile's work over its throughput per SM, measured on an H100 at 8192^3
  // (128x256: 818 TFLOP/s, 64x256: 678, 128x128: 506, 64x128: 365; bench/results/wgmma): the wide tile
  // wins whenever its tiles fill the SMs, the narrow ones when M or N is small (M = 512, N = 2048: 64x128
  // runs 323 TFLOP/s, 128x256 about 250). Each ring as deep as shared memory allows. Below 128 rows
  // (batched decode) the weights' bandwidth sets the time, and the mma.sync tiles below give more blocks
  // to stream them.
  if (target.hasWgmma() && m >= 128) {
    struct Choice {
      int bm, bn;
      double efficiency;
    };
    const Choice choices[] = {{128, 256, 1.0}, {64, 256, 0.83}, {128, 128, 0.62}, {64, 128, 0.45}};
    GemmTile best;
    double bestCost = std::numeric_limits<double>::infinity();
    for (const Choice &c : choices) {
      uint64_t tiles = llvm::divideCeil(m, c.bm) * llvm::divideCeil(n, c.bn);
      double cost = double(llvm::divideCeil(tiles, smCount)) * c.bm * c.bn / c.efficiency;
      if (cost < bestCost * 0.999) { // ties go to the wider tile (listed first)
        bestCost = cost;
        best = GemmTile::hopper(c.bm, c.bn, wgmmaStages(target, c.bm, c.bn));
      }
    }
    return best;
  }
  // The large tile: 128x128 with 2x2 warps of 64x64 (128 threads, ~250 registers each, so two blocks
  // share an SM and one computes while the other waits at its barrier). Measured on an H200 at M = 2048
  // over the TinyLlama and Llama-2-7B projections, 128x128x64 with 3 stages (96 KB: two blocks in the
  // 228 KB of an SM) runs 369-462 TFLOP/s, 1.3-1.6x 64x64, ahead of 128x128x32 x4 stages (349-440). On
  // other GPUs it must still fit twice per SM: sm_80 has 164 KB (128x128x32, 4 stages = 64 KB),
  // sm_86/sm_89/sm_120 100 KB (3 stages = 48 KB).
  GemmTile large = {128, 128, 32, 3, 2, 2};
  if (target.maxSharedBytesPerBlock() >= 227 * 1024) large = {128, 128, 64, 3, 2, 2};
  else if (target.maxSharedBytesPerBlock() >= 163 * 1024) large = {128, 128, 32, 4, 2, 2};
  // On sm_90 a 128x256x64 tile (2x4 warps of 64x64, 144 KB, one block an SM) is ~4% faster per block
  // (375-493 TFLOP/s on the same shapes) but comes in half as many blocks: it wins where that does not
  // cost a wave (every shape above but N = 11008, K = 4096, which the wave count below gets right).
  const bool wide = target.maxSharedBytesPerBlock() >= 227 * 1024;
  struct Choice {
    GemmTile tile;
    double efficiency; // throughput per SM relative to `large` once every SM is busy
  };
  // Smaller tiles trade per-block efficiency (H200: 64x64x64 runs at ~0.7 of 128x128) for enough blocks
  // to fill the SMs when M or N is small (N = 256 at M = 2048: 64x64x64 is 2.2x faster than 128x128).
  const Choice choices[] = {
      {wide ? GemmTile{128, 256, 64, 3, 2, 4} : large, wide ? 1.04 : 1.0},
      {large, 1.0},
      {{64, 128, 32, 4, 2, 2}, 0.8}, // 128 threads, warp 32x64, 48 KB
      {{64, 64, 64, 3, 2, 2}, 0.7},  // 128 threads, warp 32x32, 48 KB
      {{32, 64, 64, 3, 1, 2}, 0.4},  //  64 threads, warp 32x32, 36 KB: for M <= 32
  };
  GemmTile best = large;
  double bestCost = std::numeric_limits<double>::infinity();
  for (const Choice &c : choices) {
    if (llvm::Error e = checkGemmTile(c.tile, k, target)) {
      llvm::consumeError(std::move(e));
      continue;
    }
    // Time ~ waves of blocks over the SMs x one block's time, ~ BM * BN / efficiency. Fewer blocks than
    // SMs leave SMs idle, which is what makes small tiles win for small M or N.
    uint64_t blocks = llvm::divideCeil(std::max<int64_t>(m, 1), c.tile.bm) * llvm::divideCeil(n, c.tile.bn);
    double waves = double(llvm::divideCeil(blocks, smCount));
    double cost = waves * double(c.tile.bm) * c.tile.bn / c.efficiency;
    if (cost < bestCost * 0.999) { // ties go to the larger tile (listed first)
      bestCost = cost;
      best = c.tile;
    }
  }
  return best;
}

std::vector<GemmTile> fittedWgmmaTiles(const Target &target, int64_t m, int64_t n, int smCount) {
  if (!target.hasWgmma() || m < 64 || n < 1) return {};
  if (smCount <= 0) smCount = target.nominalSmCount();
  auto intensity = [](int bm, int bn) { return double(bm) * bn / (bm + bn); };
  std::vector<GemmTile> out;
  for (int bm : {128, 64}) {
    if (bm > m) continue;
    std::vector<std::pair<double, int>> costs; // (cost, bn)
    for (int bn = 64; bn <= 256; bn += 16) {
      if (bn == 64 || bn == 128 || bn == 256) continue; // among the standard candidates already
      uint64_t tiles = llvm::divideCeil(m, bm) * llvm::divideCeil(n, bn);
      double waves = double(llvm::divideCeil(tiles, smCount));
      costs.push_back({waves * bm * bn / std::sqrt(intensity(bm, bn) / intensity(128, 256)), bn});
    }
    std::stable_sort(costs.begin(), costs.end(), [](auto &a, auto &b) { return a.first < b.first; });
    for (size_t i = 0; i < costs.size() && i < 2; ++i) {
      const int bn = costs[i].second, stages = wgmmaStages(target, bm, bn);
      out.push_back(GemmTile::hopper(bm, bn, stages));
      if (bm == 128 && bn <= 176) out.push_back(GemmTile::hopperPingpong(bn, stages)); // and as ping-pong
    }
  }
  return out;
}

std::vector<GemmTile> gemmTileCandidates(const Target &target, int64_t m, int64_t n, int64_t k) {
  struct Layout {
    int bm, bn, warpsM, warpsN;
  };
  // Warp tiles of 32x32 to 64x64 (the register file holds at most 128 fp32 accumulators per thread at
  // 256 threads), 64 to 256 threads per block.
  static const Layout kLayouts[] = {
      {256, 128, 4, 2}, {128, 256, 2, 4}, {128, 128, 2, 2}, {128, 128, 2, 4}, {128, 64, 2, 2}, {64, 128, 2, 2},
      {64, 256, 1, 4},  {64, 64, 2, 2},   {64, 64, 1, 2},   {32, 64, 1, 2},   {32, 128, 1, 4},
  };
  // Rows beyond the next power of two of M are pure waste: skip block tiles taller than that.
  int64_t mCap = 32;
  while (mCap < m) mCap *= 2;
  std::vector<GemmTile> out;
  for (const Layout &l : kLayouts) {
    if (l.bm > mCap) continue;
    for (int bk : {32, 64}) {
      for (int stages : {2, 3, 4}) {
        if (bk == 32 && stages == 2) continue; // two 32-deep slices cannot cover DRAM latency
        if (bk == 64 && stages == 4 && l.bm + l.bn > 192) continue; // over 96 KB for no gain over 3 stages
        GemmTile t{l.bm, l.bn, bk, stages, l.warpsM, l.warpsN};
        if (llvm::Error e = checkGemmTile(t, k, target)) {
          llvm::consumeError(std::move(e));
          continue;
        }
        out.push_back(t);
      }
    }
  }
  if (target.hasWgmma()) {
    for (int bm : {64, 128}) {
      if (bm > mCap) continue;
      for (int bn : {64, 128, 256}) {
        // Four slots, and as many as fit when that is more.
        int most = wgmmaStages(target, bm, bn);
        std::vector<int> counts = {std::min(4, most)};
        if (most > 4) counts.push_back(most);
        for (int stages : counts) {
          // 128-row tiles also as ping-pong (checkGemmTile keeps 128 x 64 and 128 x 128): the consumers take
          // whole tiles in turn.
          for (bool pp : {false, true}) {
            if (pp && bm != 128) continue;
            GemmTile t = pp ? GemmTile::hopperPingpong(bn, stages) : GemmTile::hopper(bm, bn, stages);
            if (llvm::Error e = checkGemmTile(t, k, target)) {
              llvm::consumeError(std::move(e));
              continue;
            }
            out.push_back(t);
            // The narrow tiles, whose W reads from L2 per flop are the most, also as pairs of blocks.
            if (bn == 128 && stages == most && (pp || bm == 64)) out.push_back(t.paired());
          }
        }
      }
    }
    for (const GemmTile &t : fittedWgmmaTiles(target, m, n)) {
      if (t.bm > mCap) continue;
      if (llvm::Error e = checkGemmTile(t, k, target)) {
        llvm::consumeError(std::move(e));
        continue;
      }
      out.push_back(t);
      out.push_back(t.paired()); // and as pairs of blocks sharing W (cuBLAS pairs every tile it picks here)
    }
  }
  return out;
}

} // namespace minfer

namespace minfer {

std::optional<GemmTile> parseGemmTile(llvm::StringRef s) {
  GemmTile t;
  if (s.startswith("wgmma_")) {
    t = GemmTile::hopper(0, 0, 0);
    t.cluster = s.endswith("_c2") ? 2 : 1;
    t.pingpong = s.drop_back(t.cluster == 2 ? 3 : 0).endswith("_pp");
    if (std::sscanf(s.str().c_str(), "wgmma_m%dn%d_s%d", &t.bm, &t.bn, &t.stages) != 3 || t.str() != s)
      return std::nullopt;
    return t;
  }
  if (std::sscanf(s.str().c_str(), "m%dn%dk%d_s%d_w%dx%d", &t.bm, &t.bn, &t.bk, &t.stages, &t.warpsM, &t.warpsN) != 6 ||
      t.str() != s)
    return std::nullopt;
  return t;
}

std::string GemmSpec::tuningKey() const {
  return "gemm_bf16_n" + std::to_string(n) + "_k" + std::to_string(k) + "_epi_" + epi.suffix() + pro.suffix();
}

std::shared_ptr<KernelSpec> GemmSpec::withTile(llvm::StringRef s, const Target &target) const {
  std::optional<GemmTile> t = parseGemmTile(s);
  if (!t) return nullptr;
  auto spec = std::make_shared<GemmSpec>(n, k, epi, *t, pro);
  spec->smCount = smCount;
  if (llvm::Error e = spec->validate(target)) {
    llvm::consumeError(std::move(e));
    return nullptr;
  }
  return spec;
}

std::vector<std::shared_ptr<KernelSpec>> GemmSpec::tuningCandidates(const Target &target, int64_t rows) const {
  std::vector<std::shared_ptr<KernelSpec>> out;
  for (const GemmTile &t : gemmTileCandidates(target, rows, n, k))
    if (auto spec = withTile(t.str(), target)) out.push_back(std::move(spec));
  return out;
}

} // namespace minfer
