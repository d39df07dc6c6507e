// compiler/kernels/RowOps.cpp — names, entries and launch geometry of the row-op kernels, and the host copy
// of the sampling algorithm (templates/sampling.cuh's header comment defines it step by step).
#include "compiler/kernels/RowOps.h"

#include "io/Safetensors.h"

#include <algorithm>
#include <numeric>

namespace minfer {
namespace {

// templates/pointwise.cuh vecWidth<T, COLS>: the widest access of 16, 8, 4, 2 bytes that divides the row.
int64_t vecWidth(int64_t cols, int64_t elemBytes = 2) {
  int64_t n = 16 / elemBytes;
  while (n > 1 && cols % n != 0) n /= 2;
  return n;
}

// n rounded up to whole warps, within [32, cap].
int wholeWarps(int64_t n, int cap) {
  int64_t w = (n + 31) / 32 * 32;
  return static_cast<int>(std::clamp<int64_t>(w, 32, cap));
}

// The C++ type a template reads weights as.
const char *weightType(ir::DType t) {
  switch (t) {
  case ir::DType::BF16: return "minfer::bf16";
  case ir::DType::F16: return "__half";
  case ir::DType::F32: return "float";
  case ir::DType::I32: break;
  }
  return "<not a weight type>";
}

llvm::Error specError(const std::string &name, const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), "kernel " + llvm::Twine(name) + ": " + msg);
}

llvm::Error checkThreads(const std::string &name, int threads) {
  if (threads < 32 || threads > 1024 || threads % 32)
    return specError(name, "threads must be whole warps in [32, 1024], got " + llvm::Twine(threads));
  return llvm::Error::success();
}

LaunchDims rowBlocks(int64_t rows, int threads) {
  LaunchDims d;
  d.grid = {static_cast<unsigned>(std::max<int64_t>(rows, 1)), 1, 1}; // rows = 0: one block that exits
  d.block = {static_cast<unsigned>(threads), 1, 1};
  return d;
}

const char *styleEnum(RopeStyle s) {
  return s == RopeStyle::Half ? "minfer::RopeStyle::Half" : "minfer::RopeStyle::Interleaved";
}

// The threads that rope one row: one per unit of templates/rope.cuh ropeRow, at most 256.
int ropeThreads(int64_t heads, int64_t headDim, RopeStyle style) {
  int64_t half = headDim / 2;
  int64_t units = style == RopeStyle::Half ? heads * (half / vecWidth(half)) : heads * (headDim / vecWidth(headDim));
  return wholeWarps(std::max(units, half), 256);
}

// The norm template keeps at most 16 vectors of the row per thread in registers (kMaxVectorsPerThread).
constexpr int64_t kNormMaxVectorsPerThread = 16;

} // namespace

// ---- NormSpec -------------------------------------------------------------------------------------------

NormSpec::NormSpec(NormKind kind, int64_t dim, ir::DType weight, NormFusion fusion, int threads)
    : kind(kind), dim(dim), weight(weight), fusion(fusion), threads(threads ? threads : defaultThreads(dim)) {}

int NormSpec::defaultThreads(int64_t dim) {
  int64_t vectors = std::max<int64_t>(dim, 1) / vecWidth(std::max<int64_t>(dim, 1));
  int t = wholeWarps(vectors, 256);
  // Rows past 256 × 16 vectors need more threads to stay in registers.
  return std::max(t, wholeWarps((vectors + kNormMaxVectorsPerThread - 1) / kNormMaxVectorsPerThread, 1024));
}

std::string NormSpec::name() const {
  std::string n = kind == NormKind::Rms ? "rms_norm" : "layer_norm";
  if (fusion == NormFusion::ResidualAdd) n += "_residual";
  return n + "_" + ir::dtypeName(weight).str() + "_d" + std::to_string(dim) + "_t" + std::to_string(threads);
}

std::string NormSpec::entry() const {
  std::string n = kind == NormKind::Rms ? "rms_norm" : "layer_norm";
  if (fusion == NormFusion::ResidualAdd) n += "_residual";
  return "minfer::" + n + "<" + std::to_string(dim) + ", " + std::to_string(threads) + ", " + weightType(weight) + ">";
}

LaunchDims NormSpec::launch(int64_t rows) const { return rowBlocks(rows, threads); }

llvm::json::Object NormSpec::toJSON() const {
  return llvm::json::Object{{"family", "norm"},
                            {"kind", kind == NormKind::Rms ? "rms" : "layer"},
                            {"dim", dim},
                            {"weight", ir::dtypeName(weight)},
                            {"fusion", fusion == NormFusion::ResidualAdd ? "residual_add" : "none"},
                            {"threads", threads}};
}

llvm::Error NormSpec::verify() const {
  if (dim <= 0) return specError(name(), "dim must be positive");
  if (!ir::isFloat(weight)) return specError(name(), "weights must be bf16, f16 or f32");
  if (auto e = checkThreads(name(), threads)) return e;
  int64_t vectors = dim / vecWidth(dim);
  if ((vectors + threads - 1) / threads > kNormMaxVectorsPerThread)
    return specError(name(), "a row of " + llvm::Twine(dim) + " needs more than " + llvm::Twine(threads) + " threads");
  return llvm::Error::success();
}

std::shared_ptr<KernelSpec> NormSpec::asTask(int t, int /*grid*/) const {
  auto task = std::make_shared<NormSpec>(*this);
  task->threads = t;
  if (auto e = task->verify()) {
    llvm::consumeError(std::move(e));
    return nullptr;
  }
  return task;
}

std::string NormSpec::taskType() const {
  return "minfer::NormTask<" + std::to_string(dim) + ", " + std::to_string(threads) + ", " + weightType(weight) +
         (kind == NormKind::Layer ? ", true" : ", false") + (fusion == NormFusion::ResidualAdd ? ", true>" : ", false>");
}

// ---- EmbeddingSpec --------------------------------------------------------------------------------------

EmbeddingSpec::EmbeddingSpec(int64_t dim, ir::DType table, std::optional<ir::DType> table2)
    : dim(dim), table(table), table2(table2),
      threads(wholeWarps(std::max<int64_t>(dim, 1) / vecWidth(std::max<int64_t>(dim, 1)), 256)) {}

std::string EmbeddingSpec::name() const {
  return std::string(table2 ? "embedding_sum_" : "embedding_") + ir::dtypeName(table).str() +
         (table2 ? "_" + ir::dtypeName(*table2).str() : "") + "_d" + std::to_string(dim);
}

// The template arguments after D: the tables' element types.
static std::string embeddingTypes(const EmbeddingSpec &s) {
  return std::string(weightType(s.table)) + (s.table2 ? std::string(", ") + weightType(*s.table2) : "");
}

std::string EmbeddingSpec::entry() const {
  return "minfer::embedding<" + std::to_string(dim) + ", " + embeddingTypes(*this) + ">";
}

LaunchDims EmbeddingSpec::launch(int64_t rows) const { return rowBlocks(rows, threads); }

llvm::json::Object EmbeddingSpec::toJSON() const {
  llvm::json::Object o{{"family", "embedding"}, {"dim", dim}, {"table", ir::dtypeName(table)}, {"threads", threads}};
  if (table2) o["table2"] = ir::dtypeName(*table2);
  return o;
}

llvm::Error EmbeddingSpec::verify() const {
  if (dim <= 0) return specError(name(), "dim must be positive");
  if (!ir::isFloat(table) || (table2 && !ir::isFloat(*table2)))
    return specError(name(), "the tables must be bf16, f16 or f32");
  return llvm::Error::success();
}

std::shared_ptr<KernelSpec> EmbeddingSpec::asTask(int t, int /*grid*/) const {
  if (t <= 0 || t % 32 != 0 || t > 1024) return nullptr;
  auto task = std::make_shared<EmbeddingSpec>(*this);
  task->threads = t;
  return task;
}

std::string EmbeddingSpec::taskType() const {
  return "minfer::EmbeddingTask<" + std::to_string(dim) + ", " + embeddingTypes(*this) + ">";
}

// ---- PointwiseSpec --------------------------------------------------------------------------------------

std::optional<PointwiseOp> pointwiseOpOf(ir::OpKind kind) {
  switch (kind) {
  case ir::OpKind::Scale: return PointwiseOp::Scale;
  case ir::OpKind::GeluTanh: return PointwiseOp::GeluTanh;
  case ir::OpKind::GeluErf: return PointwiseOp::GeluErf;
  case ir::OpKind::Silu: return PointwiseOp::Silu;
  case ir::OpKind::Relu: return PointwiseOp::Relu;
  case ir::OpKind::Add: return PointwiseOp::Add;
  case ir::OpKind::Mul: return PointwiseOp::Mul;
  default: return std::nullopt;
  }
}

bool isBinary(PointwiseOp op) { return op == PointwiseOp::Add || op == PointwiseOp::Mul || op == PointwiseOp::SiluMul; }

const char *pointwiseOpName(PointwiseOp op) {
  switch (op) {
  case PointwiseOp::Scale: return "scale";
  case PointwiseOp::GeluTanh: return "gelu_tanh";
  case PointwiseOp::GeluErf: return "gelu_erf";
  case PointwiseOp::Silu: return "silu";
  case PointwiseOp::Relu: return "relu";
  case PointwiseOp::Add: return "add";
  case PointwiseOp::Mul: return "mul";
  case PointwiseOp::SiluMul: return "silu_mul";
  }
  return "?";
}

namespace {
// The policy type in templates/pointwise.cuh.
const char *pointwisePolicy(PointwiseOp op) {
  switch (op) {
  case PointwiseOp::Scale: return "minfer::pw::Scale";
  case PointwiseOp::GeluTanh: return "minfer::pw::GeluTanh";
  case PointwiseOp::GeluErf: return "minfer::pw::GeluErf";
  case PointwiseOp::Silu: return "minfer::pw::Silu";
  case PointwiseOp::Relu: return "minfer::pw::Relu";
  case PointwiseOp::Add: return "minfer::pw::Add";
  case PointwiseOp::Mul: return "minfer::pw::Mul";
  case PointwiseOp::SiluMul: return "minfer::pw::SiluMul";
  }
  return "?";
}
} // namespace

std::string PointwiseSpec::name() const { return "pointwise_" + std::string(pointwiseOpName(op)) + "_c" + std::to_string(cols); }

std::string PointwiseSpec::entry() const {
  return std::string("minfer::") + (isBinary(op) ? "binary<" : "unary<") + pointwisePolicy(op) + ", " +
         std::to_string(cols) + ">";
}

LaunchDims PointwiseSpec::launch(int64_t rows) const {
  // One 16-byte vector per thread; the kernel's grid-stride loop makes any grid correct, and the cap is
  // only the hardware's limit on grid.x.
  return gridStride(std::max<int64_t>(rows, 0) * (cols / vecWidth(cols)), threads, 0x7fffffff);
}

std::shared_ptr<KernelSpec> PointwiseSpec::asTask(int t, int /*grid*/) const {
  if (t <= 0 || t % 32 != 0 || t > 1024) return nullptr;
  auto task = std::make_shared<PointwiseSpec>(*this);
  task->threads = static_cast<unsigned>(t);
  return task;
}

std::string PointwiseSpec::taskType() const {
  return std::string("minfer::PointwiseTask<") + pointwisePolicy(op) + ", " + std::to_string(cols) + ", " +
         std::to_string(threads) + (isBinary(op) ? ", true>" : ", false>");
}

llvm::json::Object PointwiseSpec::toJSON() const {
  return llvm::json::Object{{"family", "pointwise"}, {"op", pointwiseOpName(op)}, {"cols", cols}};
}

llvm::Error PointwiseSpec::verify() const {
  if (cols <= 0) return specError(name(), "cols must be positive");
  if (threads != kThreads) return specError(name(), "threads must be " + llvm::Twine(kThreads) + " as a kernel of its own");
  return llvm::Error::success();
}

// ---- RopeSpec and KvWriteSpec ---------------------------------------------------------------------------

RopeSpec::RopeSpec(int64_t heads, int64_t headDim, RopeStyle style)
    : heads(heads), headDim(headDim), style(style), threads(ropeThreads(heads, std::max<int64_t>(headDim, 2), style)) {}

std::string RopeSpec::name() const {
  return std::string("rope_") + ir::enumText(style).str() + "_h" + std::to_string(heads) + "_d" + std::to_string(headDim);
}

std::string RopeSpec::entry() const {
  return "minfer::rope<" + std::to_string(heads) + ", " + std::to_string(headDim) + ", " + styleEnum(style) + ">";
}

LaunchDims RopeSpec::launch(int64_t rows) const { return rowBlocks(rows, threads); }

llvm::json::Object RopeSpec::toJSON() const {
  return llvm::json::Object{{"family", "rope"}, {"heads", heads}, {"head_dim", headDim}, {"style", ir::enumText(style).str()},
                            {"threads", threads}};
}

llvm::Error RopeSpec::verify() const {
  if (heads <= 0 || headDim <= 0) return specError(name(), "heads and head_dim must be positive");
  if (headDim % 2) return specError(name(), "head_dim must be even to rotate pairs");
  return llvm::Error::success();
}

KvWriteSpec::KvWriteSpec(int64_t kvHeads, int64_t headDim, std::optional<RopeStyle> rope)
    : kvHeads(kvHeads), headDim(headDim), rope(rope) {
  int64_t kvd = std::max<int64_t>(kvHeads * headDim, 1);
  threads = wholeWarps(kvd / vecWidth(kvd), 256);
  if (rope) threads = std::max(threads, ropeThreads(kvHeads, std::max<int64_t>(headDim, 2), *rope));
}

std::string KvWriteSpec::name() const {
  std::string n = rope ? std::string("rope_kv_write_") + ir::enumText(*rope).str() : std::string("kv_write");
  return n + "_h" + std::to_string(kvHeads) + "_d" + std::to_string(headDim);
}

std::string KvWriteSpec::entry() const {
  std::string dims = std::to_string(kvHeads) + ", " + std::to_string(headDim);
  return rope ? "minfer::rope_kv_write<" + dims + ", " + styleEnum(*rope) + ">" : "minfer::kv_write<" + dims + ">";
}

LaunchDims KvWriteSpec::launch(int64_t rows) const { return rowBlocks(rows, threads); }

llvm::json::Object KvWriteSpec::toJSON() const {
  llvm::json::Object o{{"family", "kv_write"}, {"kv_heads", kvHeads}, {"head_dim", headDim}, {"threads", threads}};
  o["rope"] = rope ? llvm::json::Value(ir::enumText(*rope).str()) : llvm::json::Value(nullptr);
  return o;
}

llvm::Error KvWriteSpec::verify() const {
  if (kvHeads <= 0 || headDim <= 0) return specError(name(), "kv_heads and head_dim must be positive");
  if (rope && headDim % 2) return specError(name(), "head_dim must be even to rotate pairs");
  return llvm::Error::success();
}

// ---- ArgmaxSpec and SampleSpec --------------------------------------------------------------------------

std::string ArgmaxSpec::name() const { return "argmax_v" + std::to_string(vocab) + "_t" + std::to_string(threads); }
std::string ArgmaxSpec::entry() const {
  return "minfer::argmax<" + std::to_string(vocab) + ", " + std::to_string(threads) + ">";
}
LaunchDims ArgmaxSpec::launch(int64_t rows) const { return rowBlocks(rows, threads); }
llvm::json::Object ArgmaxSpec::toJSON() const {
  return llvm::json::Object{{"family", "argmax"}, {"vocab", vocab}, {"threads", threads}};
}
llvm::Error ArgmaxSpec::verify() const {
  if (vocab <= 0 || vocab > 0x7fffffff) return specError(name(), "vocab must be in [1, 2^31)");
  return checkThreads(name(), threads);
}

std::string SampleSpec::name() const { return "sample_v" + std::to_string(vocab) + "_t" + std::to_string(threads); }
std::string SampleSpec::entry() const {
  return "minfer::sample<" + std::to_string(vocab) + ", " + std::to_string(threads) + ">";
}
LaunchDims SampleSpec::launch(int64_t rows) const { return rowBlocks(rows, threads); }
llvm::json::Object SampleSpec::toJSON() const {
  return llvm::json::Object{{"family", "sample"}, {"vocab", vocab}, {"threads", threads}};
}
llvm::Error SampleSpec::verify() const {
  if (vocab < 2 || vocab >= (int64_t(1) << 24)) return specError(name(), "vocab must be in [2, 2^24)");
  return checkThreads(name(), threads);
}

AdvanceSpec AdvanceSpec::forBatch(int64_t batch) {
  return AdvanceSpec(static_cast<int>(std::clamp<int64_t>((batch + 31) / 32 * 32, 32, 1024)));
}
std::string AdvanceSpec::name() const { return "advance_tokens_t" + std::to_string(threads); }
std::string AdvanceSpec::entry() const { return "minfer::advance_tokens<" + std::to_string(threads) + ">"; }
LaunchDims AdvanceSpec::launch(int64_t) const {
  LaunchDims d;
  d.block[0] = static_cast<unsigned>(threads);
  return d;
}
llvm::json::Object AdvanceSpec::toJSON() const { return llvm::json::Object{{"family", "advance"}, {"threads", threads}}; }
llvm::Error AdvanceSpec::verify() const { return checkThreads(name(), threads); }

// ---- the sampling algorithm on the host -----------------------------------------------------------------

namespace {

uint64_t splitmix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// sampling.cuh orderKey.
unsigned orderKey(uint16_t bits) {
  unsigned b = bits;
  if ((b & 0x7FFFu) > 0x7F80u) return 0;
  if (b == 0x8000u) b = 0;
  return (b & 0x8000u) ? (~b & 0xFFFFu) : (b | 0x8000u);
}

// sampling.cuh fixedWeight: round_to_nearest_even(expf(d * invT) * 2^40).
uint64_t fixedWeight(float l, float m, float invT) {
  float d = (l == m) ? 0.f : l - m;
  float w = std::exp(d * invT);
  if (!(w > 0.f)) return 0;
  return static_cast<uint64_t>(std::nearbyint(w * 1099511627776.0f));
}

int32_t argmaxOf(llvm::ArrayRef<uint16_t> logits) {
  int32_t best = -1;
  float bestV = -INFINITY;
  for (size_t i = 0; i < logits.size(); ++i) {
    float v = bf16ToFloat(logits[i]);
    if (v > bestV) {
      bestV = v;
      best = static_cast<int32_t>(i);
    }
  }
  return best < 0 ? 0 : best;
}

struct Kept {
  bool argmax = true; // the draw is the argmax (no weights)
  std::vector<uint64_t> w; // per token: W when kept, else 0
  uint64_t total = 0;
  double topPMargin = INFINITY;
};

// Steps 0-6 of the algorithm: which tokens are kept, with which weights.
Kept keptSet(llvm::ArrayRef<uint16_t> logits, const SampleSettings &p) {
  Kept out;
  const size_t V = logits.size();
  const uint64_t k = (p.topK <= 0 || static_cast<uint64_t>(p.topK) >= V) ? V : static_cast<uint64_t>(p.topK);
  if (!(p.temperature > 0.f) || k == 1) return out;
  float m = -INFINITY;
  for (uint16_t b : logits) m = std::fmax(m, bf16ToFloat(b));
  if (!(m > -INFINITY)) return out;
  const float invT = 1.f / p.temperature;

  std::vector<uint32_t> order(V);
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return orderKey(logits[a]) > orderKey(logits[b]); });
  std::vector<uint64_t> w(V);
  for (size_t i = 0; i < V; ++i) w[i] = fixedWeight(bf16ToFloat(logits[i]), m, invT);

  uint64_t sk = 0;
  for (uint64_t n = 0; n < k; ++n) sk += w[order[n]];
  uint64_t kept = k;
  if (p.topP > 0.f && p.topP < 1.f) {
    const double P = static_cast<double>(p.topP) * static_cast<double>(sk);
    uint64_t prefix = 0, n = 0;
    while (n < k && !(static_cast<double>(prefix) >= P)) prefix += w[order[n++]];
    kept = std::max<uint64_t>(n, 1);
    double before = static_cast<double>(prefix - w[order[kept - 1]]);
    out.topPMargin = std::min(static_cast<double>(prefix) - P, P - before) / static_cast<double>(sk);
  }
  out.w.assign(V, 0);
  for (uint64_t n = 0; n < kept; ++n) {
    out.w[order[n]] = w[order[n]];
    out.total += w[order[n]];
  }
  out.argmax = out.total == 0;
  return out;
}

} // namespace

uint64_t sampleRandomBits(uint64_t seed, uint64_t step, uint64_t row) {
  return splitmix64(splitmix64(splitmix64(seed) ^ step) ^ row);
}

SampleOutcome sampleReference(llvm::ArrayRef<uint16_t> logits, const SampleSettings &params, uint64_t row) {
  SampleOutcome out;
  Kept kept = keptSet(logits, params);
  if (kept.argmax) {
    out.token = argmaxOf(logits);
    return out;
  }
  out.topPMargin = kept.topPMargin;
  const double u = static_cast<double>(sampleRandomBits(params.seed, params.step, row) >> 11) * 0x1p-53;
  const double x = u * static_cast<double>(kept.total);
  uint64_t target = std::min(static_cast<uint64_t>(x), kept.total - 1);
  uint64_t cum = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!kept.w[i]) continue;
    cum += kept.w[i];
    if (cum > target) {
      out.token = static_cast<int32_t>(i);
      out.drawMargin = std::min(x - static_cast<double>(cum - kept.w[i]), static_cast<double>(cum) - x) /
                       static_cast<double>(kept.total);
      return out;
    }
  }
  out.token = argmaxOf(logits); // unreachable: target < total
  return out;
}

std::vector<double> sampleDistribution(llvm::ArrayRef<uint16_t> logits, const SampleSettings &params) {
  std::vector<double> prob(logits.size(), 0.0);
  Kept kept = keptSet(logits, params);
  if (kept.argmax) {
    if (!logits.empty()) prob[argmaxOf(logits)] = 1.0;
    return prob;
  }
  for (size_t i = 0; i < logits.size(); ++i) prob[i] = static_cast<double>(kept.w[i]) / static_cast<double>(kept.total);
  return prob;
}

MINFER_PARAMS_LAYOUT(NormParams,
                     MINFER_FIELD(a, Ptr), MINFER_FIELD(b, Ptr), MINFER_FIELD(gamma, Ptr), MINFER_FIELD(beta, Ptr),
                     MINFER_FIELD(sum, Ptr), MINFER_FIELD(y, Ptr), MINFER_FIELD(rows, I32), MINFER_FIELD(eps, F32))

MINFER_PARAMS_LAYOUT(PointwiseParams,
                     MINFER_FIELD(a, Ptr), MINFER_FIELD(b, Ptr), MINFER_FIELD(y, Ptr), MINFER_FIELD(rows, I32),
                     MINFER_FIELD(arg, F32))

MINFER_PARAMS_LAYOUT(EmbeddingParams,
                     MINFER_FIELD(ids, Ptr), MINFER_FIELD(table, Ptr), MINFER_FIELD(out, Ptr),
                     MINFER_FIELD(rows, I32), MINFER_FIELD(table_rows, I32), MINFER_FIELD(ids2, Ptr),
                     MINFER_FIELD(table2, Ptr), MINFER_FIELD(table2_rows, I32))

MINFER_PARAMS_LAYOUT(RopeParams,
                     MINFER_FIELD(x, Ptr), MINFER_FIELD(y, Ptr), MINFER_FIELD(positions, Ptr),
                     MINFER_FIELD(inv_freq, Ptr), MINFER_FIELD(rows, I32))

MINFER_PARAMS_LAYOUT(KvWriteParams,
                     MINFER_FIELD(k, Ptr), MINFER_FIELD(v, Ptr), MINFER_FIELD(k_cache, Ptr),
                     MINFER_FIELD(v_cache, Ptr), MINFER_FIELD(seq_of, Ptr), MINFER_FIELD(pos_of, Ptr),
                     MINFER_FIELD(inv_freq, Ptr), MINFER_FIELD(rows, I32), MINFER_FIELD(max_seq, I32))

MINFER_PARAMS_LAYOUT(ArgmaxParams, MINFER_FIELD(logits, Ptr), MINFER_FIELD(out, Ptr), MINFER_FIELD(rows, I32))

MINFER_PARAMS_LAYOUT(SampleParams,
                     MINFER_FIELD(logits, Ptr), MINFER_FIELD(out, Ptr), MINFER_FIELD(rows, I32),
                     MINFER_FIELD(temperature, F32), MINFER_FIELD(top_k, I32), MINFER_FIELD(top_p, F32),
                     MINFER_FIELD(seed, U64), MINFER_FIELD(step, U64), MINFER_FIELD(step_offset, Ptr))

MINFER_PARAMS_LAYOUT(AdvanceParams,
                     MINFER_FIELD(next, Ptr), MINFER_FIELD(tokens, Ptr), MINFER_FIELD(positions, Ptr),
                     MINFER_FIELD(context_len, Ptr), MINFER_FIELD(history, Ptr), MINFER_FIELD(step, Ptr),
                     MINFER_FIELD(rows, I32), MINFER_FIELD(history_steps, I32), MINFER_FIELD(keys, Ptr))

} // namespace minfer
