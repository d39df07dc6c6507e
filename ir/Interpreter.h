// ir/Interpreter.h — the CPU reference interpreter: the semantic definition of every op.
//
// Runs a verified module in fp32 (whatever dtypes the IR declares; reductions accumulate in double) for a
// batch of independent sequences, each with its own KV cache: step(seq, tokens) appends T tokens to
// sequence `seq` and returns the logits of each, [T, vocab]. Prefill is a step of the prompt; decode a
// step of one token. Every GPU kernel is tested against this.
#pragma once

#include "ir/Module.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

namespace minfer::ir {

// A dense row-major fp32 tensor. i32 values (tokens, positions) are held exactly as floats (< 2^24).
struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;

  Tensor() = default;
  explicit Tensor(std::vector<int64_t> s) : shape(std::move(s)), data(numelOf(shape)) {}
  int64_t numel() const { return static_cast<int64_t>(data.size()); }
  int64_t rows() const { return shape.empty() ? 1 : numel() / shape.back(); }
  int64_t cols() const { return shape.empty() ? 1 : shape.back(); }
  float *row(int64_t r) { return data.data() + r * cols(); }
  const float *row(int64_t r) const { return data.data() + r * cols(); }
  static size_t numelOf(const std::vector<int64_t> &s);
};

// Weights as the interpreter reads them: for each Module::weights entry, one fp32 tensor per layer
// (per-layer weights) or a single one (shared), in the IR's logical layout (already transposed).
struct WeightSet {
  std::vector<std::vector<Tensor>> byDecl;
};

class Interpreter {
public:
  // `m` must be verified and outlive the interpreter; `weights` is checked against its declarations.
  static llvm::Expected<std::unique_ptr<Interpreter>> create(const Module &m, const WeightSet &weights,
                                                             int64_t batch, int64_t maxSeq);
  ~Interpreter();

  // Appends `tokens` to sequence `seq`; returns the graph's output (the logits) for them, [T, vocab].
  llvm::Expected<Tensor> step(int64_t seq, llvm::ArrayRef<int32_t> tokens);
  int64_t length(int64_t seq) const;
  void reset(int64_t seq);
  int64_t batch() const;
  int64_t vocab() const;

  struct State; // implementation detail (Interpreter.cpp)

private:
  explicit Interpreter(std::unique_ptr<State>);
  std::unique_ptr<State> s;
};

// The inverse frequency of each rotary pair of a rope op, [head_dim / 2], as HF computes them for its
// schedule (default, linear, llama3). Kernels take this table rather than recomputing it.
std::vector<double> ropeInverseFrequencies(const Op &rope);

// The cache an attention op reads and extends: [length, kv_heads * head_dim] each.
struct KvCache {
  Tensor k, v;
};

// Evaluates one op of `m` on the given operands (values and weights in operand order, fp32), outside any
// graph: the reference every GPU kernel test compares against. An attention op needs `cache`, which
// holds the sequence's earlier keys and values and gets this step's appended.
llvm::Expected<std::vector<Tensor>> evalOp(const Module &m, const Op &op, llvm::ArrayRef<const Tensor *> operands,
                                           KvCache *cache = nullptr);

struct GreedyResult {
  std::vector<std::vector<int32_t>> tokens; // per sequence: the generated ids
  std::vector<Tensor> logits;               // per sequence: [prompt + generated - 1, vocab]
};

// Greedy decoding of every prompt (sequence i of the interpreter gets prompt i): prefill, then up to
// `maxNew` tokens, each the argmax of the last logits row (lowest id on ties) and fed back, stopping
// early after `eos` when given, or when `onToken(sequence, token)` (called with each token as it is chosen)
// returns false. The logits hold one row per prompt position, then one row for each generated token fed
// back (all but the last).
llvm::Expected<GreedyResult> generateGreedy(Interpreter &, llvm::ArrayRef<std::vector<int32_t>> prompts,
                                            int64_t maxNew, std::optional<int32_t> eos = std::nullopt,
                                            llvm::function_ref<bool(int64_t, int32_t)> onToken = {});

} // namespace minfer::ir
