// compiler/Tuning.h — the autotuner's data: token-count buckets, the device fingerprint, the per-device
// tuning database (one JSON file next to the kernel cache), and the search that picks a tile from timings.
//
// The GPU side (compiling candidates, timing them) is runtime/Autotune.h; this room holds what needs no GPU,
// so the plan can use tuned tiles (PlanOptions::tuning) and the search logic is testable on a fake timer.
//
// A database entry is keyed by the spec's tuningKey() (family, shape, epilogue: what the tile does not
// change) and the bucket of rows the plan runs it at:
//   decode:1  decode:2-8  decode:9-16  decode:17-64  decode:65+   one token per sequence, batch = rows
//                                    (9-16 and 17-64 split where the plan moves from gemv to gemm)
//   prefill:1-512  prefill:513-2048  prefill:2049+       rows = the prefill step's tokens
// Each bucket is timed at its upper bound (65+ at 128, 2049+ at 4096) and a tuned tile serves every row
// count in it. The file is keyed by the device fingerprint; one for another device, or one that does not
// parse, is ignored with a warning (the heuristic tiles still work), never trusted.
#pragma once

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace minfer {

class KernelSpec;
struct Target;

// The bucket of `rows` rows in a phase ("decode:2-8"), and the rows it is timed at.
std::string tuningBucket(bool decode, int64_t rows);
int64_t bucketRows(llvm::StringRef bucket);
// Every bucket name, decode first; and whether `name` is one.
const std::vector<std::string> &allTuningBuckets();
bool isTuningBucket(llvm::StringRef name);

// What makes timings comparable: the GPU, its SM count and compute capability, the driver and NVRTC.
struct DeviceFingerprint {
  std::string name;          // "NVIDIA H200"
  int smCount = 0;
  int ccMajor = 0, ccMinor = 0;
  int driverVersion = 0;     // cuDriverGetVersion, e.g. 13000
  std::string nvrtcVersion;  // "13.0"

  std::string target() const; // what minfer compiles for on it: "sm_89", "sm_90a" (jit/Target.h deviceTargetName)
  // A file-name-safe id: "nvidia-h200_sm90_132sm_drv13000_nvrtc13.0".
  std::string id() const;
  llvm::json::Object toJSON() const;
  static std::optional<DeviceFingerprint> fromJSON(const llvm::json::Object &);
  bool operator==(const DeviceFingerprint &o) const;
};

struct TuningEntry {
  std::string tile;      // the winner, as the spec's tileName() spells it
  double us = 0;         // its median time
  double defaultUs = 0;  // the heuristic default's median time (0: the default was not among the candidates)
  std::string defaultTile;
  int candidates = 0;    // tiles timed (valid ones)
  int failed = 0;        // candidates whose compile or launch failed
  std::vector<std::string> failedTiles; // their tiles, so that a failed step neighbour counts as tried
  // The next fastest tiles of the kernel's own timing after `tile`, other than the default (the tuner keeps
  // kRunnersUp, fastest first, then the step neighbours of the default and of the winner,
  // KernelSpec::stepNeighbours, whatever their time): the in-step pass tries them in the step, and puts first
  // the tile it moved the kernel off.
  struct Timed {
    std::string tile;
    double us = 0;
    bool operator==(const Timed &o) const { return tile == o.tile && us == o.us; }
  };
  static constexpr size_t kRunnersUp = 2;
  std::vector<Timed> runnersUp;
  // The in-step pass (runtime/Autotune.h tuneInStep) over a decode bucket: the step's milliseconds with the
  // tiles it kept (0: no in-step pass), and, where it moved this kernel to its default or a runner-up, the
  // tile the kernel's own timing had picked (`tile` is then the one the step kept).
  double stepMs = 0;
  std::string kernelTile;

  // The entry says "the heuristic default" (its winner is the default it was timed against) but the
  // compiler's default is now `currentDefault`: the default changed since (a new minfer), so the plan takes
  // the current one, and `minferc autotune` times the kernel again.
  bool defaultMoved(llvm::StringRef currentDefault) const { return !defaultTile.empty() && defaultTile != currentDefault; }
  bool keepsDefault(llvm::StringRef currentDefault) const { return tile == defaultTile && defaultMoved(currentDefault); }
};

// The step neighbours (KernelSpec::stepNeighbours) of `spec` (the kernel on its default tile) and of the
// entry's own winner that `e` lists nowhere (not as its tile, default, winner or a runner-up): an entry timed
// by a minfer whose tuner kept fewer of them, which `minferc autotune` times again so that the in-step pass
// can try them. A neighbour whose timing failed (in `failedTiles`) counts as listed: it would fail again.
std::vector<std::string> missingStepNeighbours(const TuningEntry &e, const KernelSpec &spec, const Target &target);

class TuningDb {
public:
  DeviceFingerprint device;
  std::map<std::string, TuningEntry> entries; // entryKey(tuningKey, bucket) -> entry

  static std::string entryKey(llvm::StringRef tuningKey, llvm::StringRef bucket) {
    return tuningKey.str() + "@" + bucket.str();
  }
  const TuningEntry *find(llvm::StringRef tuningKey, llvm::StringRef bucket) const;

  // The directory of the databases: `tuning/` beside the kernel cache's kernels (KernelCache::dir()).
  static std::string directory(llvm::StringRef cacheDir);
  static std::string pathFor(llvm::StringRef cacheDir, const DeviceFingerprint &);
  // Reads the database of `device` from `path`. A missing file is an empty database; a file that does not
  // parse, or was written for another device, is an empty database and a `warning` (set when given).
  static TuningDb load(llvm::StringRef path, const DeviceFingerprint &device, std::string *warning);
  // Reads whatever database `path` holds (for --show and bundle builds); an error when it does not parse.
  static llvm::Expected<TuningDb> read(llvm::StringRef path);
  // The most recently written readable database in `cacheDir`'s tuning directory whose device has the SM of
  // `target` ("sm_90" and "sm_90a" both take a 9.0 device's), for builds on a machine that is not the device
  // (bundles); nullopt when there is none.
  static std::optional<std::string> newestFor(llvm::StringRef cacheDir, llvm::StringRef target);
  // Writes to a temporary file and renames it over `path`: a reader sees the old or the new file, whole.
  llvm::Error save(llvm::StringRef path) const;
  llvm::json::Object toJSON() const;
};

// The search: times each candidate (`time(i)` -> median microseconds, or an error for a candidate that
// failed to build or launch, which is skipped) and picks the fastest. Deterministic within noise: among the
// candidates within `noise` (relative) of the fastest, the one listed first wins, so two runs whose timings
// differ by less than the noise pick the same tile.
struct SearchResult {
  int best = -1;               // index into the candidates; -1 when none ran
  std::vector<double> us;      // per candidate; negative when it failed
  std::vector<std::string> failures;
};
SearchResult searchFastest(size_t candidates, const std::function<llvm::Expected<double>(size_t)> &time,
                           double noise = 0.02);

// The in-step search. A kernel's own timing cannot see its neighbours in the decode step, and the tiles it
// picks do not add up there (bench/NOTES.md, session 19: on Llama-3.2-1B each tuned gemv tile alone moved
// the step from 0.818 ms to between 0.808 and 0.891). Kernel i has options[i] choices: 0 its tuned tile,
// then its alternatives (the default, the runners-up of its own timing). Starting from every kernel on
// choice 0, `stepMs(choice)` times the whole step; each round times every configuration one kernel's choice
// away from the current one (each configuration once: timings are remembered), and moves to the fastest
// while that gains more than `noise` (relative). A failed timing is an error: every configuration is one
// the plan can run.
//
// `start`, when given, is a second configuration timed first (the step with every kernel on its default);
// where it beats every tuned tile by more than the noise the search starts from it instead. Single moves
// from the tuned tiles need not reach it: on Llama-2-7B at one row the tuned (FMA) gemvs made the step
// 3.87 ms, the defaults (wgmma) 3.57, and no kernel alone moved back gained much (bench/NOTES.md, session 23).
struct StepSearchResult {
  std::vector<int> choice; // per kernel: the option kept (0: its tuned tile)
  double firstMs = 0;      // the step with every tuned tile
  double startMs = 0;      // with `start` (0 without one)
  double bestMs = 0;       // with `choice`
  int timed = 0;           // configurations timed
};
llvm::Expected<StepSearchResult> searchInStep(const std::vector<int> &options,
                                              const std::function<llvm::Expected<double>(const std::vector<int> &)> &stepMs,
                                              double noise = 0.005, const std::vector<int> &start = {});

} // namespace minfer
