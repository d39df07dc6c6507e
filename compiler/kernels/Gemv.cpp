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

std::string GemvTile::str() const {
  if (mma) return "m" + std::to_string(maxM) + "_mma_w" + std::to_string(warps);
  return "m" + std::to_string(maxM) + "_r" + std::to_string(rowsPerWarp) + "_w" + std::to_string(warps);
}

llvm::Error checkGemvTile(const GemvTile &t, int64_t k) {
  auto invalid = [&](const llvm::Twine &why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "gemv tile " + t.str() + ": " + why);
  };
  if (k < 8 || k % 8 != 0) return invalid("K = " + llvm::Twine(k) + " must be a positive multiple of 8 (16-byte loads)");
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
  return "gemv_bf16_n" + std::to_string(n) + "_k" + std::to_string(k) + "_" + tile.str() + "_epi_" +
         epi.suffix() + pro.suffix();
}

std::string GemvSpec::instance(const char *fma, const char *mma) const {
  std::string policy = epi.policy() + ", " + pro.policy();
  if (tile.mma)
    return std::string(mma) + "<" + std::to_string(n) + ", " + std::to_string(k) + ", " + std::to_string(tile.maxM) +
           ", " + std::to_string(tile.warps) + ", " + policy + ">";
  return std::string(fma) + "<" + std::to_string(n) + ", " + std::to_string(k) + ", " + std::to_string(tile.maxM) +
         ", " + std::to_string(tile.rowsPerWarp) + ", " + std::to_string(tile.warps) + ", " + policy + ">";
}

std::string GemvSpec::entry() const { return instance("minfer::gemv", "minfer::gemvMma"); }
std::string GemvSpec::taskType() const {
  std::string t = instance("minfer::GemvTask", "minfer::GemvMmaTask");
  return t.substr(0, t.size() - 1) + ", " + std::to_string(loads) + ">";
}

std::shared_ptr<KernelSpec> GemvSpec::asTask(int threads, int grid) const {
  if (threads <= 0 || threads % 32) return nullptr;
  auto t = std::make_shared<GemvSpec>(*this);
  t->tile.warps = threads / 32;
  t->loads = kTaskLoads;
  if (!tile.mma) {
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

LaunchDims GemvSpec::launch(int64_t rows) const {
  (void)rows; // every warp loops over the rows of A
  LaunchDims d;
  d.grid = {static_cast<unsigned>(llvm::divideCeil(n, tile.rowsPerBlock())), 1, 1};
  d.block = {static_cast<unsigned>(tile.threads()), 1, 1};
  d.sharedBytes = 0;
  return d;
}

llvm::json::Object GemvSpec::toJSON() const {
  return llvm::json::Object{
      {"family", "gemv"},
      {"n", n},
      {"k", k},
      {"epilogue", epi.suffix()},
      {"prologue", pro.kind == Prologue::Kind::None ? "none" : pro.suffix().substr(5)},
      {"tile", llvm::json::Object{{"max_m", tile.maxM},
                                  {"rows_per_warp", tile.rowsPerWarp},
                                  {"warps", tile.warps},
                                  {"mma", tile.mma}}},
      {"threads", tile.threads()},
  };
}

llvm::Error GemvSpec::validate() const {
  if (n < 1)
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "gemv: N = %lld must be at least 1", (long long)n);
  if (auto e = epi.validate(n)) return e;
  if (epi.argmax && tile.mma)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "gemv: the argmax epilogue runs in the FMA kernel only, not %s", tile.str().c_str());
  if (epi.pairs() && !tile.mma && tile.rowsPerWarp % 2)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "gemv: the %s epilogue needs an even rowsPerWarp (W rows in pairs), got %d",
                                   epi.suffix().c_str(), tile.rowsPerWarp);
  return checkGemvTile(tile, k);
}

GemvTile defaultGemvTile(const Target &target, int64_t m, int64_t n, int64_t k, int smCount) {
  if (smCount <= 0) smCount = target.nominalSmCount();
  GemvTile t;
  t.maxM = gemvMaxM(m);
  (void)k;
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
  // ... but never so few warps that the SMs starve: N / rowsPerWarp >= 8 warps per SM (at N = 2048 one
  // row per warp is best at every M measured).
  while (t.rowsPerWarp > 1 && llvm::divideCeil(n, t.rowsPerWarp) < 8ULL * smCount) t.rowsPerWarp /= 2;
  // 4 warps (128 threads): fine-grained enough that small N still spreads over every SM, and 16 such
  // blocks (the 64-warp limit) fit on an SM when registers allow; 8 warps measured no better overall.
  t.warps = 4;
  return t;
}

std::vector<GemvTile> gemvTileCandidates(const Target &target, int64_t m, int64_t n, int64_t k) {
  (void)target;
  (void)n;
  std::vector<GemvTile> out;
  int maxM = gemvMaxM(m);
  auto add = [&](GemvTile t) {
    if (llvm::Error e = checkGemvTile(t, k)) {
      llvm::consumeError(std::move(e));
      return;
    }
    out.push_back(t);
  };
  for (int r : {1, 2, 4, 8})
    for (int w : {2, 4, 8}) add(GemvTile{maxM, r, w, false});
  for (int w : {2, 4, 8, 16}) add(GemvTile{maxM, 1, w, true});
  return out;
}

} // namespace minfer

namespace minfer {

std::optional<GemvTile> parseGemvTile(llvm::StringRef s) {
  GemvTile t;
  std::string str = s.str();
  if (std::sscanf(str.c_str(), "m%d_mma_w%d", &t.maxM, &t.warps) == 2) {
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

std::shared_ptr<KernelSpec> GemvSpec::withTile(llvm::StringRef s, const Target &) const {
  std::optional<GemvTile> t = parseGemvTile(s);
  if (!t) return nullptr;
  auto spec = std::make_shared<GemvSpec>(n, k, epi, *t, pro);
  if (llvm::Error e = spec->validate()) {
    llvm::consumeError(std::move(e));
    return nullptr;
  }
  return spec;
}

std::vector<std::shared_ptr<KernelSpec>> GemvSpec::tuningCandidates(const Target &target, int64_t rows) const {
  std::vector<std::shared_ptr<KernelSpec>> out;
  for (const GemvTile &t : gemvTileCandidates(target, rows, n, k))
    if (auto spec = withTile(t.str(), target)) out.push_back(std::move(spec)); // drops tiles the epilogue cannot take
  return out;
}

} // namespace minfer
