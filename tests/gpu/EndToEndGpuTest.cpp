// tests/gpu/EndToEndGpuTest.cpp — whole models on the GPU against Hugging Face transformers.
//
// Every golden fixture goes through the public C++ API (include/minfer/minfer.hpp) and through `minferc
// run`: the logits of the prompt and of every greedy step within 2e-2 relative error of HF's fp32 logits
// (DESIGN.md, Numerics), and exactly HF's greedy tokens. Then what a session promises: each sequence of a
// batch gets the tokens it gets alone, a prompt split over several prefill chunks gives the same tokens,
// graph and non-graph decode agree, sampling with a seed is reproducible, and a stop token ends a sequence.
#include "common/GoldenReference.h"
#include "common/RandomBf16.h"
#include "common/TestFiles.h"
#include "common/TestModels.h"
#include "gpu/GpuHarness.h"

#include "compiler/Tuning.h"
#include "compiler/kernels/Gemv.h"
#include "io/Npy.h"
#include "io/Safetensors.h"
#include "minfer/minfer.h"
#include "minfer/minfer.hpp"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Program.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <regex>
#include <set>

#include <unistd.h>

extern char **environ;

using namespace minfer;

namespace {

constexpr double kLogitsTolerance = 2e-2; // DESIGN.md: GPU vs reference on logits

// Fails the test with the result's error unless it holds a value.
#define API_TRY(var, expr)                                                                                   \
  auto var = (expr);                                                                                         \
  ASSERT_TRUE(var.ok()) << #expr << ": " << var.error()

// In a TEST body: `dir`, `ref` (its reference outputs), `eo`, `engine` and `session` for the golden fixture
// `name`. The remaining arguments, if any, set fields of the EngineOptions `eo` that the engine is loaded
// with: `OPEN_FIXTURE_SESSION("gpt2", eo.maxBatch = 2, eo.maxSeq = 64)`. The test fails if any is missing.
#define OPEN_FIXTURE_SESSION(name, ...)                                                                      \
  std::string dir = test::fixtureDir(name);                                                                  \
  GPU_TRY(ref, test::readReference(dir));                                                                    \
  EngineOptions eo;                                                                                          \
  __VA_ARGS__;                                                                                               \
  API_TRY(engine, Engine::load(dir, eo));                                                                    \
  API_TRY(session, engine->createSession())

// Our keepLogits layout: P prompt rows, then one row per generated token fed back. HF's greedy_logits row k
// is the row token k was chosen from: ours at P - 1 + k.
void expectLogitsMatch(const std::vector<float> &got, const test::Reference &ref, int64_t vocab) {
  int64_t P = static_cast<int64_t>(ref.promptIds.size()), G = static_cast<int64_t>(ref.greedyIds.size());
  ASSERT_EQ(static_cast<int64_t>(got.size()), (P + G - 1) * vocab);
  std::vector<float> prompt(got.begin(), got.begin() + P * vocab);
  double promptErr = test::relError(prompt, ref.promptLogits.data);
  EXPECT_LT(promptErr, kLogitsTolerance) << "prompt logits";
  std::vector<float> greedy(got.begin() + (P - 1) * vocab, got.end());
  double greedyErr = test::relError(greedy, ref.greedyLogits.data);
  EXPECT_LT(greedyErr, kLogitsTolerance) << "logits of the greedy steps";
  std::cout << "[ e2e ] prompt logits rel err " << promptErr << ", greedy steps " << greedyErr << "\n";
}

class EndToEnd : public ::testing::TestWithParam<const char *> {};

// Fused (the default) and unfused (one kernel per IR op) each hold to HF; then they are compared with each
// other on the same prompt: the fused kernels compute the same function in fewer launches. The fused plan
// decodes both ways, as one launch per op (the default) and as one persistent kernel a step (it must have
// been built: every fixture decodes one sequence), each held to HF and the two to the same logits; the
// unfused plan has ops without a task form and decodes as launches.
TEST_P(EndToEnd, CppApiGeneratesTransformersTokens) {
  MINFER_REQUIRE_GPU();
  std::string dir = test::fixtureDir(GetParam());
  GPU_TRY(ref, test::readReference(dir));
  std::vector<std::vector<float>> logits; // fused (persistent, launches), unfused
  for (bool fuse : {true, false}) {
    SCOPED_TRACE(fuse ? "fused" : "unfused");
    EngineOptions eo;
    eo.fuse = fuse;
    API_TRY(engine, Engine::load(dir, eo));
    SessionOptions so;
    so.keepLogits = true;
    API_TRY(session, engine->createSession(so));
    GenerationOptions go;
    go.maxNewTokens = static_cast<int64_t>(ref.greedyIds.size());
    std::vector<DecodePath> paths = {DecodePath::Launches};
    if (fuse) paths.insert(paths.begin(), DecodePath::Persistent);
    for (DecodePath path : paths) {
      SCOPED_TRACE(path == DecodePath::Persistent ? "persistent decode" : "decode launches");
      go.decode = path;
      for (bool graph : {true, false}) {
        SCOPED_TRACE(graph ? "CUDA graph" : "kernel by kernel");
        go.cudaGraph = graph;
        API_TRY(out, session->generate({ref.promptIds}, go));
        EXPECT_EQ(out->tokens[0], ref.greedyIds);
        expectLogitsMatch(out->logits[0], ref, engine->vocabSize());
        if (graph) logits.push_back(out->logits[0]);
      }
    }
  }
  ASSERT_EQ(logits.size(), 3u);
  double paths = test::relError(logits[0], logits[1]);
  std::cout << "[ e2e ] persistent vs launches decode logits rel err " << paths << "\n";
  EXPECT_LT(paths, kLogitsTolerance) << "the persistent kernel's logits differ from the launches'";
  double err = test::relError(logits[1], logits[2]);
  std::cout << "[ e2e ] fused vs unfused logits rel err " << err << "\n";
  EXPECT_LT(err, kLogitsTolerance) << "fused and unfused logits differ";
  EXPECT_GT(err, 0.0) << "fused and unfused logits are bit-identical: did the fusion pass run?";
}

// 64 positions: the prompt and the forced tokens as one prefill, and the prompt followed by the forced tokens
// fed one decode step at a time through the KV cache (teacher forcing), each against HF's float64 logits;
// fused and unfused, CUDA graph and kernel by kernel. RoPE tables, cache layout and decode attention over a
// long context would all show here.
TEST_P(EndToEnd, SixtyFourPositionsMatchTransformers) {
  MINFER_REQUIRE_GPU();
  std::string dir = test::fixtureDir(GetParam());
  GPU_TRY(ref, test::readReference(dir));
  const int64_t P = static_cast<int64_t>(ref.promptIds.size()), D = static_cast<int64_t>(ref.forcedIds.size());
  const int64_t vocab = ref.promptLogits.cols();
  ASSERT_GE(P + D, 64);
  std::vector<float> want = ref.promptLogits.data; // [P + D, vocab]: every position's logits
  want.insert(want.end(), ref.forcedLogits.data.begin(), ref.forcedLogits.data.end());
  std::vector<int32_t> all = ref.promptIds;
  all.insert(all.end(), ref.forcedIds.begin(), ref.forcedIds.end());
  for (bool fuse : {true, false}) {
    SCOPED_TRACE(fuse ? "fused" : "unfused");
    EngineOptions eo;
    eo.fuse = fuse;
    eo.maxSeq = P + D;
    API_TRY(engine, Engine::load(dir, eo));
    SessionOptions so;
    so.keepLogits = true;
    API_TRY(session, engine->createSession(so));

    GenerationOptions prefillOnly;
    prefillOnly.maxNewTokens = 0;
    API_TRY(pre, session->generate({all}, prefillOnly));
    ASSERT_EQ(static_cast<int64_t>(pre->logits[0].size()), (P + D) * vocab);
    double prefillErr = test::relError(pre->logits[0], want);
    EXPECT_LT(prefillErr, kLogitsTolerance) << "prefill of " << P + D << " tokens";

    GenerationOptions go;
    go.maxNewTokens = D + 1;
    go.forcedTokens = {ref.forcedIds};
    for (bool graph : {true, false}) {
      SCOPED_TRACE(graph ? "CUDA graph" : "kernel by kernel");
      go.cudaGraph = graph;
      API_TRY(out, session->generate({ref.promptIds}, go));
      ASSERT_EQ(static_cast<int64_t>(out->logits[0].size()), (P + D) * vocab);
      std::vector<float> steps(out->logits[0].begin() + P * vocab, out->logits[0].end());
      double decodeErr = test::relError(steps, ref.forcedLogits.data);
      EXPECT_LT(decodeErr, kLogitsTolerance) << D << " teacher-forced decode steps";
      // What the model chose at each forced position is the argmax of HF's logits there, wherever HF's
      // top two are clearly apart.
      ASSERT_EQ(static_cast<int64_t>(out->tokens[0].size()), D + 1);
      for (int64_t k = 0; k < D; ++k) {
        const float *row = ref.forcedLogits.row(k);
        std::vector<float> sorted(row, row + vocab);
        std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
        if (sorted[0] - sorted[1] > 0.25f) {
          EXPECT_EQ(out->tokens[0][k + 1], std::max_element(row, row + vocab) - row) << "forced step " << k;
        }
      }
      std::cout << "[ e2e ] " << GetParam() << (fuse ? " fused" : " unfused") << (graph ? " graph" : "")
                << ": prefill of " << P + D << " rel err " << prefillErr << ", " << D << " forced steps " << decodeErr
                << "\n";
    }
  }
}

// Teacher forcing is checked before any work: one list per prompt, ids in the vocabulary, no more tokens
// than are fed back.
TEST(Session, ForcedTokensAreCheckedBeforeAnyWork) {
  MINFER_REQUIRE_GPU();
  OPEN_FIXTURE_SESSION("gpt2");
  GenerationOptions go;
  go.maxNewTokens = 3;
  go.forcedTokens = {{1, 2}, {3}};
  auto two = session->generate({ref.promptIds}, go);
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.error().find("2 lists of forced tokens for 1 prompts"), std::string::npos) << two.error();
  go.forcedTokens = {{1, 2, 3}};
  auto many = session->generate({ref.promptIds}, go);
  ASSERT_FALSE(many.ok());
  EXPECT_NE(many.error().find("only max_new_tokens - 1 = 2 tokens are fed back"), std::string::npos) << many.error();
  go.forcedTokens = {{1, 321}};
  auto outside = session->generate({ref.promptIds}, go);
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.error().find("forced token id 321, outside the vocabulary [0, 321)"), std::string::npos)
      << outside.error();
  go.forcedTokens = {{ref.greedyIds[0], ref.greedyIds[1]}}; // forcing what greedy picks changes nothing
  API_TRY(same, session->generate({ref.promptIds}, go));
  EXPECT_EQ(same->tokens[0], std::vector<int32_t>(ref.greedyIds.begin(), ref.greedyIds.begin() + 3));
}

// `minferc run` (the default GPU backend): tokens on stdout, logits in the reference backend's .npy layout.
TEST_P(EndToEnd, MinfercRunGeneratesTransformersTokens) {
  MINFER_REQUIRE_GPU();
  std::string dir = test::fixtureDir(GetParam());
  GPU_TRY(ref, test::readReference(dir));
  test::TempDir tmp;
  std::string ids = llvm::join(llvm::map_range(ref.promptIds, [](int32_t t) { return std::to_string(t); }), ",");
  std::string out = tmp.file("tokens.txt"), err = tmp.file("stderr.txt"), npy = tmp.file("logits.npy");
  std::string maxNew = std::to_string(ref.greedyIds.size());
  std::vector<llvm::StringRef> args = {gputest::minfercPath(), "run", dir, "--prompt-ids", ids, "--max-new-tokens", maxNew,
                                       "--logits-out", npy};
  llvm::Optional<llvm::StringRef> redirects[] = {llvm::None, llvm::StringRef(out), llvm::StringRef(err)};
  int rc = llvm::sys::ExecuteAndWait(gputest::minfercPath(), args, llvm::None, redirects);
  ASSERT_EQ(rc, 0) << test::readFile(err);
  std::string want = llvm::join(llvm::map_range(ref.greedyIds, [](int32_t t) { return std::to_string(t); }), ",");
  EXPECT_EQ(test::readFile(out), want + "\n");
  EXPECT_NE(test::readFile(err).find("backend=gpu"), std::string::npos) << test::readFile(err);
  GPU_TRY(logits, readNpyF32(npy));
  expectLogitsMatch(logits.data, ref, ref.promptLogits.cols());

  // --decode=persistent: the same tokens, and the summary says how the steps ran.
  args.push_back("--decode=persistent");
  rc = llvm::sys::ExecuteAndWait(gputest::minfercPath(), args, llvm::None, redirects);
  ASSERT_EQ(rc, 0) << test::readFile(err);
  EXPECT_EQ(test::readFile(out), want + "\n");
  EXPECT_NE(test::readFile(err).find("one persistent kernel ("), std::string::npos) << test::readFile(err);
}

// Named by fixture: EndToEnd.CppApiGeneratesTransformersTokens/llama_gqa.
INSTANTIATE_TEST_SUITE_P(Fixtures, EndToEnd, ::testing::ValuesIn(test::kFixtures),
                         [](const auto &info) { return std::string(info.param); });

// Runs `minferc ARGS` with this process's environment but MINFER_CACHE_DIR = `cacheDir`, its standard output
// and errors into the files `out` and `err`; its exit code.
int minfercWithCache(const std::string &cacheDir, std::vector<llvm::StringRef> args, const std::string &out,
                     const std::string &err) {
  std::string cacheEnv = "MINFER_CACHE_DIR=" + cacheDir;
  std::vector<llvm::StringRef> env = {cacheEnv};
  for (char **e = environ; *e; ++e)
    if (!llvm::StringRef(*e).startswith("MINFER_CACHE_DIR=")) env.push_back(*e);
  args.insert(args.begin(), gputest::minfercPath());
  llvm::Optional<llvm::StringRef> redirects[] = {llvm::None, llvm::StringRef(out), llvm::StringRef(err)};
  return llvm::sys::ExecuteAndWait(gputest::minfercPath(), args, llvm::ArrayRef<llvm::StringRef>(env), redirects);
}

// The one tuning database under `cacheDir` (the last listed; empty when there is none).
std::string tuningDbIn(const std::string &cacheDir) {
  std::string path;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(TuningDb::directory(cacheDir), ec), end; it != end && !ec; it.increment(ec))
    path = it->path();
  return path;
}

// `minferc autotune` writes the device's tuning database; a later `minferc run` plans with the tuned tiles,
// says so, and still gives HF's tokens; `minferc autotune --show` lists the entries.
TEST(Autotune, WarmsTheDatabaseAndALaterRunUsesIt) {
  MINFER_REQUIRE_GPU();
  std::string dir = test::fixtureDir("llama_gqa");
  GPU_TRY(ref, test::readReference(dir));
  test::TempDir tmp;
  const std::string cacheDir = tmp.file("cache");
  auto minferc = [&](std::vector<llvm::StringRef> args, const std::string &out, const std::string &err) {
    return minfercWithCache(cacheDir, std::move(args), out, err);
  };
  // Each command its own output files (a redirect does not truncate).
  int step = 0;
  std::string out, err;
  auto files = [&]() {
    ++step;
    out = tmp.file("out" + std::to_string(step) + ".txt");
    err = tmp.file("err" + std::to_string(step) + ".txt");
  };
  files();
  ASSERT_EQ(minferc({"autotune", dir, "--buckets", "decode:1,prefill:1-512"}, out, err), 0) << test::readFile(err);
  std::string log = test::readFile(err);
  EXPECT_NE(log.find("tuned now"), std::string::npos) << log;
  EXPECT_NE(log.find("wrote "), std::string::npos) << log;

  files();
  ASSERT_EQ(minferc({"autotune", "--show"}, out, err), 0) << test::readFile(err);
  std::string shown = test::readFile(out);
  EXPECT_NE(shown.find("@decode:1"), std::string::npos) << shown;
  EXPECT_NE(shown.find("@prefill:1-512"), std::string::npos) << shown;

  // Tuning again finds everything in the database.
  files();
  ASSERT_EQ(minferc({"autotune", dir, "--buckets", "decode:1"}, out, err), 0) << test::readFile(err);
  EXPECT_NE(test::readFile(err).find("(0 tuned now"), std::string::npos) << test::readFile(err);

  std::string ids = llvm::join(llvm::map_range(ref.promptIds, [](int32_t t) { return std::to_string(t); }), ",");
  std::string maxNew = std::to_string(ref.greedyIds.size());
  files();
  ASSERT_EQ(minferc({"run", dir, "--prompt-ids", ids, "--max-new-tokens", maxNew}, out, err), 0) << test::readFile(err);
  std::string want = llvm::join(llvm::map_range(ref.greedyIds, [](int32_t t) { return std::to_string(t); }), ",");
  EXPECT_EQ(test::readFile(out), want + "\n");
  std::string runLog = test::readFile(err);
  std::smatch tuned;
  ASSERT_TRUE(std::regex_search(runLog, tuned, std::regex("tiles: ([0-9]+) tuned"))) << runLog;
  EXPECT_GT(std::stoi(tuned[1]), 0) << runLog;
}

// `minferc autotune --in-step` on a checkpoint: after the per-kernel pass, the decode step itself is timed
// with every tuned tile and with each tuned kernel on its default or a runner-up tile. One entry is planted on a tile other
// than its default first (the fixture's kernels mostly keep theirs), so there is a choice to time. Whatever
// it keeps, every entry of the bucket records the step's time. Then the same for a prefill bucket (a gemm
// planted on a runner-up), and a later run still gives HF's tokens.
TEST(Autotune, InStepTimesTheStepAndThePrefillAndTheRunStillMatches) {
  MINFER_REQUIRE_GPU();
  std::string dir = test::fixtureDir("llama_gqa");
  GPU_TRY(ref, test::readReference(dir));
  test::TempDir tmp;
  std::string cacheDir = tmp.file("cache");
  int step = 0;
  std::string out, err;
  auto minferc = [&](std::vector<llvm::StringRef> args) {
    ++step;
    out = tmp.file("out" + std::to_string(step) + ".txt");
    err = tmp.file("err" + std::to_string(step) + ".txt");
    return minfercWithCache(cacheDir, std::move(args), out, err);
  };

  ASSERT_EQ(minferc({"autotune", dir, "--buckets", "decode:1"}), 0) << test::readFile(err);

  // The database the tuner wrote (the only one in the cache): plant a one-row FMA tile on a residual gemv.
  const std::string dbPath = tuningDbIn(cacheDir);
  ASSERT_FALSE(dbPath.empty());
  auto db = TuningDb::read(dbPath);
  ASSERT_TRUE(bool(db)) << llvm::toString(db.takeError());
  // Decode attention (the fixture's cache is one chunk) has an entry whose tiles are every warp count, each
  // timed: the in-step pass below tries those its kernel timing did not pick.
  std::string attention;
  for (const auto &[key, e] : db->entries)
    if (llvm::StringRef(key).startswith("attention_decode_") && llvm::StringRef(key).endswith("@decode:1")) {
      attention = key;
      std::set<std::string> tiles = {e.tile, e.defaultTile};
      for (const TuningEntry::Timed &t : e.runnersUp) {
        EXPECT_GT(t.us, 0.0) << key << ": " << t.tile;
        tiles.insert(t.tile);
      }
      EXPECT_EQ(tiles, (std::set<std::string>{"t64", "t128", "t256", "t512"})) << key;
      EXPECT_GT(e.us, 0.0) << key;
    }
  ASSERT_FALSE(attention.empty()) << "no decode attention entry";
  std::string planted;
  for (auto &[key, e] : db->entries)
    if (planted.empty() && llvm::StringRef(key).startswith("gemv_") && key.find("epi_residual@decode:1") != std::string::npos) {
      e.tile = e.defaultTile == "m1_r1_w8" ? "m1_r1_w2" : "m1_r1_w8";
      planted = key;
    }
  ASSERT_FALSE(planted.empty()) << "no residual gemv in the fixture's decode plan";
  MINFER_ASSERT_OK(db->save(dbPath));

  ASSERT_EQ(minferc({"autotune", dir, "--buckets", "decode:1", "--in-step"}), 0) << test::readFile(err);
  std::string log = test::readFile(err);
  EXPECT_NE(log.find("ms a step with every tuned tile"), std::string::npos) << log;
  const TuningEntry &before = db->entries.at(planted);
  EXPECT_NE(log.find("ms a step with " + planted + " on " + before.defaultTile), std::string::npos) << log;
  EXPECT_NE(log.find("ms a step with " + attention + " on t"), std::string::npos) << log;
  EXPECT_NE(log.find("decode:1: keeps "), std::string::npos) << log;
  std::smatch counts;
  ASSERT_TRUE(std::regex_search(log, counts, std::regex("1 buckets, ([0-9]+) configurations timed, ([0-9]+) kernels moved")))
      << log;
  EXPECT_GE(std::stoi(counts[1]), 2) << log;
  auto after = TuningDb::read(dbPath);
  ASSERT_TRUE(bool(after)) << llvm::toString(after.takeError());
  const TuningEntry &e = after->entries.at(planted);
  EXPECT_GT(e.stepMs, 0.0);
  if (e.tile != before.tile) {
    EXPECT_EQ(e.kernelTile, before.tile) << "a move names the tile it replaced";
  }
  for (const auto &[key, x] : after->entries) {
    if (key.find("@decode:1") != std::string::npos) {
      EXPECT_EQ(x.stepMs, e.stepMs) << key;
    }
  }

  // A prefill bucket (the fixture's 128 positions: prefills of 128 rows): a gemm planted on a runner-up.
  ASSERT_EQ(minferc({"autotune", dir, "--buckets", "prefill:1-512"}), 0) << test::readFile(err);
  auto pdb = TuningDb::read(dbPath);
  ASSERT_TRUE(bool(pdb)) << llvm::toString(pdb.takeError());
  std::string prefillPlanted, prefillDefault;
  for (auto &[key, e] : pdb->entries)
    if (prefillPlanted.empty() && llvm::StringRef(key).startswith("gemm_") &&
        llvm::StringRef(key).endswith("@prefill:1-512") && !e.defaultTile.empty()) {
      for (const TuningEntry::Timed &t : e.runnersUp)
        if (e.tile == e.defaultTile && t.tile != e.defaultTile) e.tile = t.tile;
      if (e.tile != e.defaultTile) prefillPlanted = key, prefillDefault = e.defaultTile;
    }
  ASSERT_FALSE(prefillPlanted.empty()) << "no gemm of the fixture's prefill has a tile to plant";
  MINFER_ASSERT_OK(pdb->save(dbPath));
  ASSERT_EQ(minferc({"autotune", dir, "--buckets", "prefill:1-512", "--in-step"}), 0) << test::readFile(err);
  log = test::readFile(err);
  EXPECT_NE(log.find("prefill:1-512: "), std::string::npos) << log;
  EXPECT_NE(log.find("ms a prefill with every tuned tile"), std::string::npos) << log;
  EXPECT_NE(log.find("ms a prefill with " + prefillPlanted + " on " + prefillDefault), std::string::npos) << log;
  EXPECT_NE(log.find("prefill:1-512: keeps "), std::string::npos) << log;

  std::string ids = llvm::join(llvm::map_range(ref.promptIds, [](int32_t t) { return std::to_string(t); }), ",");
  ASSERT_EQ(minferc({"run", dir, "--prompt-ids", ids, "--max-new-tokens", std::to_string(ref.greedyIds.size())}), 0)
      << test::readFile(err);
  std::string want = llvm::join(llvm::map_range(ref.greedyIds, [](int32_t t) { return std::to_string(t); }), ",");
  EXPECT_EQ(test::readFile(out), want + "\n");
}

// On a Hopper part the 16-row decode gemvs are wgmma kernels: `minferc autotune` keeps, among each one's
// runners-up, the step neighbours (a ring slot, a split block more or less) of its default tile and of the tile
// its own timing picked, so that the in-step pass can try them, whatever their own time.
TEST(Autotune, KeepsTheStepNeighboursOfTheDefaultAndOfTheWinner) {
  MINFER_REQUIRE_GPU();
  GPU_TRY(target, deviceTarget());
  if (!target.hasWgmma()) GTEST_SKIP() << "not an sm_90a device: its gemvs have no wgmma tiles, so no neighbours";
  std::string dir = test::fixtureDir("llama_gqa");
  test::TempDir tmp;
  std::string cacheDir = tmp.file("cache");
  std::string out = tmp.file("out.txt"), err = tmp.file("err.txt");
  ASSERT_EQ(minfercWithCache(cacheDir, {"autotune", dir, "--buckets", "decode:9-16"}, out, err), 0) << test::readFile(err);
  const std::string dbPath = tuningDbIn(cacheDir);
  ASSERT_FALSE(dbPath.empty());
  GPU_TRY(db, TuningDb::read(dbPath));
  int checked = 0;
  std::string dropped, droppedFrom; // a neighbour that is only a runner-up, and its entry
  for (const auto &[key, e] : db.entries) {
    int64_t n = 0, k = 0;
    if (std::sscanf(key.c_str(), "gemv_bf16_n%ld_k%ld_", &n, &k) != 2) continue;
    for (const std::string &tile : {e.defaultTile, e.tile}) {
      std::optional<GemvTile> t = parseGemvTile(tile);
      ASSERT_TRUE(t.has_value()) << key << ": " << tile;
      if (!t->wgmma) continue;
      auto neighbours = GemvSpec(n, k, Epilogue::None, *t).stepNeighbours(target);
      EXPECT_FALSE(neighbours.empty()) << key << ": " << tile;
      for (const auto &nb : neighbours) {
        bool kept = nb->tileName() == e.tile || nb->tileName() == e.defaultTile || // the in-step pass tries both
                    std::any_of(e.runnersUp.begin(), e.runnersUp.end(),
                                [&](const TuningEntry::Timed &r) { return r.tile == nb->tileName() && r.us > 0; });
        EXPECT_TRUE(kept) << key << ": " << nb->tileName() << ", a neighbour of " << tile << ", is not a runner-up";
        if (dropped.empty() && kept && nb->tileName() != e.tile && nb->tileName() != e.defaultTile)
          dropped = nb->tileName(), droppedFrom = key;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 0) << "no wgmma gemv among the fixture's 16-row decode entries";

  // An entry without one of them (as a database from a minfer that kept fewer has it) is timed again, and no
  // other: the run says so, and the entry lists the neighbour again.
  ASSERT_FALSE(dropped.empty()) << "no step neighbour is only a runner-up";
  auto &runnersUp = db.entries.at(droppedFrom).runnersUp;
  runnersUp.erase(std::remove_if(runnersUp.begin(), runnersUp.end(), [&](const TuningEntry::Timed &t) { return t.tile == dropped; }),
                  runnersUp.end());
  MINFER_ASSERT_OK(db.save(dbPath));
  std::string err2 = tmp.file("err2.txt");
  ASSERT_EQ(minfercWithCache(cacheDir, {"autotune", dir, "--buckets", "decode:9-16"}, out, err2), 0) << test::readFile(err2);
  std::string log = test::readFile(err2);
  EXPECT_NE(log.find("(1 tuned now, 1 of them because their default tile or its step neighbours have changed since"),
            std::string::npos)
      << log;
  GPU_TRY(again, TuningDb::read(dbPath));
  const TuningEntry &e = again.entries.at(droppedFrom);
  EXPECT_TRUE(e.tile == dropped || std::any_of(e.runnersUp.begin(), e.runnersUp.end(),
                                               [&](const TuningEntry::Timed &t) { return t.tile == dropped; }))
      << droppedFrom << ": " << dropped << " is listed again";
}

// Three sequences of different lengths together give each the tokens it gets alone (GEMV at M = 3 vs 1,
// per-sequence attention and cache slots), and so does a prompt split over prefill chunks of 4 rows.
TEST(Session, BatchAndChunkedPrefillGiveEachSequenceItsOwnTokens) {
  MINFER_REQUIRE_GPU();
  OPEN_FIXTURE_SESSION("llama_gqa", eo.maxBatch = 3, eo.maxSeq = 64);
  std::vector<std::vector<int32_t>> prompts = {
      ref.promptIds, {ref.promptIds.begin(), ref.promptIds.begin() + 3}, {17, 301, 5, 77, 402, 9, 250, 31, 128}};
  GenerationOptions go;
  go.maxNewTokens = 10;
  API_TRY(together, session->generate(prompts, go));
  for (size_t i = 0; i < prompts.size(); ++i) {
    API_TRY(alone, session->generate({prompts[i]}, go));
    EXPECT_EQ(together->tokens[i], alone->tokens[0]) << "sequence " << i;
  }
  EXPECT_EQ(std::vector<int32_t>(together->tokens[0].begin(), together->tokens[0].begin() + 8), ref.greedyIds);

  eo.maxPrefillTokens = 4; // the 7- and 9-token prompts span chunks; chunks mix sequences
  API_TRY(chunked, Engine::load(dir, eo));
  API_TRY(chunkedSession, chunked->createSession());
  API_TRY(split, chunkedSession->generate(prompts, go));
  EXPECT_EQ(split->tokens, together->tokens);
}

// The C API's batch: minfer_generate_batch gives each sequence the C++ API's tokens for the same batch (HF's
// for the reference prompt), and minfer_generate gives the same for one prompt.
TEST(Session, TheCApiGeneratesABatch) {
  MINFER_REQUIRE_GPU();
  const std::string dir = test::fixtureDir("llama_gqa");
  GPU_TRY(ref, test::readReference(dir));
  std::vector<std::vector<int32_t>> prompts = {ref.promptIds, {17, 301, 5, 77, 402, 9, 250, 31, 128}, {3, 4}};
  EngineOptions eo;
  eo.maxBatch = 3;
  eo.maxSeq = 64;
  API_TRY(engine, Engine::load(dir, eo));
  API_TRY(session, engine->createSession());
  GenerationOptions go;
  go.maxNewTokens = static_cast<int64_t>(ref.greedyIds.size());
  API_TRY(want, session->generate(prompts, go));

  minfer_engine_options ceo;
  minfer_engine_options_init(&ceo);
  ceo.max_batch = 3;
  ceo.max_seq = 64;
  minfer_engine *cengine = nullptr;
  minfer_error *err = minfer_engine_load(dir.c_str(), &ceo, &cengine);
  ASSERT_EQ(err, nullptr) << minfer_error_message(err);
  minfer_session *csession = nullptr;
  err = minfer_session_create(cengine, &csession);
  ASSERT_EQ(err, nullptr) << minfer_error_message(err);
  minfer_generation_options cgo;
  minfer_generation_options_init(&cgo);
  cgo.max_new_tokens = go.maxNewTokens;
  const size_t capacity = static_cast<size_t>(go.maxNewTokens) + 2; // rows wider than the tokens: a stride
  std::vector<const int32_t *> ptrs;
  std::vector<size_t> lens;
  for (const auto &p : prompts) ptrs.push_back(p.data()), lens.push_back(p.size());
  std::vector<int32_t> tokens(prompts.size() * capacity, -7);
  std::vector<size_t> counts(prompts.size(), 0);
  err = minfer_generate_batch(csession, ptrs.data(), lens.data(), prompts.size(), &cgo, tokens.data(), capacity, counts.data());
  ASSERT_EQ(err, nullptr) << minfer_error_message(err);
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_EQ(counts[i], want->tokens[i].size()) << "sequence " << i;
    EXPECT_EQ(std::vector<int32_t>(tokens.begin() + i * capacity, tokens.begin() + i * capacity + counts[i]), want->tokens[i])
        << "sequence " << i;
    EXPECT_EQ(tokens[i * capacity + counts[i]], -7) << "sequence " << i << ": written past its count";
  }
  EXPECT_EQ(std::vector<int32_t>(tokens.begin(), tokens.begin() + counts[0]), ref.greedyIds);

  std::vector<int32_t> one(capacity, -7);
  size_t count = 0;
  err = minfer_generate(csession, ptrs[1], lens[1], &cgo, one.data(), capacity, &count);
  ASSERT_EQ(err, nullptr) << minfer_error_message(err);
  EXPECT_EQ(std::vector<int32_t>(one.begin(), one.begin() + count), want->tokens[1]);

  // More prompts than the engine's max_batch: an error that says so, and the session stays usable.
  std::vector<const int32_t *> four(4, ptrs[2]);
  std::vector<size_t> fourLens(4, lens[2]);
  std::vector<int32_t> room(4 * capacity);
  std::vector<size_t> fourCounts(4);
  err = minfer_generate_batch(csession, four.data(), fourLens.data(), 4, &cgo, room.data(), capacity, fourCounts.data());
  ASSERT_NE(err, nullptr);
  EXPECT_NE(std::string(minfer_error_message(err)).find("planned for a batch of 3"), std::string::npos)
      << minfer_error_message(err);
  minfer_error_free(err);
  // No prompts, and a NULL prompt of some tokens: errors before any work.
  err = minfer_generate_batch(csession, ptrs.data(), lens.data(), 0, &cgo, room.data(), capacity, fourCounts.data());
  ASSERT_NE(err, nullptr);
  EXPECT_NE(std::string(minfer_error_message(err)).find("a batch of 0 prompts"), std::string::npos) << minfer_error_message(err);
  minfer_error_free(err);
  four[1] = nullptr;
  err = minfer_generate_batch(csession, four.data(), fourLens.data(), 2, &cgo, room.data(), capacity, fourCounts.data());
  ASSERT_NE(err, nullptr);
  EXPECT_NE(std::string(minfer_error_message(err)).find("prompt 1 is NULL with 2 tokens"), std::string::npos)
      << minfer_error_message(err);
  minfer_error_free(err);
  err = minfer_generate(csession, ptrs[0], lens[0], &cgo, one.data(), capacity, &count);
  ASSERT_EQ(err, nullptr) << minfer_error_message(err);
  EXPECT_EQ(std::vector<int32_t>(one.begin(), one.begin() + count), ref.greedyIds);
  minfer_session_free(csession);
  minfer_engine_free(cengine);
}

TEST(Session, SamplingWithASeedIsReproducibleAndGraphAgnostic) {
  MINFER_REQUIRE_GPU();
  OPEN_FIXTURE_SESSION("qwen2_tied", eo.maxBatch = 2);
  GenerationOptions go;
  go.maxNewTokens = 24;
  go.temperature = 1.5f; // a tiny random model is confident: a high temperature makes draws matter
  go.topK = 64;
  go.topP = 0.95f;
  go.seed = 1234;
  std::vector<std::vector<int32_t>> prompts = {ref.promptIds, ref.promptIds};
  API_TRY(a, session->generate(prompts, go));
  API_TRY(b, session->generate(prompts, go));
  EXPECT_EQ(a->tokens, b->tokens) << "same seed, same tokens";
  go.cudaGraph = false;
  API_TRY(c, session->generate(prompts, go));
  EXPECT_EQ(a->tokens, c->tokens) << "graph replay and kernel-by-kernel draw the same numbers";
  go.cudaGraph = true;
  go.seed = 99;
  API_TRY(d, session->generate(prompts, go));
  EXPECT_NE(a->tokens, d->tokens) << "another seed draws other tokens";
  // The two rows of one step draw independent numbers, so identical prompts part ways.
  EXPECT_NE(a->tokens[0], a->tokens[1]);
  GenerationOptions greedy;
  greedy.maxNewTokens = go.maxNewTokens;
  API_TRY(g, session->generate({ref.promptIds}, greedy));
  EXPECT_NE(a->tokens[0], g->tokens[0]) << "sampling at temperature 1.5 is not greedy decoding";
}

// Whether the target ("sm_90a", "sm_89") has cp.async.bulk, which the weight ring needs: sm_90 and later.
bool hasBulkCopy(const std::string &target) { return target.size() > 3 && std::stoi(target.substr(3)) >= 90; }

// The persistent decode kernel against the launches it replaces, at every batch it is built for: the engine
// is planned for 8 sequences and given 1, 3 and 8 prompts (gemv at 1, the tensor-core gemv and the
// attention grid's batch side above), on a GQA Llama and on GPT-2 (learned positions, LayerNorm, biases).
// The task forms run with other block sizes (a norm over 128 threads instead of 96-256, gemvMma's K split
// over 4 warps), so the logits may differ in the last bits, never by more than a rounding; the tokens agree.
// Both with the tasks' own weight loads and with EngineOptions::persistentWeightRing, planned for 2 sequences
// and given 1 and 2 (on sm_90 and later every matmul task then reads W from the shared-memory ring through
// the tensor cores, GemvMmaRingTask).
TEST(Session, PersistentDecodeAgreesWithTheLaunchesAtEveryBatch) {
  MINFER_REQUIRE_GPU();
  for (auto [fixture, ring] : {std::pair{"llama_gqa", false}, std::pair{"gpt2", false}, std::pair{"llama_gqa", true},
                               std::pair{"gpt2", true}}) {
    SCOPED_TRACE(std::string(fixture) + (ring ? ", weight ring" : ""));
    OPEN_FIXTURE_SESSION(fixture, eo.maxBatch = ring ? 2 : 8, eo.maxSeq = 64, eo.persistentWeightRing = ring);
    EXPECT_EQ(engine->loadInfo().weightRingBytes > 0, ring && hasBulkCopy(engine->loadInfo().target))
        << "sm_90 and later build the ring where asked";
    SessionOptions so;
    so.keepLogits = true;
    API_TRY(kept, engine->createSession(so));
    std::vector<std::vector<int32_t>> all;
    for (int32_t i = 0; i < 8; ++i) {
      std::vector<int32_t> p(ref.promptIds.begin(), ref.promptIds.begin() + 2 + i % 5);
      p.push_back(static_cast<int32_t>((37 * i + 11) % engine->vocabSize()));
      all.push_back(p);
    }
    for (size_t batch : ring ? std::vector<size_t>{1, 2} : std::vector<size_t>{1, 3, 8}) {
      SCOPED_TRACE("batch " + std::to_string(batch));
      std::vector<std::vector<int32_t>> prompts(all.begin(), all.begin() + batch);
      GenerationOptions go;
      go.maxNewTokens = 12;
      go.decode = DecodePath::Persistent;
      API_TRY(persistent, kept->generate(prompts, go));
      go.decode = DecodePath::Launches;
      API_TRY(launches, kept->generate(prompts, go));
      EXPECT_EQ(persistent->tokens, launches->tokens);
      for (size_t b = 0; b < batch; ++b) {
        double err = test::relError(persistent->logits[b], launches->logits[b]);
        EXPECT_LT(err, 1e-2) << "sequence " << b;
        if (b == 0)
          std::cout << "[ e2e ] " << fixture << (ring ? " (weight ring)" : "") << " batch " << batch
                    << ": persistent vs launches logits rel err " << err << "\n";
      }
      // Sampling: the lm_head's argmax keys are not bound, the sample kernel runs after the persistent one,
      // and the same seed draws the same tokens from the same logits.
      go.temperature = 1.5f;
      go.topK = 64;
      go.seed = 1234;
      go.decode = DecodePath::Persistent;
      API_TRY(sampledPersistent, session->generate(prompts, go));
      go.decode = DecodePath::Launches;
      API_TRY(sampledLaunches, session->generate(prompts, go));
      EXPECT_EQ(sampledPersistent->tokens, sampledLaunches->tokens) << "sampled";
    }
  }
}

// llama_gqa widened to a hidden size of 1280 (its heads, head size, MLP width, vocabulary and layers kept),
// with random weights: rows of 160 16-byte vectors, more than the persistent kernel's 128 body threads, and
// matmuls whose K spans several of the weight ring's pieces. The golden fixtures' hidden sizes (64-128) are
// a vector or less a thread, so a body that strides by the block instead of its threads, or a ring piece
// that reads past its first, goes unseen there.
std::string writeWideLlama(const test::TempDir &tmp) {
  constexpr int64_t kHidden = 1280;
  const std::string src = test::fixtureDir("llama_gqa");
  std::string config = test::readFile(src + "/config.json");
  const std::string from = "\"hidden_size\": 64", to = "\"hidden_size\": " + std::to_string(kHidden);
  EXPECT_NE(config.find(from), std::string::npos) << config;
  if (config.find(from) != std::string::npos) config.replace(config.find(from), from.size(), to);
  tmp.write("config.json", config);
  auto ckpt = Checkpoint::open(src + "/model.safetensors");
  EXPECT_TRUE(bool(ckpt)) << (ckpt ? "" : llvm::toString(ckpt.takeError()));
  if (!ckpt) return "";
  std::vector<OwnedTensor> tensors;
  unsigned seed = 1;
  for (const std::string &name : ckpt->names()) {
    std::vector<int64_t> shape = ckpt->find(name)->info->shape;
    // The hidden side of each weight: the rows of o_proj and down_proj (and of the norms' vectors), the columns
    // of the rest.
    const bool rowsAreHidden = shape.size() == 1 || name.find("o_proj") != std::string::npos ||
                               name.find("down_proj") != std::string::npos;
    shape[rowsAreHidden ? 0 : 1] = kHidden;
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    const bool norm = shape.size() == 1;
    std::vector<uint16_t> bits = test::randomBf16Bits(size_t(n), seed++, norm ? 0.1f : 0.05f);
    if (norm)
      for (uint16_t &b : bits) b = floatToBf16(1.f + bf16ToFloat(b)); // gamma near 1
    OwnedTensor t{name, StDType::BF16, shape, std::vector<uint8_t>(bits.size() * 2)};
    std::memcpy(t.data.data(), bits.data(), t.data.size());
    tensors.push_back(std::move(t));
  }
  std::string bytes;
  llvm::raw_string_ostream os(bytes);
  if (llvm::Error e = writeSafetensors(os, tmp.file("model.safetensors"), tensors)) {
    ADD_FAILURE() << llvm::toString(std::move(e));
    return "";
  }
  os.flush();
  tmp.write("model.safetensors", bytes);
  return tmp.path();
}

// The persistent kernel, with and without the weight ring, against the launches on the wide model: the first
// decode step's logits (both paths decode from the same prefill) within the golden tolerance, at batches 1
// and 2. Only the first step: on random weights the greedy tokens of two summation orders may part at a
// near-tie, and every later step's logits with them.
TEST(Session, PersistentDecodeAgreesWithTheLaunchesOnAWideModel) {
  MINFER_REQUIRE_GPU();
  test::TempDir tmp;
  const std::string dir = writeWideLlama(tmp);
  ASSERT_FALSE(dir.empty());
  for (bool ring : {false, true}) {
    SCOPED_TRACE(ring ? "weight ring" : "tasks' own loads");
    EngineOptions eo;
    eo.maxBatch = 2;
    eo.maxSeq = 64;
    eo.persistentWeightRing = ring;
    API_TRY(engine, Engine::load(dir, eo));
    EXPECT_TRUE(engine->loadInfo().persistentDecode);
    EXPECT_EQ(engine->loadInfo().weightRingBytes > 0, ring && hasBulkCopy(engine->loadInfo().target))
        << "sm_90 and later build the ring where asked";
    SessionOptions so;
    so.keepLogits = true;
    API_TRY(session, engine->createSession(so));
    for (size_t batch : {1, 2}) {
      SCOPED_TRACE("batch " + std::to_string(batch));
      std::vector<std::vector<int32_t>> prompts;
      for (size_t b = 0; b < batch; ++b) prompts.push_back({int32_t(3 + b), 17, 250, int32_t(40 + 7 * b), 9});
      GenerationOptions go;
      go.maxNewTokens = 2; // the prefill's token, then one decode step
      go.decode = DecodePath::Persistent;
      API_TRY(persistent, session->generate(prompts, go));
      go.decode = DecodePath::Launches;
      API_TRY(launches, session->generate(prompts, go));
      const size_t vocab = static_cast<size_t>(engine->vocabSize());
      for (size_t b = 0; b < batch; ++b) {
        ASSERT_EQ(persistent->logits[b].size(), launches->logits[b].size());
        ASSERT_GE(persistent->logits[b].size(), vocab);
        std::vector<float> p(persistent->logits[b].end() - vocab, persistent->logits[b].end()),
            l(launches->logits[b].end() - vocab, launches->logits[b].end());
        double err = test::relError(p, l);
        EXPECT_LT(err, kLogitsTolerance) << "sequence " << b;
        if (b == 0)
          std::cout << "[ e2e ] wide llama" << (ring ? " (weight ring)" : "") << " batch " << batch
                    << ": persistent vs launches, decode step logits rel err " << err << "\n";
      }
    }
  }
}

// Resident set size of this process, from /proc/self/statm (bytes).
uint64_t residentBytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

// The soak: one sequence decoded for 10,000 steps (llama_gqa with its positions raised to 10,016: llama3 RoPE,
// GQA, the split decode attention over a long context), through the CUDA graph and the persistent decode
// kernel (its counters reset inside every step: a missed reset would hang the next), every token read back
// as it comes. Device and host memory are sampled every 1,000 steps: neither may grow. Every token stays in the
// vocabulary and the run neither stops early nor hangs (the test has a timeout).
TEST(Soak, TenThousandDecodeStepsKeepMemoryFlat) {
  MINFER_REQUIRE_GPU();
  test::TempDir tmp;
  std::string src = test::fixtureDir("llama_gqa");
  std::string config = test::readFile(src + "/config.json");
  const std::string from = "\"max_position_embeddings\": 128", to = "\"max_position_embeddings\": 10016";
  ASSERT_NE(config.find(from), std::string::npos);
  config.replace(config.find(from), from.size(), to);
  tmp.write("config.json", config);
  tmp.write("model.safetensors", test::readFile(src + "/model.safetensors"));

  EngineOptions eo;
  eo.maxSeq = 10016;
  API_TRY(engine, Engine::load(tmp.path(), eo));
  API_TRY(session, engine->createSession());
  constexpr int64_t kSteps = 10000, kEvery = 1000;
  std::vector<size_t> deviceFree;
  std::vector<uint64_t> resident;
  int64_t seen = 0;
  bool inVocab = true;
  GenerationOptions go;
  go.maxNewTokens = kSteps + 1; // the first token comes from the prefill
  go.decode = DecodePath::Persistent;
  go.onToken = [&](const TokenEvent &ev) {
    if (ev.end) return true;
    inVocab = inVocab && ev.token >= 0 && ev.token < engine->vocabSize();
    if (++seen % kEvery == 1) { // after the prefill's token, then every 1,000 steps
      auto mem = cuda::memoryInfo();
      if (!mem) {
        ADD_FAILURE() << llvm::toString(mem.takeError());
        return false;
      }
      deviceFree.push_back(mem->free);
      resident.push_back(residentBytes());
    }
    return true;
  };
  auto t0 = std::chrono::steady_clock::now();
  API_TRY(out, session->generate({{1, 2, 3, 4, 5}}, go));
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(static_cast<int64_t>(out->tokens[0].size()), kSteps + 1);
  EXPECT_EQ(out->decodeSteps, kSteps);
  EXPECT_TRUE(inVocab);
  ASSERT_EQ(deviceFree.size(), static_cast<size_t>(kSteps / kEvery + 1));
  std::cout << "[ soak ] " << kSteps << " steps in " << s << " s; device free (MiB) and resident (MiB) every " << kEvery
            << " steps:";
  for (size_t i = 0; i < deviceFree.size(); ++i)
    std::cout << " " << (deviceFree[i] >> 20) << "/" << (resident[i] >> 20);
  std::cout << "\n";
  // From the first sample (after warm-up: graph captured, every kernel loaded) on, nothing grows.
  for (size_t i = 1; i < deviceFree.size(); ++i) {
    EXPECT_EQ(deviceFree[i], deviceFree[1]) << "device memory changed by step " << i * kEvery;
    EXPECT_LE(resident[i], resident[1] + (4u << 20)) << "host memory grew by step " << i * kEvery;
  }
}

TEST(Session, AStopTokenEndsItsSequence) {
  MINFER_REQUIRE_GPU();
  OPEN_FIXTURE_SESSION("llama_linear");
  GenerationOptions go;
  go.maxNewTokens = static_cast<int64_t>(ref.greedyIds.size());
  go.stopTokens = {ref.greedyIds[2]};
  API_TRY(out, session->generate({ref.promptIds}, go));
  size_t firstStop = std::find(ref.greedyIds.begin(), ref.greedyIds.end(), ref.greedyIds[2]) - ref.greedyIds.begin();
  EXPECT_EQ(out->tokens[0], std::vector<int32_t>(ref.greedyIds.begin(), ref.greedyIds.begin() + firstStop + 1));
}

// Text out: with a tokenizer (the 321-token GPT-2 fixture, the gpt2 model's vocabulary) the tokens are still
// HF's greedy ids, up to and including the tokenizer's EOS; the text arrives token by token and adds up
// to Generation::text, the decode of those ids; a callback returning false ends the sequence; and
// `minferc run --prompt` prints the same text for the same prompt.
TEST(Session, TextStreamsThroughTheTokenizerAndStopsAtItsEos) {
  MINFER_REQUIRE_GPU();
  OPEN_FIXTURE_SESSION("gpt2");
  const std::string tokDir = std::string(MINFER_SOURCE_DIR) + "/tests/fixtures/tokenizers/tiny_gpt2";
  API_TRY(tok, Tokenizer::load(tokDir));
  ASSERT_EQ(tok->eosTokens(), std::vector<int32_t>{320});
  GenerationOptions go;
  go.maxNewTokens = static_cast<int64_t>(ref.greedyIds.size());
  go.tokenizer = &*tok;
  std::string streamed;
  std::vector<int32_t> seen;
  int ends = 0;
  go.onToken = [&](const TokenEvent &t) {
    EXPECT_EQ(t.sequence, 0u);
    if (t.end) ++ends;
    else seen.push_back(t.token);
    streamed += t.text;
    return true;
  };
  API_TRY(out, session->generate({ref.promptIds}, go));
  auto eos = std::find(ref.greedyIds.begin(), ref.greedyIds.end(), 320);
  std::vector<int32_t> want(ref.greedyIds.begin(), eos == ref.greedyIds.end() ? eos : eos + 1);
  EXPECT_EQ(out->tokens[0], want);
  EXPECT_EQ(seen, want);
  std::vector<int32_t> textIds(want.begin(), eos == ref.greedyIds.end() ? want.end() : want.end() - 1);
  API_TRY(whole, tok->decode(textIds));
  ASSERT_EQ(out->text.size(), 1u);
  EXPECT_EQ(out->text[0], *whole);
  EXPECT_EQ(streamed, *whole);
  EXPECT_EQ(ends, 1);

  // Returning false ends the sequence after that token.
  go.onToken = [n = 0](const TokenEvent &t) mutable { return t.end || ++n < 3; };
  API_TRY(stopped, session->generate({ref.promptIds}, go));
  EXPECT_EQ(stopped->tokens[0].size(), std::min<size_t>(3, want.size()));

  // The command line, on the GPU, for "hello world" (HF's ids in the fixture's cases.json).
  go.onToken = nullptr;
  API_TRY(hello, session->generate({{71, 68, 292, 78, 303, 297}}, go));
  test::TempDir tmp;
  std::string stdoutPath = tmp.file("text.txt"), stderrPath = tmp.file("stderr.txt");
  std::string maxNew = std::to_string(go.maxNewTokens);
  std::vector<llvm::StringRef> args = {gputest::minfercPath(), "run", dir, "--tokenizer", tokDir, "--prompt", "hello world",
                                       "--max-new-tokens", maxNew};
  llvm::Optional<llvm::StringRef> redirects[] = {llvm::None, llvm::StringRef(stdoutPath), llvm::StringRef(stderrPath)};
  ASSERT_EQ(llvm::sys::ExecuteAndWait(gputest::minfercPath(), args, llvm::None, redirects), 0) << test::readFile(stderrPath);
  EXPECT_EQ(test::readFile(stdoutPath), hello->text[0] + "\n");
}

TEST(Session, MisuseIsAnErrorBeforeAnyWorkAndTheSessionStaysUsable) {
  MINFER_REQUIRE_GPU();
  OPEN_FIXTURE_SESSION("gpt2", eo.maxSeq = 32);
  GenerationOptions go;
  go.maxNewTokens = 4;
  auto tooMany = session->generate({ref.promptIds, ref.promptIds}, go);
  ASSERT_FALSE(tooMany.ok());
  EXPECT_NE(tooMany.error().find("planned for a batch of 1"), std::string::npos) << tooMany.error();
  auto tooLong = session->generate({std::vector<int32_t>(40, 1)}, go);
  ASSERT_FALSE(tooLong.ok());
  EXPECT_NE(tooLong.error().find("max_seq is 32"), std::string::npos) << tooLong.error();
  auto badId = session->generate({{1, 2, 100000}}, go);
  ASSERT_FALSE(badId.ok());
  EXPECT_NE(badId.error().find("outside the vocabulary"), std::string::npos) << badId.error();
  auto empty = session->generate({{}}, go);
  ASSERT_FALSE(empty.ok());
  go.maxNewTokens = static_cast<int64_t>(ref.greedyIds.size());
  API_TRY(fine, session->generate({ref.promptIds}, go));
  EXPECT_EQ(fine->tokens[0], ref.greedyIds);

  // The persistent decode kernel asked of a plan without one (an unfused plan: its rope and KV-write
  // launches have no task form) is refused with the plan's reason, and the session still decodes.
  EngineOptions unfused;
  unfused.fuse = false;
  unfused.maxSeq = 32;
  API_TRY(plainEngine, Engine::load(dir, unfused));
  API_TRY(plain, plainEngine->createSession());
  go.decode = DecodePath::Persistent;
  auto refused = plain->generate({ref.promptIds}, go);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().find("persistent decode kernel was not built"), std::string::npos) << refused.error();
  EXPECT_NE(refused.error().find("no task form"), std::string::npos) << refused.error();
  go.decode = DecodePath::Launches;
  API_TRY(launched, plain->generate({ref.promptIds}, go));
  EXPECT_EQ(launched->tokens[0], ref.greedyIds);
}

} // namespace
