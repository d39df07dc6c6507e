// compiler/Plan.h — the ordered kernel launches of a prefill and of a decode step, with their buffers.
//
// buildPlan lowers a verified module (fused by compiler/Fuse.cpp or not) op by op into launches of
// specialised kernels; in decode a norm marked `fold = decode` becomes the prologue of the gemv kernels
// that read it. Each launch names its kernel (an index into `kernels`, unique by
// spec name), its arguments in the kernel's parameter order, and the layer it belongs to. Activation
// buffers live in one arena per phase, placed by the memory planner; weights, constants (rope frequency
// tables), the KV cache and workspaces are buffers of their own kinds. The runtime walks this to run a
// step; --emit=plan prints it; a bundle stores it.
#pragma once

#include "jit/Target.h"
#include "compiler/kernels/KernelSpec.h"
#include "ir/Module.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace minfer {

enum class BufferKind {
  Input,      // i32 per row: tokens, positions, sequence ids
  Activation, // bf16 [rows, cols] in the phase's arena
  Weight,     // one tensor of one layer, as loaded (matmul weights bf16 [out, in])
  Constant,   // data computed at plan time (rope inverse frequencies; the qkv epilogue's rotation table)
  KvCache,    // one layer's K or V cache: [batch, max_seq, kv_dim] bf16
  Workspace,  // scratch of a kernel (decode attention partials), sized by batch and max_seq
  Output,     // the logits [rows, vocab] bf16, and the sampled token ids
};
llvm::StringRef bufferKindName(BufferKind);

struct PlanBuffer {
  std::string name;
  BufferKind kind = BufferKind::Activation;
  int64_t bytesPerRow = 0; // Input, Activation, Output: bytes per token row
  int64_t fixedBytes = 0;  // Weight, Constant, KvCache, Workspace: total bytes
  int64_t arenaOffsetPerRow = -1; // Activation: offset in the arena, bytes per row
  int weight = -1;         // Weight: index into Module::weights
  ir::DType dtype = ir::DType::BF16; // Weight: the element type the kernels read (conversion at load)
  bool transposed = false; // Weight: stored [in, out] in the checkpoint, transposed at load
  int64_t layer = -1;      // Weight, KvCache: the layer
  int kvSlot = -1;         // KvCache: the attention slot (Module::numKvSlots)
  bool isValue = false;    // KvCache: V (else K)
  std::vector<float> constant; // Constant: the values (fp32)
  // Constant: a rotation table (compiler/kernels/Epilogue.h rotationTable) of the plan's max_seq positions
  // for these inverse frequencies, instead of `constant`: max_seq x head_dim / 2 pairs would make every plan
  // megabytes, so the engine builds it when it loads the weights.
  std::vector<double> rotation;
  // Weight: the order its rows are stored in for a fused epilogue (templates/epilogue.cuh): RopePairs puts
  // each rotary pair (i, i + head_dim/2) of the first `layoutRows` rows next to each other (EpiQkv, half
  // style); GateUp interleaves the two halves' rows (EpiGated). Applied at load (rowOrder).
  enum class Layout { AsIs, RopePairs, GateUp } layout = Layout::AsIs;
  int64_t layoutHeadDim = 0, layoutRows = 0; // RopePairs
  bool zeroed = false; // Workspace: starts at zero, and the kernels leave it so (the lm_head's argmax keys)
  // Weight: the buffer of an RMS norm's gamma (a Weight, [cols]) whose values multiply W's columns at load,
  // rounded to bf16 once, so the matmul reading the norm normalises without it (Prologue::unitGain); -1: none.
  int gains = -1;
  // Constant: `constant` is empty and every one of its fixedBytes / 4 floats is this value (the unit gains of
  // a norm kernel whose gamma rides in W).
  std::optional<float> fill;
};

// For a weight buffer of `rows` logical rows: the logical row stored at each row (empty when AsIs).
std::vector<int64_t> rowOrder(const PlanBuffer &, int64_t rows);

// A Weight or a Constant: the engine holds it (runtime/Engine.h), one copy for every session.
inline bool inWeightMemory(const PlanBuffer &b) { return b.kind == BufferKind::Weight || b.kind == BufferKind::Constant; }

struct Plan;
// Whether two plans' Weight and Constant buffers hold the same bytes, in the same order and layout (an engine
// of one may share the other's weights: runtime/Engine.h EngineOptions::weightsFrom). Tiles may differ.
bool sameWeightBuffers(const Plan &a, const Plan &b);

// The buffers and values of a matmul kernel's EpiParams (compiler/kernels/Epilogue.h); -1: none.
struct EpilogueArgs {
  int bias = -1, residual = -1;
  double scale = 1;
  int64_t maxSeq = 0;
  int positions = -1, seqOf = -1, rope = -1, kCache = -1, vCache = -1; // the qkv epilogue (rope: its table)
  int gamma = -1, beta = -1;                                              // a folded norm (gemv prologue)
  double eps = 0;
  int argmax = -1; // the lm_head's argmax keys (greedy decode; the session passes null when it samples)
  // Row squares (a norm folded across two gemms): the Activation the residual gemm writes them to, which
  // the next gemm reads, and the partials a row (the writer's tiles across its N).
  int rowSq = -1;
  int64_t rowSqParts = 0;
};

// A value the runtime writes into one field of a launch's Params (compiler/kernels/Params.h), converted to
// the field's type.
struct ParamValue {
  enum Kind {
    Buffer,        // a plan buffer's device address (buffer -1: null)
    Int,           // a constant of the plan (i)
    Float,         // a constant of the plan (f)
    Rows,          // the rows the launch covers: the step's, or its sequence's in a per-sequence launch
    OutRows,       // prefill: the rows that produce logits (after the gather)
    SequenceStart, // a per-sequence launch: the sequence's tokens already in the cache
    Temperature,   // the session's sampling options, for the sample launch
    TopK,
    TopP,
    Seed,
    Epilogue, // a matmul's EpiParams, from `epi`
  };
  Kind kind = Buffer;
  int buffer = -1;
  int64_t i = 0;
  double f = 0;
  EpilogueArgs epi;
  bool greedyOnly = false; // Buffer: passed only to a greedy decode step, null otherwise (the argmax keys)

  // Every buffer this value refers to (a Buffer's one, an Epilogue's several).
  std::vector<int> buffers() const;
};

// One field of a launch's Params and its value; `field` indexes the kernel's params().fields.
struct ParamBinding {
  int field = -1;
  ParamValue value;
};

// What a launch is for. The runtime treats all alike except: a Select launch (argmax) is swapped for the
// plan's sample kernel when the session samples, and after a prefill it runs Select and Advance alone on the
// last prompt rows to pick the first generated token.
enum class LaunchRole {
  Op,      // implements an IR op
  Gather,  // prefill: copies the rows that produce logits (out_rows) before the ops after the layers
  Select,  // decode: next_tokens from the logits (argmax)
  Advance, // decode: next_tokens become the next step's input; positions advance; history records them
};
llvm::StringRef launchRoleName(LaunchRole);

struct PlannedLaunch {
  int kernel = -1;
  LaunchRole role = LaunchRole::Op;
  std::vector<ParamBinding> params; // the fields it sets; the others are zero (null pointers)
  int64_t layer = -1;     // -1 outside the decoder layers
  std::string op;         // the IR op this launch implements, e.g. "%q0 = matmul"
  bool perSequence = false; // launched once per sequence (prefill attention), pointers offset per sequence
  bool overOutRows = false; // its grid covers the output rows (prefill, after the gather), not the step's
  // Select: the lm_head's gemv folds the argmax (EpiArgmax), so a greedy decode step skips this launch; the
  // advance kernel reads the keys instead (its `keys` argument, null when the step samples).
  bool skipWhenGreedy = false;
  // Prefill, the ops after the gather: they are lowered twice, as gemv kernels for a few output rows (a
  // sequence's last row, the usual prefill) and as the gemm for more (every row's logits kept), and a launch
  // runs only for a step whose output rows lie in [minOutRows, maxOutRows] (0: no bound).
  int64_t minOutRows = 0, maxOutRows = 0;
  bool runsFor(int64_t outRows) const { return outRows >= minOutRows && (maxOutRows == 0 || outRows <= maxOutRows); }
};

struct PhasePlan {
  std::string name; // "prefill" or "decode"
  std::vector<PlannedLaunch> launches;
  int logits = -1; // the Output buffer of the logits [rows, vocab]
  int64_t launchesPerLayer = 0; // launches in one decoder layer
  int64_t layers = 0;
  int64_t arenaBytesPerRow = 0;
  int64_t peakLiveBytesPerRow = 0;
};

// The largest decode batch: advance_tokens feeds every row's token back in one block (1024 threads).
constexpr int64_t kMaxDecodeBatch = 1024;
// The largest decode batch the persistent decode kernel is built for: up to 8 rows a step still reads each
// weight once per step through the gemv kernels; larger batches run the launch-per-op plan.
constexpr int64_t kMaxPersistentBatch = 8;

// The decode step's op launches as tasks of one persistent kernel (compiler/kernels/Persistent.h). The
// launches after them (select, advance) stay launches.
struct PersistentDecode {
  int kernel = -1;   // the persistent_decode kernel in Plan::kernels; -1: not built, `why` says why
  std::string why;
  // Why the matmul tasks keep their own weight loads although PlanOptions::weightRing asked for the ring
  // (the target has no cp.async.bulk, or the tasks' shared memory leaves no room for it); empty otherwise.
  std::string ringWhy;
  int threads = 0;   // its block size
  struct Task {
    int launch = -1;                    // index into decode.launches: the launch it replaces
    int kind = -1;                      // its body: index into the kernel's task types
    std::shared_ptr<KernelSpec> spec;   // the launch's spec re-instantiated for `threads` (asTask)
  };
  std::vector<Task> tasks;              // in launch order: decode.launches[0 .. tasks.size())
  int table = -1;    // Workspace: PersistentTaskHost [tasks], filled by the runtime per batch size
  int counters = -1; // Workspace, zeroed: u32 [tasks + 1]
  int trace = -1;    // Workspace: u64 [tasks + 1], each task's end time when the runtime traces a step
  bool built() const { return kernel >= 0; }
};

class TuningDb;

struct PlanOptions {
  int64_t maxBatch = 1;       // decode rows
  int64_t maxPrefillRows = 0; // 0: 2048, or all the caches hold when that is less
  int64_t maxSeq = 0;         // 0: the module's `max_pos` dim (an error when it has none)
  const TuningDb *tuning = nullptr; // tuned tiles (compiler/Tuning.h); without an entry, the heuristic default
  // The persistent decode kernel's matmul tasks stream W through a ring in shared memory (sm_90 and later;
  // templates/persistent.cuh WeightRing). Off by default: from batch 2 it beats the tasks' own loads, but not
  // the launches (bench/NOTES.md, session 16).
  bool weightRing = false;
  // On targets with wgmma, in a fused module: each RMS norm read only by matmuls (whose weights nothing else
  // reads) has its gamma multiplied into those weights' columns at load. The decode gemvs then normalise in
  // their prologue without a gamma (no gamma in shared memory, no write of A: session 22 measured 0.026-0.039
  // ms off a 16-row step); elsewhere the norm kernel runs with unit gains.
  bool gainsInWeights = true;
  // With gainsInWeights, prefill: where such a norm reads the output of a wgmma residual gemm and only wgmma
  // gemms read the norm, the residual gemm also writes its rows' sums of squares (Epilogue::rowSquares) and
  // the reading gemms scale their rows by 1 / rms (Prologue::rowSquares), so the norm has no launch: 42 of
  // TinyLlama's 44 prefill norms. Session 23 measured TinyLlama's prefill 2.68 -> 2.60 ms (512 tokens) and
  // 8.46 -> 8.37 (2048), Llama-2-7B's 11.36 -> 11.18 and level at 2048. (Session 22's first form added up the
  // squares in the reading gemm's main loop: 4-18% slower gemms.)
  bool gemmFoldsNorm = true;
};

struct Plan {
  Target target;
  PlanOptions options;
  std::vector<std::shared_ptr<KernelSpec>> kernels; // unique by name
  std::map<std::string, int> kernelIndex;            // name -> index in kernels
  std::vector<PlanBuffer> buffers;
  PhasePlan prefill, decode;
  PersistentDecode persistent; // the decode step as one kernel, where it could be built
  std::set<int> matmulWeights;     // weights read by a matmul (as bf16), by Module::weights index
  // The decode step's sample launch: replaces the Select launch (argmax) when the session samples.
  PlannedLaunch sample;
  // The buffers the runtime fills or reads itself, by role (-1: the plan has none).
  struct StepBuffers {
    int tokens = -1, positions = -1, seqOf = -1; // i32 [rows]: each row's token, position, sequence
    int contextLen = -1;                         // i32 [batch]: decode attention's context lengths
    int outRows = -1;                            // i32 [out rows]: prefill rows that produce logits
    int history = -1;                            // i32 [max_seq, batch]: the generated tokens
    int step = -1;                               // i32 [1]: decode steps recorded in history
    int nextTokens = -1;                         // i32 [batch]: the decode step's picks
  } io;
  int64_t weightBytes = 0;         // every weight buffer as the kernels read it
  double decodeFlopsPerToken = 0;  // 2 * the matmul weights' elements (attention excluded: it grows with context)
  bool fused = false;              // the module holds fused ops (compiler/Fuse.cpp ran on it)
  // Each tunable kernel's tile: "tuned" (from options.tuning) or "default" (the heuristic), by kernel name.
  std::map<std::string, std::string> tileSource;
  // The tuned tiles it used, as tuning database entries (TuningDb::entryKey -> tile): a bundle carries them
  // so that its plan is rebuilt with the same kernels.
  std::map<std::string, std::string> tunedTiles;
  int tunedKernels() const;
  int defaultTileKernels() const;
  // The value `l` binds to its kernel's field `field`, or null (unbound, or no such field): for tests and tools.
  const ParamValue *param(const PlannedLaunch &l, llvm::StringRef field) const;

  llvm::json::Object toJSON() const;
};

llvm::Expected<Plan> buildPlan(const ir::Module &, const Target &, const PlanOptions & = {});

// Fills plan.persistent from the decode launches (compiler/PersistentPlan.cpp): the kernel, its tasks and
// buffers, or why the step stays launches. buildPlan calls it last.
void planPersistentDecode(Plan &plan);

} // namespace minfer
