// compiler/kernels/Epilogue.cpp — names of the matmul epilogue and prologue policies, and the qkv epilogue's rotation table.
#include "compiler/kernels/Epilogue.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>

namespace minfer {
namespace {

const char *const kActPolicies[] = {"minfer::ActNone", "minfer::ActGeluTanh", "minfer::ActGeluErf", "minfer::ActSilu",
                                    "minfer::ActRelu"};
const char *boolArg(bool b) { return b ? "true" : "false"; }
llvm::Error failure(const llvm::Twine &msg) { return llvm::createStringError(llvm::inconvertibleErrorCode(), msg); }

} // namespace

std::vector<float> rotationTable(llvm::ArrayRef<double> invFreq, int64_t rows) {
  std::vector<float> table(static_cast<size_t>(std::max<int64_t>(rows, 0)) * invFreq.size() * 2);
  size_t k = 0;
  for (int64_t p = 0; p < rows; ++p)
    for (double f : invFreq) {
      const double angle = static_cast<double>(p) * f;
      table[k++] = static_cast<float>(std::cos(angle));
      table[k++] = static_cast<float>(std::sin(angle));
    }
  return table;
}

const Epilogue Epilogue::None = Epilogue::pointwise(false);
const Epilogue Epilogue::Bias = Epilogue::pointwise(true);
const Epilogue Epilogue::Residual = Epilogue::pointwise(false, Activation::None, true);
const Epilogue Epilogue::BiasResidual = Epilogue::pointwise(true, Activation::None, true);
const Epilogue Epilogue::GeluTanh = Epilogue::pointwise(false, Activation::GeluTanh);
const Epilogue Epilogue::BiasGeluTanh = Epilogue::pointwise(true, Activation::GeluTanh);
const Epilogue Epilogue::BiasGeluErf = Epilogue::pointwise(true, Activation::GeluErf);
const Epilogue Epilogue::Silu = Epilogue::pointwise(false, Activation::Silu);

Epilogue Epilogue::pointwise(bool bias, Activation act, bool residual, bool scale) {
  Epilogue e;
  e.bias = bias;
  e.act = act;
  e.residual = residual;
  e.scale = scale;
  return e;
}

Epilogue Epilogue::gated(Activation act) {
  Epilogue e;
  e.kind = Kind::Gated;
  e.act = act;
  return e;
}

Epilogue Epilogue::qkv(int heads, int kvHeads, int headDim, QkvRope rope, bool bias) {
  Epilogue e;
  e.kind = Kind::Qkv;
  e.heads = heads;
  e.kvHeads = kvHeads;
  e.headDim = headDim;
  e.rope = rope;
  e.bias = bias;
  return e;
}

std::string Epilogue::suffix() const {
  switch (kind) {
  case Kind::Pointwise: {
    std::vector<std::string> parts;
    if (bias) parts.push_back("bias");
    if (act != Activation::None) parts.push_back(ir::enumText(act).str());
    if (scale) parts.push_back("scale");
    if (residual) parts.push_back("residual");
    if (argmax) parts.push_back(parts.empty() ? "none_argmax" : "argmax");
    if (rowSquares) parts.push_back("rowsq");
    return parts.empty() ? "none" : llvm::join(parts, "_");
  }
  case Kind::Gated: return "gated_" + ir::enumText(act).str();
  case Kind::Qkv: {
    const char *ropes[] = {"norope", "half", "interleaved"};
    return llvm::formatv("qkv_h{0}_kv{1}_d{2}_{3}{4}", heads, kvHeads, headDim, ropes[static_cast<int>(rope)],
                         bias ? "_bias" : "")
        .str();
  }
  }
  return "?";
}

std::string Epilogue::policy() const {
  const char *a = kActPolicies[static_cast<int>(act)];
  switch (kind) {
  case Kind::Pointwise:
    if (argmax) return "minfer::EpiArgmax";
    return llvm::formatv("minfer::EpiPointwise<{0}, {1}, {2}, {3}{4}>", boolArg(bias), a, boolArg(scale), boolArg(residual),
                         rowSquares ? ", true" : "");
  case Kind::Gated: return llvm::formatv("minfer::EpiGated<{0}>", a).str();
  case Kind::Qkv:
    return llvm::formatv("minfer::EpiQkv<{0}, {1}, {2}, {3}, {4}>", heads, kvHeads, headDim, static_cast<int>(rope),
                         boolArg(bias))
        .str();
  }
  return "?";
}

int64_t Epilogue::outCols(int64_t n) const {
  switch (kind) {
  case Kind::Pointwise: return n;
  case Kind::Gated: return n / 2;
  case Kind::Qkv: return int64_t(heads) * headDim;
  }
  return n;
}

llvm::Error Epilogue::validate(int64_t n) const {
  if (pairs() && n % 2) return failure("the " + suffix() + " epilogue needs an even N (column pairs), got " + llvm::Twine(n));
  if (kind == Kind::Qkv) {
    if (heads <= 0 || kvHeads <= 0 || headDim <= 0 || headDim % 2)
      return failure("the qkv epilogue needs positive heads and an even head_dim");
    if (n != int64_t(heads + 2 * kvHeads) * headDim)
      return failure("the qkv epilogue needs N = (heads + 2 kv_heads) * head_dim = " +
                     llvm::Twine((heads + 2 * kvHeads) * headDim) + ", got " + llvm::Twine(n));
  }
  if (kind != Kind::Pointwise && (scale || residual))
    return failure("scale and residual apply to pointwise epilogues only");
  if (argmax && (kind != Kind::Pointwise || bias || act != Activation::None || scale || residual))
    return failure("the argmax epilogue stores the plain product (the lm_head's logits): nothing else may be fused");
  if (rowSquares && (kind != Kind::Pointwise || !residual || argmax || n % 2))
    return failure("row squares come with a pointwise residual epilogue (the residual stream) of even N, not " +
                   suffix() + " of N = " + llvm::Twine(n));
  return llvm::Error::success();
}

std::vector<Epilogue> allPointwiseEpilogues() {
  std::vector<Epilogue> out;
  for (bool bias : {false, true})
    for (int a = 0; a < 5; ++a)
      for (bool residual : {false, true}) out.push_back(Epilogue::pointwise(bias, static_cast<Activation>(a), residual));
  return out;
}

int64_t Prologue::gammaBytes() const {
  return kind == Kind::None || unitGain ? 0 : static_cast<int64_t>(ir::dtypeSize(weights));
}

std::string Prologue::suffix() const {
  if (kind == Kind::None) return "";
  if (rowSquares) return "_pro_rms_sq";
  if (unitGain) return "_pro_rms_unit";
  return std::string(kind == Kind::Rms ? "_pro_rms_" : "_pro_layer_") + ir::dtypeName(weights).str();
}

std::string Prologue::policy() const {
  if (kind == Kind::None) return "minfer::ProNone";
  if (rowSquares) return "minfer::ProRowSquares";
  if (unitGain) return "minfer::ProNorm<false, void>";
  const char *t = weights == ir::DType::F32 ? "float" : weights == ir::DType::F16 ? "__half" : "__nv_bfloat16";
  return llvm::formatv("minfer::ProNorm<{0}, {1}>", boolArg(kind == Kind::Layer), t).str();
}

MINFER_PARAMS_LAYOUT(EpiParams,
                     MINFER_FIELD(bias, Ptr), MINFER_FIELD(residual, Ptr), MINFER_FIELD(scale, F32),
                     MINFER_FIELD(max_seq, I32), MINFER_FIELD(positions, Ptr), MINFER_FIELD(seq_of, Ptr),
                     MINFER_FIELD(rope, Ptr), MINFER_FIELD(k_cache, Ptr), MINFER_FIELD(v_cache, Ptr),
                     MINFER_FIELD(gamma, Ptr), MINFER_FIELD(beta, Ptr), MINFER_FIELD(eps, F32),
                     MINFER_FIELD(argmax, Ptr), MINFER_FIELD(row_sq, Ptr), MINFER_FIELD(row_sq_parts, I32))

MINFER_PARAMS_LAYOUT(MatmulParams,
                     MINFER_FIELD(C, Ptr), MINFER_FIELD(A, Ptr), MINFER_FIELD(W, Ptr), MINFER_FIELD(rows, I32),
                     MINFER_FIELD_STRUCT(epi, EpiParams::layout()))

} // namespace minfer
