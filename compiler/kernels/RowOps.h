// compiler/kernels/RowOps.h — the specs of the row-wise kernels: norms (templates/norm.cuh), embedding
// (embedding.cuh), pointwise ops (pointwise.cuh), rope and the KV-cache write (rope.cuh), argmax and
// sampling (sampling.cuh), the decode step's token feedback (decode_step.cuh); and the host copy of the
// sampling algorithm that the kernel is tested against.
//
// Activations are always bf16, so a name carries a dtype only where one varies: the weight's, for norms
// and embeddings (`rms_norm_bf16_d2048_t256` reads bf16 gammas). Every dim but the rows (tokens this step,
// the kernel's `int rows` argument) is a template constant of the entry. launch(rows) gives one block per
// row except for pointwise ops (flat, one 16-byte vector per thread); rows = 0 still launches one block,
// which exits at once.
//
// Each kernel takes its family's Params struct (below; the template's mirror is in the same .cuh).
#pragma once

#include "compiler/kernels/KernelSpec.h"
#include "ir/Module.h"
#include "ir/Types.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace minfer {

// ---- the kernels' arguments (host mirrors of the templates' structs; compiler/kernels/Params.h) ----------
// Shapes [rows, cols]; KVD = kv_heads * head_dim. Device pointers are uint64_t.

struct NormParams { // norm.cuh: rms_norm, layer_norm, and their _residual forms
  uint64_t a = 0, b = 0;        // [rows, D]: x (or the addends a + b of the residual forms)
  uint64_t gamma = 0, beta = 0; // [D] of the weight's type
  uint64_t sum = 0, y = 0;      // [rows, D]: a + b (residual forms), the normalised rows
  int32_t rows = 0;
  float eps = 0;
  static const ParamsLayout &layout();
};

struct PointwiseParams { // pointwise.cuh: unary (a -> y) and binary (a, b -> y)
  uint64_t a = 0, b = 0, y = 0; // [rows, cols]
  int32_t rows = 0;
  float arg = 0; // Scale's factor
  static const ParamsLayout &layout();
};

struct EmbeddingParams { // embedding.cuh
  uint64_t ids = 0;   // i32 [rows]
  uint64_t table = 0; // [table_rows, dim] of the table's type
  uint64_t out = 0;   // [rows, dim]
  int32_t rows = 0, table_rows = 0;
  uint64_t ids2 = 0, table2 = 0; // embedding_sum: the second gather (i32 [rows], [table2_rows, dim]), added
  int32_t table2_rows = 0;
  static const ParamsLayout &layout();
};

struct RopeParams { // rope.cuh: rope
  uint64_t x = 0, y = 0;  // [rows, heads * head_dim]; y may alias x
  uint64_t positions = 0; // i32 [rows]
  uint64_t inv_freq = 0;  // f32 [head_dim / 2]
  int32_t rows = 0;
  static const ParamsLayout &layout();
};

struct KvWriteParams { // rope.cuh: kv_write, rope_kv_write
  uint64_t k = 0, v = 0;             // [rows, KVD]
  uint64_t k_cache = 0, v_cache = 0; // [batch, max_seq, KVD]
  uint64_t seq_of = 0, pos_of = 0;   // i32 [rows]
  uint64_t inv_freq = 0;             // f32 [head_dim / 2] (rope_kv_write)
  int32_t rows = 0, max_seq = 0;
  static const ParamsLayout &layout();
};

struct ArgmaxParams { // sampling.cuh: argmax
  uint64_t logits = 0; // [rows, vocab]
  uint64_t out = 0;    // i32 [rows]
  int32_t rows = 0;
  static const ParamsLayout &layout();
};

struct SampleParams { // sampling.cuh: sample (the algorithm: SampleSettings, sampleReference below)
  uint64_t logits = 0, out = 0;
  int32_t rows = 0;
  float temperature = 0;
  int32_t top_k = 0;
  float top_p = 1;
  uint64_t seed = 0, step = 0;
  uint64_t step_offset = 0; // i32 [1], nullable: added to step
  static const ParamsLayout &layout();
};

struct AdvanceParams { // decode_step.cuh: advance_tokens
  uint64_t next = 0, tokens = 0, positions = 0, context_len = 0; // i32 [rows]
  uint64_t history = 0;                                          // i32 [history_steps, rows]
  uint64_t step = 0;                                             // i32 [1]
  int32_t rows = 0, history_steps = 0;
  uint64_t keys = 0; // u64 [rows], nullable: EpiArgmax keys read instead of next, then zeroed
  static const ParamsLayout &layout();
};

// ---- norms ----------------------------------------------------------------------------------------------

enum class NormKind { Rms, Layer };
// ResidualAdd normalises s = a + b and writes s too: `%s = add %a, %b` followed by a norm of %s, in one kernel.
enum class NormFusion { None, ResidualAdd };

struct NormSpec : KernelSpec {
  NormKind kind = NormKind::Rms;
  int64_t dim = 0;
  ir::DType weight = ir::DType::BF16; // gamma and beta
  NormFusion fusion = NormFusion::None;
  int threads = 0;

  // threads = 0 picks defaultThreads(dim).
  NormSpec(NormKind kind, int64_t dim, ir::DType weight, NormFusion fusion = NormFusion::None, int threads = 0);
  // One thread per 16-byte vector of the row, in whole warps, at most 256: 8 warps hold a 2048-wide row in
  // one vector per thread and a 4096-wide one in two, a block per row keeps 8 blocks (2048 threads) per SM
  // at prefill, and narrow rows (768, 896) do not idle most of their threads.
  static int defaultThreads(int64_t dim);

  std::string name() const override;
  std::string header() const override { return "norm.cuh"; }
  const ParamsLayout &params() const override { return NormParams::layout(); }
  std::string entry() const override;
  LaunchDims launch(int64_t rows) const override;
  llvm::json::Object toJSON() const override;
  // Shape rules the template static_asserts, as an error naming the spec (for the planner).
  llvm::Error verify() const;
  llvm::Error validate(const Target &) const override { return verify(); }
  // The same norm with `threads` threads a row, when the row fits them (verify()).
  std::shared_ptr<KernelSpec> asTask(int threads, int grid) const override;
  std::string taskType() const override; // minfer::NormTask<...>
};

// ---- embedding ------------------------------------------------------------------------------------------

struct EmbeddingSpec : KernelSpec {
  int64_t dim = 0;
  ir::DType table = ir::DType::BF16;
  std::optional<ir::DType> table2; // embedding_sum: the second table's type (its rows added to the first's)
  int threads = 0;

  EmbeddingSpec(int64_t dim, ir::DType table, std::optional<ir::DType> table2 = std::nullopt);
  std::string name() const override;
  std::string header() const override { return "embedding.cuh"; }
  const ParamsLayout &params() const override { return EmbeddingParams::layout(); }
  std::string entry() const override;
  LaunchDims launch(int64_t rows) const override;
  llvm::json::Object toJSON() const override;
  llvm::Error verify() const;
  llvm::Error validate(const Target &) const override { return verify(); }
  // Any block size: the template strides a row's vectors by the block.
  std::shared_ptr<KernelSpec> asTask(int threads, int grid) const override;
  std::string taskType() const override; // minfer::EmbeddingTask<...>
};

// ---- pointwise ------------------------------------------------------------------------------------------

enum class PointwiseOp { Scale, GeluTanh, GeluErf, Silu, Relu, Add, Mul, SiluMul };

// The pointwise op of an IR op kind (scale, gelu_tanh, gelu_erf, silu, relu, add, mul), or nullopt.
std::optional<PointwiseOp> pointwiseOpOf(ir::OpKind kind);
bool isBinary(PointwiseOp op);
const char *pointwiseOpName(PointwiseOp op); // "silu_mul"

struct PointwiseSpec : KernelSpec {
  PointwiseOp op = PointwiseOp::Silu;
  int64_t cols = 0;

  // templates/pointwise.cuh kPointwiseThreads.
  static constexpr unsigned kThreads = 256;
  // kThreads as a kernel of its own; another block size only as a task (asTask).
  unsigned threads = kThreads;

  PointwiseSpec(PointwiseOp op, int64_t cols) : op(op), cols(cols) {}
  std::string name() const override;
  std::string header() const override { return "pointwise.cuh"; }
  const ParamsLayout &params() const override { return PointwiseParams::layout(); }
  std::string entry() const override;
  LaunchDims launch(int64_t rows) const override;
  llvm::json::Object toJSON() const override;
  llvm::Error verify() const;
  llvm::Error validate(const Target &) const override { return verify(); }
  // Any whole number of warps: the template's grid-stride loop takes the block size as a parameter.
  std::shared_ptr<KernelSpec> asTask(int threads, int grid) const override;
  std::string taskType() const override; // minfer::PointwiseTask<...>
};

// ---- rope and the KV-cache write ------------------------------------------------------------------------

// templates/rope.cuh's minfer::RopeStyle: Half rotates (i, i + head_dim/2), Interleaved (2i, 2i+1).
using ir::RopeStyle;
// The style of an IR rope op (its `style` attribute).

struct RopeSpec : KernelSpec {
  int64_t heads = 0, headDim = 0;
  RopeStyle style = RopeStyle::Half;
  int threads = 0;

  RopeSpec(int64_t heads, int64_t headDim, RopeStyle style);
  std::string name() const override;
  std::string header() const override { return "rope.cuh"; }
  const ParamsLayout &params() const override { return RopeParams::layout(); }
  std::string entry() const override;
  LaunchDims launch(int64_t rows) const override;
  llvm::json::Object toJSON() const override;
  llvm::Error verify() const;
  llvm::Error validate(const Target &) const override { return verify(); }
};

// Writes this step's k and v rows into one layer's cache [batch, max_seq, kv_heads * head_dim]; with
// `rope`, k is rotated at its cache position on the way (rope_kv_write), so the k rope needs no launch.
struct KvWriteSpec : KernelSpec {
  int64_t kvHeads = 0, headDim = 0;
  std::optional<RopeStyle> rope;
  int threads = 0;

  KvWriteSpec(int64_t kvHeads, int64_t headDim, std::optional<RopeStyle> rope = std::nullopt);
  std::string name() const override;
  std::string header() const override { return "rope.cuh"; }
  const ParamsLayout &params() const override { return KvWriteParams::layout(); }
  std::string entry() const override;
  LaunchDims launch(int64_t rows) const override;
  llvm::json::Object toJSON() const override;
  llvm::Error verify() const;
  llvm::Error validate(const Target &) const override { return verify(); }
};

// ---- argmax and sampling --------------------------------------------------------------------------------

struct ArgmaxSpec : KernelSpec {
  int64_t vocab = 0;
  int threads = 0;

  // 1024 threads (the most a block has): one block reads a whole 64-300 KB row of logits, so the row's
  // time is bounded by how many loads one SM keeps in flight and how many it issues per cycle; at decode
  // there are only a few rows (blocks), so each should be as wide as possible. Measured on an H200:
  // 5.3 us for vocab 32000 and 9.0 us for 151936 at 1 to 4 rows, where an empty launch times ~4 us.
  static constexpr int kDefaultThreads = 1024;

  explicit ArgmaxSpec(int64_t vocab, int threads = kDefaultThreads) : vocab(vocab), threads(threads) {}
  std::string name() const override;
  std::string header() const override { return "sampling.cuh"; }
  const ParamsLayout &params() const override { return ArgmaxParams::layout(); }
  std::string entry() const override;
  LaunchDims launch(int64_t rows) const override;
  llvm::json::Object toJSON() const override;
  llvm::Error verify() const;
  llvm::Error validate(const Target &) const override { return verify(); }
};

struct SampleSpec : KernelSpec {
  int64_t vocab = 0;
  int threads = 0;

  // 512 threads: the sampling passes need ~100 registers (64-bit masses, scans); at 1024 threads a thread
  // gets 64 and spills (sm_80, sm_89, sm_90 at vocab 151936). Measured on an H200, one row: 36 us (vocab
  // 32000, top-k 50 + top-p 0.95), 64 us (32000, top-p 0.9 alone), 148 us and 297 us at 151936; 16 rows
  // cost 10-25% more. The time grows with the vocabulary and is spent in one shared-memory atomic per logit
  // (the top-k counts of pass 1; the 64-bit masses of pass 3 when top-p has no top-k before it): finer
  // bins (less contention), a barrier-free draw and deeper loads each changed it by < 15%, while argmax,
  // the same loads without atomics, takes 9 us. Next steps, in order of gain: split a row over several
  // blocks (a decode step has 1-16 rows for 132 SMs; needs a workspace and a combine); count without
  // atomics (pivots counted with ballot/popc, or thread-private radix digit counters as in CUB).
  static constexpr int kDefaultThreads = 512;

  explicit SampleSpec(int64_t vocab, int threads = kDefaultThreads) : vocab(vocab), threads(threads) {}
  std::string name() const override;
  std::string header() const override { return "sampling.cuh"; }
  const ParamsLayout &params() const override { return SampleParams::layout(); }
  std::string entry() const override;
  LaunchDims launch(int64_t rows) const override;
  llvm::json::Object toJSON() const override;
  llvm::Error verify() const;
  llvm::Error validate(const Target &) const override { return verify(); }
};

// Feeds a decode step's tokens back (decode_step.cuh advance_tokens): one block whose threads cover the batch.
struct AdvanceSpec : KernelSpec {
  int threads = 32;

  explicit AdvanceSpec(int threads) : threads(threads) {}
  static AdvanceSpec forBatch(int64_t batch); // whole warps covering `batch` rows, at most 1024
  std::string name() const override;          // advance_tokens_t32
  std::string header() const override { return "decode_step.cuh"; }
  const ParamsLayout &params() const override { return AdvanceParams::layout(); }
  std::string entry() const override;
  LaunchDims launch(int64_t rows) const override; // one block, whatever the rows
  llvm::json::Object toJSON() const override;
  llvm::Error verify() const;
  llvm::Error validate(const Target &) const override { return verify(); }
};

// ---- the sampling algorithm on the host (templates/sampling.cuh defines it; this is its exact copy) -----

struct SampleSettings {
  float temperature = 1.0f; // <= 0: argmax
  int topK = 0;             // <= 0 or >= vocab: all
  float topP = 1.0f;        // applied when 0 < topP < 1
  uint64_t seed = 0;
  uint64_t step = 0;
};

// splitmix64(splitmix64(splitmix64(seed) ^ step) ^ row): the kernel's random bits for a row.
uint64_t sampleRandomBits(uint64_t seed, uint64_t step, uint64_t row);

struct SampleOutcome {
  int32_t token = 0;
  // How far the draw and the top-p cut were from changing (relative to the kept mass): where the device's
  // expf differs from the host's by an ulp, the kernel may differ from this reference only when one of
  // them is below ~1e-6. Infinity when there was no draw (argmax) or no top-p cut.
  double drawMargin = INFINITY;
  double topPMargin = INFINITY;
};

// The token the sample kernel draws for `row` of the logits (bf16 bits, one row).
SampleOutcome sampleReference(llvm::ArrayRef<uint16_t> logits, const SampleSettings &params, uint64_t row);
// The probability of each token under `params` (W / S of the kept set, exactly; argmax cases put 1 on the
// argmax): what the draws of many rows should follow.
std::vector<double> sampleDistribution(llvm::ArrayRef<uint16_t> logits, const SampleSettings &params);

} // namespace minfer
