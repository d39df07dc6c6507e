// runtime/Autotune.h — the autotuner's GPU side: for each tunable kernel a model's plans launch (gemm, gemv,
// prefill attention, decode attention's warps), compile every valid tile (in parallel, through the disk cache),
// time each on the GPU, and keep the fastest in the device's tuning database (compiler/Tuning.h). Decode
// attention's split size is chosen per session from its cache length (AttentionDecodeSpec::chooseSplitTokens),
// not tuned; its warps are, where every context is one chunk (AttentionDecodeSpec::tuningKey).
//
// What is timed: the kernel alone (a gemv in a chain of its own dependent launches), at its bucket's row
// count (prefill attention: one sequence of that many tokens; decode attention: that many sequences, their
// caches full), with the launch arguments a plan gives it (the
// epilogue's and prologue's buffers included), the weights rotated over enough copies that L2 does not
// flatter, warm-up then the median of many runs (runtime/Timing.h). A candidate that fails to compile, load
// or launch is counted and skipped. The heuristic default is always among the candidates, listed first, so
// a tuned tile is never slower than the default beyond the noise the search allows for (Tuning.h).
#pragma once

#include "compiler/Tuning.h"
#include "ir/Module.h"
#include "runtime/Engine.h"

#include "llvm/Support/Error.h"

#include <functional>
#include <string>
#include <vector>

namespace minfer::rt {

// The fingerprint of device 0 (needs the driver).
llvm::Expected<DeviceFingerprint> deviceFingerprint();

struct AutotuneProgress {
  size_t index = 0, total = 0; // kernel `index` (1-based) of `total`
  std::string kernel;          // tuning key @ bucket
  int candidates = 0;
  std::string bestTile, defaultTile;
  double bestUs = 0, defaultUs = 0;
  double secondsLeft = 0;      // estimated from the kernels done so far
  bool done = false;           // false: about to time it; true: timed
};

struct AutotuneOptions {
  std::vector<std::string> buckets = {"decode:1", "prefill:513-2048"};
  unsigned jobs = 0;     // compile workers (0: the cores)
  int warmup = 5, iters = 20;
  bool retune = false;   // time kernels the database already has too
  std::function<void(const AutotuneProgress &)> progress;
};

struct AutotuneReport {
  int kernels = 0;       // (kernel, bucket) pairs considered
  int tuned = 0;         // timed now
  int skipped = 0;       // already in the database
  int stale = 0;         // of `tuned`, those the database had, timed against an earlier default or neighbours
  int candidates = 0, failed = 0;
  double compileSeconds = 0, timeSeconds = 0;
};

// Tunes every tunable kernel that the plans of `m` (as the runtime would plan it: fuse it first for the
// fused kernels) launch in `opts.buckets`, on device 0, into `db` (whose device must be device 0's).
llvm::Expected<AutotuneReport> autotune(const ir::Module &m, TuningDb &db, const AutotuneOptions &opts);

// The in-step pass, after autotune(): per decode bucket, the model's decode step itself (a session of
// `bucketRows` sequences on the real weights, its CUDA graph replayed) is timed with every tuned tile, then
// searchInStep (compiler/Tuning.h) moves kernels, one at a time, to their default or to a runner-up of
// their own timing where that makes the step faster. Per prefill bucket the same with a prefill of one
// sequence of the bucket's rows (as many as the model's positions allow), several back to back: kernels
// timed alone do not see each other's caches or the power cap a sustained prefill runs under. A moved entry
// keeps the tile its own timing picked as `kernelTile`; every entry of the bucket the step touches records the
// step's time. Each configuration is an Engine load (weights included: ~0.1 s a GB) and `repeats` timed
// generates (of `steps` decode steps, or of prefills) after one warm-up.
struct StepTuneOptions {
  std::string model;               // what Engine::load takes: an .ir file or a checkpoint directory
  EngineOptions engine;            // its weights, jobs; `plan` and `tuning` are set per bucket and configuration
  std::vector<std::string> buckets; // tuned in the step: decode and prefill buckets alike
  int steps = 32, repeats = 3;
  // A decode step's prompt, in tokens per sequence: the attention reads this much context in each timed step,
  // as at the e2e bench's --context (its default). Capped where the plan's positions would not hold the steps.
  int64_t context = 128;
  double noise = 0.005;            // a move must gain more than this (relative)
  std::function<void(const std::string &)> log; // one line per configuration timed, then one per bucket: what it keeps
};
struct StepTuneReport {
  int buckets = 0;   // buckets with tuned tiles to judge
  int timed = 0;     // configurations timed
  int moved = 0;     // kernels moved to their default or a runner-up
};
llvm::Expected<StepTuneReport> tuneInStep(const ir::Module &m, TuningDb &db, const StepTuneOptions &opts);

} // namespace minfer::rt
