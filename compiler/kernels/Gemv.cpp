// compiler/kernels/Gemv.cpp — naming, launch geometry, validity and tile choice for templates/gemv.cuh.
#include "compiler/kernels/Gemv.h"

#include <cstdio>

#include "compiler/kernels/Gemm.h"

#include "llvm/Support/MathExtras.h"

#include <algorithm>

namespace minfer {

namespace {

// M rounded up to the power of two the kernel is instantiated for: four variants cover decode batches.
int gemvMaxM(int64_t m) {
  int maxM = 1;
  while (maxM < m && maxM < kGemvMaxRows) maxM *= 2;
  return maxM;
}

} // namespace

int64_t GemvTile::sharedBytes() const {
  if (!wgmma) return 0;
  // gemv_wgmma.cuh kGemvWgmmaSharedBytes: the ring, its barriers, the partial sums of ranks 1.., each rank's
  // sums of squares (the norm prologue), alignment.
  return int64_t(stages) * (bk / 64) * (64 + mmaN()) * 128 + int64_t(stages) * 16 +
         int64_t(split - 1) * 128 * (mmaN() / 2) * 4 + int64_t(split) * mmaN() * 4 + 1024;
}

std::string GemvTile::str() const {
  if (wgmma)
    return "m" + std::to_string(maxM) + "_wgmma_k" + std::to_string(bk) + "_s" + std::to_string(stages) + "_split" +
           std::to_string(split);
  if (mma) return "m" + std::to_string(maxM) + "_mma_w" + std::to_string(warps);
  return "m" + std::to_string(maxM) + "_r" + std::to_string(rowsPerWarp) + "_w" + std::to_string(warps);
}

llvm::Error checkGemvTile(const GemvTile &t, int64_t k, const Target *target) {
  auto invalid = [&](const llvm::Twine &why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "gemv tile " + t.str() + ": " + why);
  };
  if (k < 8 || k % 8 != 0) return invalid("K = " + llvm::Twine(k) + " must be a positive multiple of 8 (16-byte loads)");
  if (t.wgmma) {
    if (t.mma) return invalid("a tile is the mma.sync or the wgmma kernel, not both");
    if (target && !target->hasWgmma()) return invalid("the wgmma kernel needs an sm_90a target, not " + target->name);
    if (t.maxM < 1 || t.maxM > 16) return invalid("maxM must be 1..16 (the rows of A are wgmma's N, 8 or 16)");
    if (t.rowsPerWarp != 1 || t.warps != 5)
      return invalid("the wgmma kernel's block is a consumer warpgroup and a producer warp (rowsPerWarp 1, warps 5)");
    if (t.bk != 64 && t.bk != 128 && t.bk != 256) return invalid("bk must be 64, 128 or 256 (1, 2 or 4 TMA boxes a slot)");
    if (t.stages < 2) return invalid("at least 2 slots (one loading while one is multiplied)");
    if (t.split < 1 || t.split > 8) return invalid("the split must be 1..8 (a portable cluster)");
    int64_t slices = llvm::divideCeil(k, t.bk), perRank = llvm::divideCeil(slices, t.split);
    if ((t.split - 1) * perRank >= slices)
      return invalid("a split of " + llvm::Twine(t.split) + " leaves a block without any of K = " + llvm::Twine(k) +
                     "'s " + llvm::Twine(slices) + " " + llvm::Twine(t.bk) + "-wide slices");
    if (t.sharedBytes() > 227 * 1024)
      return invalid(llvm::Twine(t.sharedBytes()) + " bytes of shared memory, above the 227 KB a block can have");
    if (target && t.sharedBytes() > target->maxSharedBytesPerBlock())
      return invalid(llvm::Twine(t.sharedBytes()) + " bytes of shared memory, above " + target->name + "'s " +
                     llvm::Twine(target->maxSharedBytesPerBlock()));
    return llvm::Error::success();
  }
  if (t.mma) {
    if (t.maxM < 1 || t.maxM > 16) return invalid("maxM must be 1..16 for the tensor-core kernel (one or two mma n8 operands)");
    if (t.rowsPerWarp != 1) return invalid("rowsPerWarp does not apply to the tensor-core kernel; leave it 1");
    if (t.warps < 1 || t.warps > 16) return invalid("warps must be 1..16 for the tensor-core kernel");
    return llvm::Error::success();
  }
  if (t.maxM < 1 || t.maxM > 16) return invalid("maxM must be 1..16");
  if (t.rowsPerWarp < 1 || t.rowsPerWarp > 8) return invalid("rowsPerWarp must be 1..8");
  if (t.warps < 1 || t.warps > 32) return invalid("warps must be 1..32");
  return llvm::Error::success();
}

std::string GemvSpec::name() const {
  return "gemv_bf16_n" + std::to_string(n) + "_k" + std::to_string(k) + "_" + tile.str() +
         (stream ? "_ring_g" + std::to_string(ringGroups) : "") + "_epi_" + epi.suffix() + pro.suffix();
}

std::string GemvSpec::instance(const char *fma, const char *mma) const {
  std::string policy = epi.policy() + ", " + pro.policy();
  if (tile.wgmma) // no task form
    return "minfer::gemvWgmma<" + std::to_string(n) + ", " + std::to_string(k) + ", " + std::to_string(tile.maxM) + ", " +
           std::to_string(tile.bk) + ", " + std::to_string(tile.stages) + ", " + std::to_string(tile.split) + ", " +
           policy + ">";
  if (tile.mma)
    return std::string(mma) + "<" + std::to_string(n) + ", " + std::to_string(k) + ", " + std::to_string(tile.maxM) +
           ", " + std::to_string(tile.warps) + ", " + policy + ">";
  return std::string(fma) + "<" + std::to_string(n) + ", " + std::to_string(k) + ", " + std::to_string(tile.maxM) +
         ", " + std::to_string(tile.rowsPerWarp) + ", " + std::to_string(tile.warps) + ", " + policy + ">";
}

std::string GemvSpec::entry() const { return instance("minfer::gemv", "minfer::gemvMma"); }
std::string GemvSpec::taskType() const {
  if (tile.wgmma) return ""; // no task form
  if (stream) // GemvMmaRingTask<N, K, MAX_M, WARPS, GROUPS, Epi, Pro>
    return "minfer::GemvMmaRingTask<" + std::to_string(n) + ", " + std::to_string(k) + ", " + std::to_string(tile.maxM) +
           ", " + std::to_string(tile.warps) + ", " + std::to_string(ringGroups) + ", " + epi.policy() + ", " +
           pro.policy() + ">";
  std::string t = instance("minfer::GemvTask", "minfer::GemvMmaTask");
  return t.substr(0, t.size() - 1) + ", " + std::to_string(loads) + ">";
}

std::shared_ptr<KernelSpec> GemvSpec::asTask(int threads, int grid) const {
  if (threads <= 0 || threads % 32) return nullptr;
  auto t = std::make_shared<GemvSpec>(*this);
  // The wgmma kernel's block is warp-specialised with its own shared memory: as a task, the mma.sync body
  // does the same product (the same rows of A, every epilogue); at one row the FMA body, the task the
  // persistent kernel ran before one-row launches took wgmma (H200, TinyLlama at batch 1: 1.18 ms a step
  // with it, 1.42-1.55 with the mma.sync body).
  // The argmax epilogue takes the FMA body at any row count (the mma.sync body has none).
  if (tile.wgmma) t->tile = GemvTile{tile.maxM, 1, 4, tile.maxM > 1 && !epi.argmax};
  t->tile.warps = threads / 32;
  t->loads = kTaskLoads;
  if (t->tile.fma()) {
    // Every block busy first: as many rows a warp as still give each block of the grid a tile (one row a
    // warp when N is below a row per warp of the grid), up to 8 (an lm_head's 32000 rows: 1000 tiles
    // instead of 8000 rounds of one-row tiles). A tile per block beats fewer, larger tiles: a warp keeps
    // kTaskLoads loads in flight whatever its rows (H200, TinyLlama's 5632-wide down projection: 13 us a
    // step as 256 tiles of 2 rows a warp on 528 blocks, the launch's 512 tiles of one row ~7 us).
    int64_t perWarp = n / (int64_t(t->tile.warps) * std::max(grid, 1));
    int r = static_cast<int>(std::clamp<int64_t>(perWarp, 1, 8));
    if (epi.pairs() && r % 2) r = r == 1 ? 2 : r - 1; // W rows in pairs: down to an even count, but 2 at least
    t->tile.rowsPerWarp = r;
  }
  if (auto e = t->validate()) {
    llvm::consumeError(std::move(e));
    return nullptr;
  }
  return t;
}

std::shared_ptr<KernelSpec> GemvSpec::asStreamingTask(int64_t maxRows, int grid) const {
  if (tile.wgmma || maxRows < 1 || maxRows > kGemvMaxRows) return nullptr; // asTask first: it has no wgmma tile
  auto t = std::make_shared<GemvSpec>(*this);
  t->tile = GemvTile{std::max(tile.maxM, gemvMaxM(maxRows)), 1, tile.warps, true};
  t->stream = true;
  t->ringGroups = static_cast<int>(std::clamp<int64_t>(llvm::divideCeil(llvm::divideCeil(n, 16), std::max(grid, 1)), 1, 8));
  if (auto e = t->validate()) {
    llvm::consumeError(std::move(e));
    return nullptr;
  }
  return t;
}

int64_t GemvSpec::ringPieceBytes() const {
  if (!stream) return 0;
  // gemv.cuh MmaRingGeometry: 16 rows of up to 512 columns (rounded up to 32), each row's bytes padded to 64
  // modulo 128.
  const int64_t cols = std::min<int64_t>(llvm::divideCeil(k, 32) * 32, 512), rowBytes = cols * 2;
  const int64_t stride = rowBytes % 128 == 64 ? rowBytes : llvm::divideCeil(rowBytes, 128) * 128 + 64;
  return 16 * stride;
}

int64_t GemvSpec::sharedBytes() const {
  if (stream) {
    // gemv.cuh MmaRingScratch, rounded up to 16: the partial sums of warps 1.. (every group's, every n8
    // operand's), the prologue's statistics.
    const bool p = pro.kind != Prologue::Kind::None;
    const int64_t bytes = int64_t(ringGroups) * llvm::divideCeil(tile.maxM, 8) * std::max(tile.warps - 1, 1) * 32 * 4 * 4 +
                          (p ? tile.maxM : 1) * 8 + int64_t(p ? tile.warps : 1) * tile.maxM * 4;
    return llvm::divideCeil(bytes, 16) * 16;
  }
  if (!tile.wgmma) return tile.sharedBytes();
  // gemv_wgmma.cuh: the argmax epilogue's best key per row of A (8 bytes each of wgmma's N rows), and
  // kGemvWgmmaGammaBytes: the block's share of gamma, padded to 16 bytes, and its barrier (none with unit gains).
  const int64_t keys = epi.argmax ? int64_t(tile.mmaN()) * 8 : 0;
  if (pro.gammaBytes() == 0) return tile.sharedBytes() + keys;
  int64_t perRank = llvm::divideCeil(llvm::divideCeil(k, tile.bk), tile.split);
  return tile.sharedBytes() + perRank * tile.bk * pro.gammaBytes() / 16 * 16 + 16 + keys;
}

LaunchDims GemvSpec::launch(int64_t rows) const {
  (void)rows; // every block loops over the rows of A
  LaunchDims d;
  const int64_t rowsPerBlock = stream ? 16 * ringGroups : tile.rowsPerBlock();
  d.grid = {static_cast<unsigned>(llvm::divideCeil(n, rowsPerBlock) * (tile.wgmma ? tile.split : 1)), 1, 1};
  d.block = {static_cast<unsigned>(tile.threads()), 1, 1};
  d.sharedBytes = static_cast<unsigned>(sharedBytes());
  return d;
}

std::vector<TensorMapArg> GemvSpec::tensorMaps(int64_t rows) const {
  if (!tile.wgmma) return {};
  // At least one row: a map cannot be empty (with no rows the kernel loads no box of A).
  return {TensorMapArg{"W", k, n, 64, 64}, TensorMapArg{"A", k, std::max<int64_t>(rows, 1), 64, tile.mmaN()}};
}

llvm::json::Object GemvSpec::toJSON() const {
  return llvm::json::Object{
      {"family", "gemv"},
      {"n", n},
      {"k", k},
      {"epilogue", epi.suffix()},
      {"prologue", pro.kind == Prologue::Kind::None ? "none" : pro.suffix().substr(5)},
      {"tile", tile.wgmma ? llvm::json::Object{{"kind", "wgmma"},
                                               {"max_m", tile.maxM},
                                               {"bk", tile.bk},
                                               {"stages", tile.stages},
                                               {"split_k", tile.split},
                                               {"shared_bytes", sharedBytes()}}
                          : llvm::json::Object{{"max_m", tile.maxM},
                                               {"rows_per_warp", tile.rowsPerWarp},
                                               {"warps", tile.warps},
                                               {"mma", tile.mma}}},
      {"threads", tile.threads()},
  };
}

llvm::Error GemvSpec::validate(const Target *target) const {
  if (n < 1)
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "gemv: N = %lld must be at least 1", (long long)n);
  if (auto e = epi.validate(n)) return e;
  if (pro.unitGain && pro.kind != Prologue::Kind::Rms)
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "gemv: unit gains are an RMS norm's only");
  if (pro.rowSquares || epi.rowSquares)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "gemv: row squares (a norm folded across two gemms) run in the wgmma gemm only");
  if (tile.wgmma && pro.kind == Prologue::Kind::Layer)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "gemv: the wgmma kernel %s takes an RMS norm prologue, not a LayerNorm (%s)",
                                   tile.str().c_str(), pro.suffix().c_str());
  // The tile's own limits first: the shared-memory sum below divides K by the split.
  if (auto e = checkGemvTile(tile, k, target)) return e;
  if (tile.wgmma && (pro.kind != Prologue::Kind::None || epi.argmax)) {
    int64_t limit = target ? std::min<int64_t>(227 * 1024, target->maxSharedBytesPerBlock()) : 227 * 1024;
    if (sharedBytes() > limit)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "gemv: %s with its share of gamma (K = %lld) and any argmax keys needs %lld bytes "
                                     "of shared memory, above the %lld a block can have",
                                     tile.str().c_str(), (long long)k, (long long)sharedBytes(), (long long)limit);
  }
  if (epi.argmax && tile.mma && !stream)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "gemv: the argmax epilogue runs in the FMA and wgmma kernels (and in the "
                                   "persistent kernel's weight-ring task), not the mma.sync kernel %s",
                                   tile.str().c_str());
  if (epi.pairs() && tile.fma() && tile.rowsPerWarp % 2)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "gemv: the %s epilogue needs an even rowsPerWarp (W rows in pairs), got %d",
                                   epi.suffix().c_str(), tile.rowsPerWarp);
  return llvm::Error::success();
}

bool gemvFoldsNorm(const Target &target, int64_t maxRows, Prologue::Kind kind) {
  if (maxRows <= 2) return true;
  return maxRows <= kGemvMaxRows && target.hasWgmma() && kind == Prologue::Kind::Rms;
}

GemvTile defaultGemvTile(const Target &target, int64_t m, int64_t n, int64_t k, int smCount, Prologue::Kind pro) {
  if (smCount <= 0) smCount = target.nominalSmCount();
  GemvTile t;
  t.maxM = gemvMaxM(m);
  // At 2 rows (H200, bench/results/session17: wgmma_at_2_rows_everywhere, kernels/kb_gemv_m2.json): with the
  // FMA kernel and its folded RMS norms TinyLlama's step took 1.227 ms, 0.935 through wgmma (Llama-3.2-1B
  // 1.269 and 0.869); on a plain product the FMA kernel is level with wgmma or ahead below 16M weights
  // (TinyLlama's 2048 x 2048: 7.8 us against 8.8; GPT-2's 768 x 3072: 7.2 against 8.6), behind from there
  // (Llama-2-7B's 4096 x 4096: 14.4 against 13.8, 4096 x 11008: 30.0 against 27.0).
  // At 1 row (H200, bench/results/session19/wgmma_at_one_row, step times at batch 1, untuned): wgmma with a
  // folded RMS norm took TinyLlama 0.877 -> 0.862 ms, Llama-3.2-1B 0.915 -> 0.825, Llama-2-7B 4.088 -> 4.046;
  // on the plain products too, TinyLlama 0.849, Llama-2-7B 3.79, but GPT-2 (768 x 768 and 768 x 3072) 0.251
  // -> 0.285: so on plain products from 4M weights (TinyLlama's smallest, 2048 x 2048) on.
  // Two rows follow one (H200, bench/results/session26/two_rows, untuned TinyLlama steps): with the 16M rule
  // above (from kernels timed alone, before programmatic dependent launch let a wgmma gemv stream its W
  // during the kernel before) TinyLlama's o and down projections took the FMA kernel, and its 2-row step
  // was 0.857 ms against 0.749 at one row and 0.766 at four.
  // A LayerNorm in the prologue keeps the FMA kernel, the only one that takes it.
  const bool plainLarge = n * k >= int64_t(1) << 22;
  const bool wgmmaRows = t.maxM >= 4 || (t.maxM <= 2 && (pro == Prologue::Kind::Rms || plainLarge));
  if (wgmmaRows && target.hasWgmma() && pro != Prologue::Kind::Layer) {
    // sm_90a from M = 3: the wgmma kernel (H200, 16 rows, bench/results/gemv_wgmma: 1.0-1.3x gemvMma, up to
    // 94% of the copy bandwidth on the large matrices). 128 of K a slot; with a tile of 64 rows for every SM
    // or more, no split and 4 slots (the best or within 3% of it on every model shape measured: qkv, gate/up,
    // lm_head); with fewer tiles than SMs, a split of 2 and 8 slots (Llama's o and down: 16.3 and 29.6 us,
    // against 19.0 and 38.9 for gemvMma).
    // A split of 3 for at most a quarter as many tiles as SMs (H200, bench/results/session20/split3 and
    // default_split3, untuned steps against a split of 2): 32 tiles (the 1B models' o and down) gain at
    // 16 rows (tuned 5.09 and 8.84 us against 5.59 and 9.95; Llama-3.2-1B's step 0.933 -> 0.907 ms at 16
    // rows, 0.817 -> 0.801 at 1), as GPT-2's 12 do (0.357 -> 0.345 at 16); at 40 (TinyLlama's qkv, 120
    // blocks) TinyLlama's 8-row step lost (0.847 -> 0.873).
    const int64_t tiles = llvm::divideCeil(n, 64);
    const int split = tiles * 4 <= smCount ? 3 : tiles < smCount ? 2 : 1;
    // K too short for a split of 3: 2; too short for the split of 2: the mma.sync kernel below.
    for (int s = split; s >= std::min(split, 2); --s) {
      GemvTile h = GemvTile::hopper(t.maxM, 128, split > 1 ? 8 : 4, s);
      llvm::Error e = checkGemvTile(h, k, &target);
      if (!e) return h;
      llvm::consumeError(std::move(e));
    }
  }
  if (t.maxM >= 4) {
    // Tensor cores from M = 3 (measured on an H200 at M = 4: 1.0-1.3x the FMA kernel; at M = 8 1.2-2.5x).
    // More warps split K finer (more loads in flight for few blocks) but ~120 registers a thread leave
    // room for ~16 resident warps an SM: take the most warps that still keep every block of 16 rows in
    // the first wave (N = 4096: 8 warps, 2.5 TB/s at M = 4, against 1.8 with 4; N = 5632: 4 warps,
    // 2.4 TB/s, against 1.8 with 8 and a second wave).
    t.mma = true;
    t.rowsPerWarp = 1;
    int64_t blocks = llvm::divideCeil(n, 16);
    t.warps = 4;
    while (t.warps < 16 && blocks * (2 * t.warps) <= 16LL * smCount) t.warps *= 2;
    return t;
  }
  // FMA kernel. Each activation vector loaded (from L1) serves rowsPerWarp W loads, so more rows per warp
  // as M grows (at M = 4 on an H200, 4 rows per warp stream a 131 MB W at 3.1 TB/s, 1 row at 2.6)...
  t.rowsPerWarp = std::min(4, t.maxM);
  // ... and on sm_90a at one row, where only a folded LayerNorm keeps a large W (from 4M weights) on this
  // kernel (GPT-2's lm_head, 50257 x 768; Plan.cpp folds the final norm into it at one row only), 4 rows a warp: a grid's
  // blocks cost ~1.2 ns each to dispatch past a few hundred (H200, bench/results/session37/boundary_grids),
  // and one row a warp made that head 12,565 blocks. In step, the tuner's best FMA tiles for it were 4 rows x
  // 4 warps (19.7 us) and 2 x 8 (19.8), both 3,142 blocks, against 20.8 for the wgmma kernel
  // (session37/side_by_side). Not measured on sm_89: unchanged there.
  if (target.hasWgmma() && pro == Prologue::Kind::Layer && plainLarge && t.maxM == 1) t.rowsPerWarp = 4;
  // ... but never so few warps that the SMs starve: N / rowsPerWarp >= 8 warps per SM (at N = 2048 one
  // row per warp is best at every M measured).
  while (t.rowsPerWarp > 1 && llvm::divideCeil(n, t.rowsPerWarp) < 8ULL * smCount) t.rowsPerWarp /= 2;
  // 4 warps (128 threads): fine-grained enough that small N still spreads over every SM, and 16 such
  // blocks (the 64-warp limit) fit on an SM when registers allow; 8 warps measured no better overall.
  t.warps = 4;
  return t;
}

std::vector<GemvTile> gemvTileCandidates(const Target &target, int64_t m, int64_t n, int64_t k) {
  (void)n;
  std::vector<GemvTile> out;
  int maxM = gemvMaxM(m);
  auto add = [&](GemvTile t) {
    if (llvm::Error e = checkGemvTile(t, k, &target)) {
      llvm::consumeError(std::move(e));
      return;
    }
    out.push_back(t);
  };
  for (int r : {1, 2, 4, 8})
    for (int w : {2, 4, 8}) add(GemvTile{maxM, r, w, false});
  for (int w : {2, 4, 8, 16}) add(GemvTile{maxM, 1, w, true});
  // Splits of 3 too: with them the 1B models' o and down projections (32 tiles of 64 rows, 96 blocks) were
  // fastest at 16 rows (bench/results/session20/split3).
  if (target.hasWgmma())
    for (int split : {1, 2, 3, 4})
      for (int bk : {64, 128, 256})
        for (int stages : {2, 4, 8, 12}) add(GemvTile::hopper(maxM, bk, stages, split));
  return out;
}

} // namespace minfer

namespace minfer {

std::optional<GemvTile> parseGemvTile(llvm::StringRef s) {
  GemvTile t;
  std::string str = s.str();
  if (std::sscanf(str.c_str(), "m%d_wgmma_k%d_s%d_split%d", &t.maxM, &t.bk, &t.stages, &t.split) == 4) {
    t = GemvTile::hopper(t.maxM, t.bk, t.stages, t.split);
  } else if (std::sscanf(str.c_str(), "m%d_mma_w%d", &t.maxM, &t.warps) == 2) {
    t.mma = true;
  } else if (std::sscanf(str.c_str(), "m%d_r%d_w%d", &t.maxM, &t.rowsPerWarp, &t.warps) != 3) {
    return std::nullopt;
  }
  if (t.str() != s) return std::nullopt;
  return t;
}

std::string GemvSpec::tuningKey() const {
  Epilogue e = epi;
  e.argmax = false; // the argmax reduction costs little next to the stores: the plain product's tiles serve
  return "gemv_bf16_n" + std::to_string(n) + "_k" + std::to_string(k) + "_epi_" + e.suffix() + pro.suffix();
}

std::shared_ptr<KernelSpec> GemvSpec::withTile(llvm::StringRef s, const Target &target) const {
  std::optional<GemvTile> t = parseGemvTile(s);
  if (!t) return nullptr;
  auto spec = std::make_shared<GemvSpec>(n, k, epi, *t, pro);
  if (llvm::Error e = spec->validate(&target)) {
    llvm::consumeError(std::move(e));
    return nullptr;
  }
  return spec;
}

std::vector<std::shared_ptr<KernelSpec>> GemvSpec::tuningCandidates(const Target &target, int64_t rows) const {
  std::vector<std::shared_ptr<KernelSpec>> out;
  for (const GemvTile &t : gemvTileCandidates(target, rows, n, k))
    if (auto spec = withTile(t.str(), target)) out.push_back(std::move(spec)); // drops tiles the epilogue cannot take
  for (auto &spec : stepNeighbours(target)) {
    bool listed = false;
    for (const auto &c : out) listed = listed || c->tileName() == spec->tileName();
    if (!listed) out.push_back(std::move(spec));
  }
  return out;
}

std::vector<std::shared_ptr<KernelSpec>> GemvSpec::stepNeighbours(const Target &target) const {
  std::vector<std::shared_ptr<KernelSpec>> out;
  if (!tile.wgmma) return out;
  // A slot fewer and one more, then a block fewer and one more in the cluster that splits K. withTile drops a
  // count under 2, a ring past the block's shared memory, and a split that leaves a block without K.
  const std::pair<int, int> moves[] = {{tile.stages - 1, tile.split}, {tile.stages + 1, tile.split},
                                       {tile.stages, tile.split - 1}, {tile.stages, tile.split + 1}};
  for (auto [stages, split] : moves)
    if (auto spec = withTile(GemvTile::hopper(tile.maxM, tile.bk, stages, split).str(), target))
      out.push_back(std::move(spec));
  return out;
}

} // namespace minfer
