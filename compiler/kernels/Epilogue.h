// compiler/kernels/Epilogue.h — what a matmul kernel fuses around its product, shared by the gemm and gemv
// kernel families: the epilogue (bias, activation, scale, residual add; the gated MLP's act(g) * u; the
// attention projections' rope and KV-cache write) and, for gemv, a prologue norm. templates/epilogue.cuh
// holds the matching device policies; this names them and describes their arguments.
#pragma once

#include "compiler/kernels/Params.h"
#include "ir/OpInfo.h"
#include "ir/Types.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

namespace minfer {

// The IR's enums (ir/Ops.def): a matmul's `act`, and the rotation a Qkv epilogue applies to q and k (its
// values are templates/epilogue.cuh EpiQkv's ROPE).
using ir::Activation;
using ir::QkvRope;

struct Epilogue {
  enum class Kind {
    Pointwise, // C[row, col] = act(acc + bias) * scale + residual
    Gated,     // W rows interleave gate and up: C[row, col / 2] = act(acc[col]) * acc[col + 1]
    Qkv,       // W stacks q, k, v: q to C, k and v into the KV caches, q and k rotated
  };
  Kind kind = Kind::Pointwise;
  bool bias = false;
  Activation act = Activation::None;
  bool scale = false;    // Pointwise: multiplies by EpiParams::scale after the activation
  bool residual = false; // Pointwise: adds EpiParams::residual [M, N] last
  int heads = 0, kvHeads = 0, headDim = 0; // Qkv
  QkvRope rope = QkvRope::None;            // Qkv
  bool argmax = false; // Pointwise without anything else: also fold each row's argmax (greedy lm_head; gemv)
  // Pointwise with a residual, in the wgmma gemm: also write each stored row's sums of squares, a partial per
  // tile of columns (EpiParams::row_sq), for the next gemm's folded RMS norm (Prologue::rowSquares).
  bool rowSquares = false;

  static Epilogue pointwise(bool bias, Activation act = Activation::None, bool residual = false, bool scale = false);
  static Epilogue gated(Activation act);
  static Epilogue qkv(int heads, int kvHeads, int headDim, QkvRope rope, bool bias);

  // In spec names: "none", "bias_gelu_tanh", "bias_scale_residual", "gated_silu", "qkv_h32_kv4_d64_half".
  std::string suffix() const;
  // The template argument: minfer::EpiPointwise<true, minfer::ActGeluTanh, false, false>, ...
  std::string policy() const;
  // Columns of C for a W of n rows (Gated: n / 2; Qkv: the q columns).
  int64_t outCols(int64_t n) const;
  // Needs W rows (col, col + 1) together.
  bool pairs() const { return kind != Kind::Pointwise; }
  // Success when the policy instantiates for a W of n rows.
  llvm::Error validate(int64_t n) const;

  auto key() const {
    return std::tie(kind, bias, act, scale, residual, heads, kvHeads, headDim, rope, argmax, rowSquares);
  }
  bool operator==(const Epilogue &o) const { return key() == o.key(); }
  bool operator<(const Epilogue &o) const { return key() < o.key(); }

  // The pointwise epilogues by name, for tests and benchmarks.
  static const Epilogue None, Bias, Residual, BiasResidual, GeluTanh, BiasGeluTanh, BiasGeluErf, Silu;
};

// Every pointwise epilogue without scale: bias or not, each activation, residual or not (20).
std::vector<Epilogue> allPointwiseEpilogues();

// The prologue of a matmul: a norm of the activation rows, folded from the IR (a norm marked `fold = decode`,
// into a gemv; an RMS norm whose gains ride in W, into a gemv or a wgmma gemm).
struct Prologue {
  enum class Kind { None, Rms, Layer };
  Kind kind = Kind::None;
  ir::DType weights = ir::DType::BF16; // gamma's (and beta's) element type
  // RMS only: gamma was multiplied into the columns of the matmul's W at load (Plan.h PlanBuffer::gains),
  // so the prologue normalises without it and reads no gamma (EpiParams::gamma unused).
  bool unitGain = false;
  // With unitGain, the wgmma gemm only: the rows' sums of squares come from the gemm that stored A
  // (Epilogue::rowSquares; EpiParams::row_sq, row_sq_parts), so the kernel reads nothing more of A.
  bool rowSquares = false;

  static Prologue rmsUnitGain() { return Prologue{Kind::Rms, ir::DType::BF16, true}; }
  static Prologue rmsRowSquares() { return Prologue{Kind::Rms, ir::DType::BF16, true, true}; }
  int64_t gammaBytes() const; // gamma's element size; 0 without a prologue or with unit gains
  // "", "_pro_rms_bf16", "_pro_rms_unit" with unit gains, "_pro_rms_sq" with row squares
  std::string suffix() const;
  // minfer::ProNone, minfer::ProNorm<false, bf16>, minfer::ProNorm<false, void>, minfer::ProRowSquares
  std::string policy() const;
  auto key() const { return std::tie(kind, weights, unitGain, rowSquares); }
  bool operator==(const Prologue &o) const { return key() == o.key(); }
};

// The host mirror of templates/epilogue.cuh's EpiParams: what a matmul's epilogue and prologue read.
struct EpiParams {
  uint64_t bias = 0, residual = 0;
  float scale = 1.f;
  int32_t max_seq = 0;
  uint64_t positions = 0, seq_of = 0, rope = 0, k_cache = 0, v_cache = 0; // rope: rotationTable's layout
  uint64_t gamma = 0, beta = 0;
  float eps = 0.f;
  uint64_t argmax = 0;
  uint64_t row_sq = 0;      // Epilogue::rowSquares writes, Prologue::rowSquares reads: [M, row_sq_parts] floats
  int32_t row_sq_parts = 0; // Prologue::rowSquares: the partials of a row
  static const ParamsLayout &layout();
};

// The qkv epilogue's rotation table (EpiParams::rope): for each position p < rows and rotary pair i of
// `invFreq` (ir::ropeInverseFrequencies, HEAD_DIM / 2 of them), cos and sin of the interpreter's angle
// p * invFreq[i] computed in double and rounded to fp32: [rows, HEAD_DIM / 2, 2] floats. The plan sizes it to
// max_seq rows; the engine builds and uploads it when it loads the weights.
std::vector<float> rotationTable(llvm::ArrayRef<double> invFreq, int64_t rows);

// The matmul kernels' one argument (gemm, gemv, gemvMma): templates/epilogue.cuh's MatmulParams.
struct MatmulParams {
  uint64_t C = 0; // [rows, N] (N / 2 gated, the q columns for qkv)
  uint64_t A = 0; // [rows, K]
  uint64_t W = 0; // [N, K]
  int32_t rows = 0;
  EpiParams epi = {}; // initialised, so that designated initialisers may leave it out
  static const ParamsLayout &layout();
};

} // namespace minfer
