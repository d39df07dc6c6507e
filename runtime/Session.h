// runtime/Session.h — generation for a batch of sequences on one engine: KV cache, arenas, prefill, decode.
//
// A session owns what its sequences need beyond the engine's weights: the KV caches ([max_batch, max_seq,
// kv_dim] per attention layer), the workspaces, one activation arena per phase (sized by the memory plan:
// bytes per row x the phase's rows), the step inputs and the logits. All of it is allocated at creation,
// after checking that it fits in the device's free memory, so nothing allocates while generating.
//
// generate(prompts) runs:
//   prefill  the prompts in chunks of at most the plan's prefill rows (a long prompt spans chunks; its
//            attention reads what earlier chunks wrote to the cache); only the rows whose logits are wanted
//            (each sequence's last prompt token, or every row when keeping logits) go through the final norm
//            and lm_head. Each sequence's last logits row is copied to the decode logits.
//   select   the first token of every sequence (argmax, or the sample kernel), fed back by the advance kernel.
//   decode   max_new_tokens - 1 steps: the plan's decode launches, ending in select + advance, so tokens,
//            positions and context lengths live in device memory. The step is captured once as a CUDA graph
//            (per batch size and sampling settings) and replayed; GenerateOptions::graph = false launches
//            the same kernels one by one. The host reads the recorded tokens every few steps to stop at a
//            stop token; a sequence that stopped keeps computing (harmlessly) until all have.
// Misuse (a prompt longer than max_seq, a batch above max_batch, token ids outside the vocabulary) is an
// error before any GPU work, and the session stays usable.
#pragma once

#include "runtime/Engine.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace minfer::rt {

struct SessionOptions {
  // Keep every prompt row's logits (and each decode step's): sizes the prefill logits for all prefill rows
  // instead of one per sequence. For comparisons against a reference (`minferc run --logits-out`).
  bool keepLogits = false;
};

// How a decode step runs: Launches, one kernel per op (CUDA graph, programmatic dependent launch), the
// default; Persistent, the plan's persistent kernel (Plan::persistent; an error naming the plan's reason
// where it has none). The persistent kernel is opt-in while it is slower than the launches on every model
// measured (bench/NOTES.md, session 9).
enum class DecodePath { Launches, Persistent };

struct GenerateOptions {
  int64_t maxNewTokens = 16;
  float temperature = 0.f; // <= 0: greedy (argmax)
  int topK = 0;            // <= 0: no top-k cut
  float topP = 1.f;        // in (0, 1): nucleus cut
  uint64_t seed = 0;
  std::vector<int32_t> stopTokens; // a sequence ends after emitting one of these (it is kept in its tokens)
  bool graph = true;                // replay the decode step as a CUDA graph
  DecodePath decode = DecodePath::Launches;
  // Called with each generated token as soon as it is read back (every step when set, else every few
  // steps); returning false ends that sequence there (the token is kept).
  std::function<bool(int64_t sequence, int32_t token)> onToken;
  // Teacher forcing (scoring a given continuation): empty, or one list per prompt; decode step k feeds
  // forcedTokens[b][k] to sequence b instead of the token it generated (k = 0 is the step after the
  // prefill), as long as the list lasts. The generated tokens are still reported: what the model chose
  // at each position. A list holds at most maxNewTokens - 1 tokens (the last generated token is not fed).
  std::vector<std::vector<int32_t>> forcedTokens;
};

struct Generation {
  std::vector<std::vector<int32_t>> tokens; // per sequence, the generated tokens
  // With SessionOptions::keepLogits, per sequence: float32 [rows, vocab], one row per prompt position, then
  // one per generated token that was fed back (the reference backend's layout).
  std::vector<std::vector<float>> logits;
  int64_t promptTokens = 0; // over all sequences
  int64_t decodeSteps = 0;  // decode steps run (the first token comes from the prefill)
  double prefillMs = 0;     // GPU time of the prefill and the first token
  double decodeMs = 0;      // GPU time of the decode steps
};

class Session {
public:
  static llvm::Expected<std::unique_ptr<Session>> create(const Engine &engine, const SessionOptions & = {});

  // Generates for `prompts` (1 to max_batch sequences). Sequence i uses cache slot i; the caches are
  // overwritten by each call.
  llvm::Expected<Generation> generate(const std::vector<std::vector<int32_t>> &prompts, const GenerateOptions &opts);

  // Device memory the session allocated, and its parts.
  struct Memory {
    size_t kvCache = 0, workspaces = 0, arenas = 0, io = 0;
    size_t total() const { return kvCache + workspaces + arenas + io; }
  };
  const Memory &memory() const { return mem; }

  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;
  ~Session();

private:
  Session(const Engine &engine, const SessionOptions &options);
  struct PhaseState; // buffer addresses of one phase
  struct Segment;    // a run of one sequence's prompt rows inside a prefill chunk
  llvm::Error allocate();
  llvm::Error checkPrompts(const std::vector<std::vector<int32_t>> &prompts, const GenerateOptions &opts) const;
  llvm::Error prefill(const std::vector<std::vector<int32_t>> &prompts, Generation &out);
  llvm::Error enqueueDecodeStep(int64_t rows, const GenerateOptions &opts, bool tailOnly);
  llvm::Error enqueueLaunch(const PlannedLaunch &l, const PhaseState &ph, int64_t rows, int64_t outRows,
                            const GenerateOptions *sampling, const Segment *seg, bool greedyKeys = false);
  // The Params of launch `l` as the runtime binds them (every field the plan binds, the rest zero).
  void fillParams(const PlannedLaunch &l, const PhaseState &ph, int64_t rows, int64_t outRows,
                  const GenerateOptions *sampling, const Segment *seg, bool greedyKeys, uint8_t *blob) const;
  // Whether this generate's decode steps run the persistent kernel.
  bool usePersistent(const GenerateOptions &opts) const;
  // Writes the persistent kernel's task table for `rows` sequences (once per rows and greedy setting; before
  // a graph capture).
  llvm::Error preparePersistent(int64_t rows, bool greedyKeys);
  // MINFER_PERSISTENT_TRACE=FILE: the persistent kernel records when each task's last tile finished, and
  // the last decode step's times (one row a task, tab-separated) are written to FILE after each generate.
  static const char *traceFile();
  llvm::Error writeTrace(const char *path) const;
  // MINFER_PREFILL_TRACE=FILE: an event is recorded before each prefill launch and the time between
  // consecutive events (one row a launch, tab-separated) is written to FILE after each prefill. The launches
  // run back to back as without it, so the times are those of the kernels in place (clocks, L2 state).
  struct PrefillTrace;
  static const char *prefillTraceFile();
  cuda::DevicePtr address(const PhaseState &ph, int buffer) const;
  // The same, offset to one sequence's rows and cache slab when `seg` is given (a per-sequence launch).
  cuda::DevicePtr address(const PhaseState &ph, int buffer, const Segment *seg) const;

  const Engine &engine;
  SessionOptions options;
  Memory mem;
  cuda::Stream stream;
  cuda::DeviceBuffer memory_;
  std::unique_ptr<PhaseState> prefillState, decodeState;
  std::vector<cuda::DevicePtr> shared; // KV caches and workspaces, by plan buffer index
  int64_t prefillLogitsRows = 0;       // rows the prefill logits hold
  // The captured decode step and what it was captured for.
  cuda::Graph graph;
  struct GraphKey {
    int64_t rows = -1;
    float temperature = 0, topP = 1;
    int topK = 0;
    uint64_t seed = 0;
    bool persistent = false;
    bool operator==(const GraphKey &) const = default;
  } graphKey;
  // The persistent decode kernel: its grid (blocks resident at once on this device, found when the session
  // is created; 0 without the kernel), why it cannot run here if it cannot, and what its task table holds.
  llvm::Error sizePersistentGrid();
  int persistentBlocks = 0;
  std::string persistentRefused;
  struct TableKey {
    int64_t rows = -1;
    bool greedyKeys = false;
    bool operator==(const TableKey &) const = default;
  } tableKey;
};

} // namespace minfer::rt
