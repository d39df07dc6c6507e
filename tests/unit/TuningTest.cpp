// tests/unit/TuningTest.cpp — the autotuner's CPU side (compiler/Tuning.h): buckets, the search on a fake
// timer, the database file (round trip, corrupt and foreign files), tiles written and parsed back, and a plan
// that takes its tiles from a database.
#include "common/TestFiles.h"
#include "common/TestModels.h"

#include "compiler/Fuse.h"
#include "compiler/Plan.h"
#include "compiler/Tuning.h"
#include "compiler/kernels/Attention.h"
#include "compiler/kernels/Gemm.h"
#include "compiler/kernels/Gemv.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>

using namespace minfer;

namespace {

DeviceFingerprint h200() {
  DeviceFingerprint d;
  d.name = "NVIDIA H200";
  d.smCount = 132;
  d.ccMajor = 9;
  d.ccMinor = 0;
  d.driverVersion = 13000;
  d.nvrtcVersion = "13.0";
  return d;
}

void writeText(const std::string &path, const std::string &text) { std::ofstream(path) << text; }

TEST(TuningBuckets, RowsFallIntoTheirBucket) {
  EXPECT_EQ(tuningBucket(true, 1), "decode:1");
  EXPECT_EQ(tuningBucket(true, 2), "decode:2-8");
  EXPECT_EQ(tuningBucket(true, 8), "decode:2-8");
  EXPECT_EQ(tuningBucket(true, 9), "decode:9-16");
  EXPECT_EQ(tuningBucket(true, 16), "decode:9-16");
  EXPECT_EQ(tuningBucket(true, 17), "decode:17-64");
  EXPECT_EQ(tuningBucket(true, 65), "decode:65+");
  EXPECT_EQ(tuningBucket(false, 7), "prefill:1-512");
  EXPECT_EQ(tuningBucket(false, 2048), "prefill:513-2048");
  EXPECT_EQ(tuningBucket(false, 2049), "prefill:2049+");
  for (const std::string &b : allTuningBuckets()) {
    EXPECT_TRUE(isTuningBucket(b));
    // The rows a bucket is timed at fall into it.
    EXPECT_EQ(tuningBucket(llvm::StringRef(b).startswith("decode"), bucketRows(b)), b);
  }
  EXPECT_FALSE(isTuningBucket("decode:3"));
}

TEST(TuningSearch, PicksTheFastestAndSkipsFailures) {
  std::vector<double> times = {12.0, 9.0, -1, 10.5, 9.5};
  SearchResult r = searchFastest(times.size(), [&](size_t i) -> llvm::Expected<double> {
    if (times[i] < 0) return llvm::createStringError(llvm::inconvertibleErrorCode(), "launch failed");
    return times[i];
  });
  EXPECT_EQ(r.best, 1);
  ASSERT_EQ(r.failures.size(), 1u);
  EXPECT_EQ(r.failures[0], "launch failed");
  EXPECT_LT(r.us[2], 0);
  EXPECT_EQ(r.us[3], 10.5);
}

TEST(TuningSearch, WithinNoiseTheFirstListedWins) {
  // 10.1 is within 2% of 10.0: the earlier candidate (the default comes first) is kept.
  std::vector<double> times = {10.1, 10.0, 13.0};
  SearchResult r = searchFastest(times.size(), [&](size_t i) -> llvm::Expected<double> { return times[i]; });
  EXPECT_EQ(r.best, 0);
  // Beyond the noise, the faster one wins.
  times = {10.5, 10.0, 13.0};
  r = searchFastest(times.size(), [&](size_t i) -> llvm::Expected<double> { return times[i]; });
  EXPECT_EQ(r.best, 1);
}

TEST(TuningSearch, RepeatedRunsWithJitterPickTheSameTile) {
  // Candidates 3 and 5 are within 1% of each other, everything else 10%+ slower; timing jitter of +-0.5%
  // must not flip the choice between runs.
  std::vector<double> base = {20, 18, 15, 10.0, 14, 10.08, 30};
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> jitter(-0.005, 0.005);
  std::set<int> picks;
  for (int run = 0; run < 50; ++run) {
    SearchResult r = searchFastest(base.size(), [&](size_t i) -> llvm::Expected<double> {
      return base[i] * (1 + jitter(rng));
    });
    picks.insert(r.best);
  }
  EXPECT_EQ(picks, (std::set<int>{3}));
}

TEST(TuningSearch, NothingRanAndBrokenTimesAreFailures) {
  SearchResult r = searchFastest(3, [&](size_t) -> llvm::Expected<double> {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "no");
  });
  EXPECT_EQ(r.best, -1);
  EXPECT_EQ(r.failures.size(), 3u);
  r = searchFastest(2, [&](size_t i) -> llvm::Expected<double> { return i == 0 ? 0.0 : 4.0; });
  EXPECT_EQ(r.best, 1) << "a zero time is a broken measurement, not the fastest kernel";
  EXPECT_EQ(r.failures.size(), 1u);
}

// A fake decode step of three kernels, each tuned tile costing or saving time with an interaction: kernel 0's
// tuned tile costs 0.07 ms, kernel 1's costs 0.02 but only while kernel 0 is tuned, kernel 2's saves 0.01.
// Choice 1 of a kernel is its default.
double fakeStep(const std::vector<int> &choice) {
  double ms = 0.80;
  if (choice[0] == 0) ms += 0.07;
  if (choice[0] == 0 && choice[1] == 0) ms += 0.02;
  if (choice[2] == 1) ms += 0.01;
  return ms;
}

TEST(TuningStepSearch, RevertsTheKernelsWhoseTunedTilesCostTheStep) {
  std::vector<std::vector<int>> seen;
  auto r = searchInStep({2, 2, 2}, [&](const std::vector<int> &choice) -> llvm::Expected<double> {
    seen.push_back(choice);
    return fakeStep(choice);
  });
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  EXPECT_EQ(r->choice, (std::vector<int>{1, 0, 0}))
      << "kernel 0 reverted; kernel 1's cost went with it, so it keeps its tile; kernel 2's tile helps";
  EXPECT_DOUBLE_EQ(r->firstMs, 0.89);
  EXPECT_DOUBLE_EQ(r->bestMs, 0.80);
  // All tuned, the three single reverts, then the two reverts on top of kernel 0's (kernel 0 back on its
  // tuned tile is the first configuration, remembered): 6 steps.
  EXPECT_EQ(r->timed, 6);
  EXPECT_EQ(seen.size(), 6u);
  EXPECT_EQ(seen[0], (std::vector<int>{0, 0, 0}));
}

TEST(TuningStepSearch, TriesTheRunnersUpAndFollowsTheirInteractions) {
  // Kernel 0: tuned (0), default (1, +0.02 ms), a runner-up (2, -0.05). Kernel 1: tuned (0), default (1),
  // which costs 0.01 alone and saves 0.03 next to kernel 0's runner-up.
  auto step = [](const std::vector<int> &c) -> llvm::Expected<double> {
    double ms = 1.0 + (c[0] == 1 ? 0.02 : c[0] == 2 ? -0.05 : 0.0);
    if (c[1] == 1) ms += c[0] == 2 ? -0.03 : 0.01;
    return ms;
  };
  auto r = searchInStep({3, 2}, step);
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  EXPECT_EQ(r->choice, (std::vector<int>{2, 1}));
  EXPECT_DOUBLE_EQ(r->firstMs, 1.0);
  EXPECT_DOUBLE_EQ(r->bestMs, 0.92);
  // Round 1: all tuned and 3 moves; round 2: kernel 1's default (kernel 0's other choices remembered);
  // round 3: kernel 0's default next to it (the rest remembered), no gain.
  EXPECT_EQ(r->timed, 6);
}

TEST(TuningStepSearch, StartsFromTheDefaultsWhereNoSingleMoveReachesThem) {
  // Three kernels whose tuned tiles each cost the step only next to the others' (Llama-2-7B at one row,
  // session 23): every tuned tile 3.87 ms, every default (choice 1) 3.57, any one kernel back on its
  // default 3.86. From the tuned tiles alone the search stops at once.
  auto step = [](const std::vector<int> &c) -> llvm::Expected<double> {
    int defaults = (c[0] == 1) + (c[1] == 1) + (c[2] == 1);
    return defaults == 3 ? 3.57 : defaults == 2 ? 3.80 : defaults == 1 ? 3.86 : 3.87;
  };
  auto alone = searchInStep({2, 2, 2}, step);
  ASSERT_TRUE(bool(alone)) << llvm::toString(alone.takeError());
  EXPECT_EQ(alone->choice, (std::vector<int>{0, 0, 0})) << "0.27% a move: within the noise";
  auto r = searchInStep({2, 2, 2}, step, 0.005, {1, 1, 1});
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  EXPECT_EQ(r->choice, (std::vector<int>{1, 1, 1}));
  EXPECT_DOUBLE_EQ(r->firstMs, 3.87);
  EXPECT_DOUBLE_EQ(r->startMs, 3.57);
  EXPECT_DOUBLE_EQ(r->bestMs, 3.57);
  // Every tuned tile, the defaults, then the three moves from the defaults (none gains): 5 steps.
  EXPECT_EQ(r->timed, 5);
  // A start that loses keeps the tuned tiles as the starting point; a start of the wrong size is an error.
  r = searchInStep({2, 2, 2}, [](const std::vector<int> &c) -> llvm::Expected<double> { return c[0] ? 2.0 : 1.0; },
                   0.005, {1, 1, 1});
  ASSERT_TRUE(bool(r));
  EXPECT_EQ(r->choice, (std::vector<int>{0, 0, 0}));
  EXPECT_DOUBLE_EQ(r->startMs, 2.0);
  int timed = 0;
  r = searchInStep({2, 2}, [&](const std::vector<int> &) -> llvm::Expected<double> { return ++timed; }, 0.005, {1});
  ASSERT_FALSE(bool(r));
  EXPECT_EQ(timed, 0) << "refused before any step is timed";
  EXPECT_NE(llvm::toString(r.takeError()).find("a start of 1 choices for 2 kernels"), std::string::npos);
}

TEST(TuningStepSearch, GainsWithinTheNoiseMoveNothing) {
  auto r = searchInStep({2, 2}, [&](const std::vector<int> &c) -> llvm::Expected<double> {
    return c[1] ? 0.999 : 1.0; // 0.1%: within the default 0.5%
  });
  ASSERT_TRUE(bool(r));
  EXPECT_EQ(r->choice, (std::vector<int>{0, 0}));
  EXPECT_EQ(r->timed, 3);
  r = searchInStep({}, [&](const std::vector<int> &) -> llvm::Expected<double> { return 1.0; });
  ASSERT_TRUE(bool(r));
  EXPECT_EQ(r->timed, 1) << "no kernel: the step is timed once";
}

TEST(TuningStepSearch, AFailedOrBrokenStepIsAnError) {
  auto r = searchInStep({2, 2}, [&](const std::vector<int> &c) -> llvm::Expected<double> {
    if (c[1]) return llvm::createStringError(llvm::inconvertibleErrorCode(), "launch failed");
    return 1.0;
  });
  ASSERT_FALSE(bool(r));
  EXPECT_EQ(llvm::toString(r.takeError()), "launch failed");
  r = searchInStep({2}, [&](const std::vector<int> &) -> llvm::Expected<double> { return 0.0; });
  ASSERT_FALSE(bool(r));
  EXPECT_NE(llvm::toString(r.takeError()).find("not a positive time"), std::string::npos);
}

TEST(TuningDb, RoundTripsThroughItsFile) {
  test::TempDir tmp;
  TuningDb db;
  db.device = h200();
  TuningEntry e;
  e.tile = "m1_r2_w8";
  e.us = 11.5;
  e.defaultTile = "m1_r2_w4";
  e.defaultUs = 12.25;
  e.candidates = 15;
  e.failed = 1;
  e.failedTiles = {"m1_wgmma_k128_s9_split3"};
  e.runnersUp = {{"m1_r4_w8", 11.75}, {"m1_wgmma_k128_s8_split3", 12.0}};
  db.entries[TuningDb::entryKey("gemv_bf16_n2560_k2048_epi_none", "decode:1")] = e;
  std::string path = TuningDb::pathFor(tmp.path(), db.device);
  EXPECT_NE(path.find("/tuning/nvidia-h200_sm90_132sm_drv13000_nvrtc13.0.json"), std::string::npos) << path;
  ASSERT_FALSE(bool(db.save(path)));
  std::string warning;
  TuningDb back = TuningDb::load(path, h200(), &warning);
  EXPECT_EQ(warning, "");
  const TuningEntry *got = back.find("gemv_bf16_n2560_k2048_epi_none", "decode:1");
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->tile, "m1_r2_w8");
  EXPECT_EQ(got->us, 11.5);
  EXPECT_EQ(got->defaultTile, "m1_r2_w4");
  EXPECT_EQ(got->defaultUs, 12.25);
  EXPECT_EQ(got->candidates, 15);
  EXPECT_EQ(got->failed, 1);
  EXPECT_EQ(got->failedTiles, e.failedTiles);
  EXPECT_EQ(got->runnersUp, e.runnersUp);
  EXPECT_EQ(got->stepMs, 0.0) << "no in-step pass";
  EXPECT_EQ(got->kernelTile, "");
  EXPECT_EQ(back.find("gemv_bf16_n2560_k2048_epi_none", "decode:2-8"), nullptr);
  // What the in-step pass adds: the step's time, and the tile the kernel's timing picked when reverted.
  e.kernelTile = e.tile;
  e.tile = e.defaultTile;
  e.stepMs = 0.808;
  db.entries[TuningDb::entryKey("gemv_bf16_n2560_k2048_epi_none", "decode:1")] = e;
  ASSERT_FALSE(bool(db.save(path)));
  back = TuningDb::load(path, h200(), &warning);
  got = back.find("gemv_bf16_n2560_k2048_epi_none", "decode:1");
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->tile, "m1_r2_w4");
  EXPECT_EQ(got->kernelTile, "m1_r2_w8");
  EXPECT_EQ(got->stepMs, 0.808);
  // Nothing but the file is left behind (the write went through a temporary and a rename).
  std::error_code ec;
  int files = 0;
  for (llvm::sys::fs::directory_iterator it(TuningDb::directory(tmp.path()), ec), end; it != end && !ec; it.increment(ec))
    ++files;
  EXPECT_EQ(files, 1);
}

TEST(TuningDb, MissingCorruptAndForeignFilesAreIgnoredWithAWarning) {
  test::TempDir tmp;
  std::string path = tmp.path() + "/db.json", warning;
  TuningDb db = TuningDb::load(path, h200(), &warning);
  EXPECT_TRUE(db.entries.empty());
  EXPECT_EQ(warning, "") << "a missing database is just empty";

  for (const char *text : {"{ not json", "[1, 2]", "{\"format\": 1, \"entries\": {}}",
                           "{\"format\": 99, \"device\": {}, \"entries\": {}}"}) {
    writeText(path, text);
    warning.clear();
    db = TuningDb::load(path, h200(), &warning);
    EXPECT_TRUE(db.entries.empty()) << text;
    EXPECT_NE(warning.find("ignoring the tuning database"), std::string::npos) << text;
    EXPECT_NE(warning.find(path), std::string::npos) << warning;
  }

  // Written for another device: its timings say nothing about this one.
  TuningDb other;
  other.device = h200();
  other.device.name = "NVIDIA H100 80GB HBM3";
  other.entries["gemv_x@decode:1"].tile = "m1_r1_w4";
  ASSERT_FALSE(bool(other.save(path)));
  warning.clear();
  db = TuningDb::load(path, h200(), &warning);
  EXPECT_TRUE(db.entries.empty());
  EXPECT_NE(warning.find("written for nvidia-h100-80gb-hbm3"), std::string::npos) << warning;
  // An H200 database whose one entry, k@decode:1, is `entry` (JSON): each below is corrupt, not half-trusted,
  // and the warning names what is wrong.
  auto rejects = [&](const std::string &entry, const std::string &complaint) {
    writeText(path, "{\"format\": 1, \"device\": {\"name\": \"NVIDIA H200\", \"sm_count\": 132, \"compute_capability\": "
                    "\"9.0\", \"driver_version\": 13000, \"nvrtc_version\": \"13.0\"}, \"entries\": {\"k@decode:1\": " +
                        entry + "}}");
    warning.clear();
    db = TuningDb::load(path, h200(), &warning);
    EXPECT_TRUE(db.entries.empty()) << entry;
    EXPECT_NE(warning.find(complaint), std::string::npos) << warning;
  };
  rejects("{\"us\": 3}", "needs a key `spec@bucket`, a \"tile\" and \"us\""); // no tile
  rejects("{\"tile\": \"m1_r1_w4\", \"us\": 3, \"runners_up\": [{\"tile\": \"m1_r2_w4\"}]}",
          "entry 'k@decode:1': each of \"runners_up\" needs a \"tile\" and \"us\""); // a runner-up without its time
  rejects("{\"tile\": \"m1_r1_w4\", \"us\": 3, \"failed_tiles\": [7]}",
          "entry 'k@decode:1': \"failed_tiles\" holds tile names (strings)"); // a failed tile that is not a name
}

TEST(TuningTiles, EveryCandidateTileParsesBackToItself) {
  Target h100 = *parseTarget("sm_90");
  int gemm = 0, gemv = 0;
  for (int64_t m : {1, 8, 64, 512, 2048})
    for (const GemmTile &t : gemmTileCandidates(h100, m, 2560, 2048)) {
      auto back = parseGemmTile(t.str());
      ASSERT_TRUE(back.has_value()) << t.str();
      EXPECT_EQ(*back, t);
      ++gemm;
    }
  for (int64_t m : {1, 2, 8, 16})
    for (const GemvTile &t : gemvTileCandidates(h100, m, 2560, 2048)) {
      auto back = parseGemvTile(t.str());
      ASSERT_TRUE(back.has_value()) << t.str();
      EXPECT_EQ(*back, t);
      ++gemv;
    }
  EXPECT_GT(gemm, 20);
  EXPECT_GT(gemv, 20);
  // Prefill attention: its tiles too, the default first.
  AttentionPrefillSpec attn(32, 4, 64);
  auto tiles = attn.tuningCandidates(h100, 2048);
  ASSERT_GE(tiles.size(), 3u);
  EXPECT_EQ(tiles[0]->name(), attn.name());
  for (const auto &t : tiles) {
    auto back = attn.withTile(t->tileName(), h100);
    ASSERT_NE(back, nullptr) << t->tileName();
    EXPECT_EQ(back->name(), t->name());
    EXPECT_EQ(t->tuningKey(), "attention_prefill_bf16_h32_kv4_d64");
  }
  EXPECT_EQ(attn.withTile("m64n64_w2", h100), nullptr) << "block_m must be 16 x warps";
  EXPECT_FALSE(parseGemmTile("m128n128k32_s4").has_value());
  EXPECT_FALSE(parseGemvTile("m1_r2_w4x").has_value());
}

TEST(TuningTiles, CandidatesRespectTheEpilogue) {
  // The gated epilogue needs W rows in pairs: no FMA tile with an odd rowsPerWarp is offered.
  Target h100 = *parseTarget("sm_90");
  GemvSpec gated(11264, 2048, Epilogue::gated(Activation::Silu), GemvTile{1, 2, 4});
  auto candidates = gated.tuningCandidates(h100, 1);
  ASSERT_FALSE(candidates.empty());
  for (const auto &c : candidates) {
    auto t = parseGemvTile(c->tileName());
    ASSERT_TRUE(t.has_value());
    EXPECT_TRUE(t->mma || t->rowsPerWarp % 2 == 0) << c->name();
    EXPECT_EQ(c->tuningKey(), gated.tuningKey());
  }
  EXPECT_EQ(gated.withTile("m1_r1_w4", h100), nullptr);
  EXPECT_NE(gated.withTile("m1_r4_w4", h100), nullptr);
}

TEST(TuningPlan, APlanTakesItsTilesFromTheDatabaseAndSaysWhich) {
  auto m = test::parseVerified(test::readFile(std::string(MINFER_SOURCE_DIR) + "/examples/tinyllama-1.1b.ir"));
  ASSERT_TRUE(m);
  ASSERT_TRUE(bool(fuseModule(*m)));
  Target h100 = *parseTarget("sm_90");
  auto plain = buildPlan(*m, h100);
  ASSERT_TRUE(bool(plain)) << llvm::toString(plain.takeError());
  EXPECT_EQ(plain->tunedKernels(), 0);
  EXPECT_GT(plain->defaultTileKernels(), 5);

  // One decode gemv (the gated MLP's) tuned to another tile, one entry with a tile the epilogue cannot take.
  const KernelSpec *gated = nullptr, *qkv = nullptr;
  for (const auto &k : plain->kernels) {
    if (k->name().find("gemv") == 0 && k->name().find("gated_silu") != std::string::npos) gated = k.get();
    if (k->name().find("gemv") == 0 && k->name().find("_qkv_") != std::string::npos) qkv = k.get();
  }
  ASSERT_NE(gated, nullptr);
  ASSERT_NE(qkv, nullptr);
  TuningDb db;
  db.device = h200();
  std::string tile = gated->tileName() == "m1_r4_w8" ? "m1_r2_w8" : "m1_r4_w8";
  db.entries[TuningDb::entryKey(gated->tuningKey(), "decode:1")].tile = tile;
  db.entries[TuningDb::entryKey(qkv->tuningKey(), "decode:1")].tile = "m1_r3_w4"; // odd rows: refused
  PlanOptions po;
  po.tuning = &db;
  auto tuned = buildPlan(*m, h100, po);
  ASSERT_TRUE(bool(tuned)) << llvm::toString(tuned.takeError());
  EXPECT_EQ(tuned->tunedKernels(), 1);
  EXPECT_EQ(tuned->defaultTileKernels(), plain->defaultTileKernels() - 1);
  std::string want = gated->tuningKey().substr(0, gated->tuningKey().find("_epi_")) + "_" + tile;
  bool found = false;
  for (const auto &k : tuned->kernels)
    if (k->name().rfind(want, 0) == 0) {
      found = true;
      EXPECT_EQ(tuned->tileSource.at(k->name()), "tuned");
    }
  EXPECT_TRUE(found) << "no kernel named " << want << "...";
  EXPECT_EQ(tuned->tunedTiles.size(), 1u);
  EXPECT_EQ(tuned->tunedTiles.begin()->second, tile);
  // The launch count does not change with tiles.
  EXPECT_EQ(tuned->decode.launches.size(), plain->decode.launches.size());

  // An entry whose winner was the default of its time says "the default": once the compiler's default has
  // moved, the plan takes today's. A winner that beat an old default stays.
  TuningEntry &e = db.entries[TuningDb::entryKey(gated->tuningKey(), "decode:1")];
  e.defaultTile = e.tile; // `tile` won as the default, and today's default is gated->tileName()
  EXPECT_TRUE(e.keepsDefault(gated->tileName()));
  EXPECT_FALSE(e.keepsDefault(e.tile)) << "the default has not moved";
  auto moved = buildPlan(*m, h100, po);
  ASSERT_TRUE(bool(moved)) << llvm::toString(moved.takeError());
  EXPECT_EQ(moved->tunedKernels(), 0);
  EXPECT_EQ(moved->tileSource.at(gated->name()), "default");
  e.defaultTile = "m1_r1_w2"; // `tile` beat another, older default
  EXPECT_TRUE(e.defaultMoved(gated->tileName())) << "timed again by minferc autotune";
  EXPECT_FALSE(e.keepsDefault(gated->tileName()));
  auto kept = buildPlan(*m, h100, po);
  ASSERT_TRUE(bool(kept)) << llvm::toString(kept.takeError());
  EXPECT_EQ(kept->tunedKernels(), 1);
  e.defaultTile.clear(); // a bundle's entries name only their tiles
  EXPECT_FALSE(e.defaultMoved(gated->tileName()));
}

// Decode attention's warps come from the database where the session's contexts are one chunk (the decode
// buckets' cache of 256): the split and the workspace stay forSession's. A session of another bucket, or whose
// cache is longer, keeps forSession's (AttentionSpecTest checks that the key names forSession's warps).
TEST(TuningPlan, DecodeAttentionTakesItsWarpsFromTheDatabaseAtShortContexts) {
  auto m = test::parseVerified(test::readFile(std::string(MINFER_SOURCE_DIR) + "/examples/tinyllama-1.1b.ir"));
  ASSERT_TRUE(m);
  ASSERT_TRUE(bool(fuseModule(*m)));
  Target h200t = *parseTarget("sm_90a");
  auto attention = [](const Plan &p) -> const AttentionDecodeSpec * {
    for (const PlannedLaunch &l : p.decode.launches)
      if (auto *a = dynamic_cast<const AttentionDecodeSpec *>(p.kernels[l.kernel].get())) return a;
    return nullptr;
  };
  auto bytesOf = [](const Plan &p, llvm::StringRef name) {
    for (const PlanBuffer &b : p.buffers)
      if (b.name == name) return b.fixedBytes;
    return int64_t(-1);
  };
  PlanOptions po;
  po.maxSeq = 256;
  auto plain = buildPlan(*m, h200t, po);
  ASSERT_TRUE(bool(plain)) << llvm::toString(plain.takeError());
  const AttentionDecodeSpec *planned = attention(*plain);
  ASSERT_NE(planned, nullptr);
  ASSERT_EQ(planned->tileName(), "t256");
  EXPECT_EQ(plain->tileSource.at(planned->name()), "default");

  TuningDb db;
  db.device = h200();
  db.entries[TuningDb::entryKey(planned->tuningKey(), "decode:1")].tile = "t512";
  po.tuning = &db;
  auto tuned = buildPlan(*m, h200t, po);
  ASSERT_TRUE(bool(tuned)) << llvm::toString(tuned.takeError());
  const AttentionDecodeSpec *a = attention(*tuned);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->threads, 512);
  EXPECT_EQ(a->splitTokens, planned->splitTokens);
  EXPECT_EQ(tuned->tileSource.at(a->name()), "tuned");
  EXPECT_EQ(tuned->tunedTiles.at(TuningDb::entryKey(planned->tuningKey(), "decode:1")), "t512");
  for (const char *ws : {"attn_partial_out", "attn_partial_lse", "attn_arrivals"}) {
    EXPECT_GT(bytesOf(*tuned, ws), 0) << ws;
    EXPECT_EQ(bytesOf(*tuned, ws), bytesOf(*plain, ws)) << ws;
  }

  // 16 sequences are another bucket (decode:9-16): the entry is not theirs. A longer cache has no key at all.
  po.maxBatch = 16;
  auto sixteen = buildPlan(*m, h200t, po);
  ASSERT_TRUE(bool(sixteen)) << llvm::toString(sixteen.takeError());
  ASSERT_NE(attention(*sixteen), nullptr);
  EXPECT_EQ(sixteen->tileSource.at(attention(*sixteen)->name()), "default");
  EXPECT_TRUE(sixteen->tunedTiles.empty());
  po.maxBatch = 1;
  po.maxSeq = 2048;
  auto longer = buildPlan(*m, h200t, po);
  ASSERT_TRUE(bool(longer)) << llvm::toString(longer.takeError());
  ASSERT_NE(attention(*longer), nullptr);
  EXPECT_EQ(attention(*longer)->threads, AttentionDecodeSpec::kFewBlocksThreads);
  EXPECT_EQ(attention(*longer)->tuningKey(), "");
}

} // namespace

// A stray file in the tuning directory nested a million levels deep once overflowed the stack of every
// compile (llvm::json::parse recurses per level); now it is an error naming the file and the byte.
// A bundle build away from the device takes the newest database of a device with the target's SM: an H200's
// (which the runtime compiles sm_90a for) serves sm_90a and sm_90 builds, not sm_89 ones.
TEST(TuningDb, BundleBuildsFindTheDatabaseOfTheirSm) {
  test::TempDir tmp;
  TuningDb db;
  db.device = h200();
  EXPECT_EQ(db.device.target(), "sm_90a");
  std::string path = TuningDb::pathFor(tmp.path(), db.device);
  ASSERT_FALSE(bool(db.save(path)));
  EXPECT_EQ(TuningDb::newestFor(tmp.path(), "sm_90a"), path);
  EXPECT_EQ(TuningDb::newestFor(tmp.path(), "sm_90"), path);
  EXPECT_EQ(TuningDb::newestFor(tmp.path(), "sm_89"), std::nullopt);
}

TEST(TuningDb, DeeplyNestedJsonIsAnErrorNotACrash) {
  test::TempDir tmp;
  std::string path = tmp.write("deep.json", std::string(1000000, '[') + std::string(1000000, ']'));
  EXPECT_TRUE(test::failsMentioning(TuningDb::read(path), {"deep.json", "nested deeper than 128 levels at byte 128"}));
  // Brackets inside strings do not count.
  std::string strings = tmp.write("strings.json", "{\"x\": \"" + std::string(1000, '[') + "\"}");
  EXPECT_FALSE(test::failsMentioning(TuningDb::read(strings), {"nested deeper"}));
}
