// bench/RowOpsBench.cpp — suite "rowops": the row-wise kernels at decode sizes (1 to 16 rows) and prefill
// sizes (2048 rows), each reported as the bytes it must move against the copy-bandwidth ceiling.
//
//   rms_norm / layer_norm (and the fused residual form)  dim 2048, 4096      rows 1, 2048
//   embedding (a 32000-row bf16 table)                   dim 2048, 4096      rows 1, 2048
//   rope (Llama-2-7B q: 32 x 128; TinyLlama k: 4 x 64)   half style          rows 1, 2048
//   rope_kv_write (8 x 128), pointwise silu_mul (5632)                       rows 1, 2048
//   argmax                                               vocab 32000, 151936 rows 1, 2, 4, 8, 16
//   sample (T 0.8, top-k 50, top-p 0.95; T 1, top-p 0.9) vocab 32000, 151936 rows 1, 16
//
// Bytes are what the kernel must read and write at least (the activations, the weights it reads, the
// table rows it gathers, one read of the logits); at one row every kernel is far below the bandwidth
// ceiling (a 4 KB row is latency, not bandwidth), so those rows show launch-to-finish latency. The sampling
// kernel re-reads its row from L2 in several passes; its bytes still count one read. Shapes use NAME=INT
// pairs (rows, dim, heads, head_dim, vocab); the baseline kinds (rms_norm, layer_norm, embedding, rope,
// argmax, sample, ...) have no PyTorch counterpart in bench/torch_baseline.py yet, so they are listed as
// skipped there.
#include "bench/Bench.h"
#include "runtime/KernelLoader.h"
#include "jit/KernelCache.h"
#include "io/Safetensors.h"
#include "compiler/kernels/RowOps.h"
#include "tests/common/RandomBf16.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <sstream>

namespace minfer::bench {
namespace {

llvm::Error fail(const llvm::Twine &msg) { return llvm::createStringError(llvm::inconvertibleErrorCode(), msg); }

// randomBf16Bits(n, seed[, stddev]): random bf16 values N(0, stddev) (finite, never all equal: data-dependent
// kernels such as sampling do their real work), the same bits in every copy.
using test::randomBf16Bits;

template <typename T> llvm::Expected<cuda::DeviceBuffer> upload(const std::vector<T> &v) {
  auto b = cuda::DeviceBuffer::alloc(std::max<size_t>(v.size() * sizeof(T), 16));
  if (!b) return b.takeError();
  if (!v.empty())
    if (auto e = b->upload(v.data(), v.size() * sizeof(T))) return e;
  return b;
}

// Holds a benchmark's buffers alive and times `spec` over `rows`, rotating through the argument sets.
struct Bench {
  std::vector<cuda::DeviceBuffer> buffers;
  std::vector<std::function<llvm::Error(const LoadedKernel &, const KernelSpec &, int64_t)>> launches;

  // One more set of arguments to rotate through: the kernel's Params struct.
  template <typename P> void add(const P &params) {
    launches.push_back([params](const LoadedKernel &k, const KernelSpec &spec, int64_t rows) {
      return launchKernel(k.fn, spec, rows, params);
    });
  }

  llvm::Expected<cuda::DevicePtr> keep(llvm::Expected<cuda::DeviceBuffer> b) {
    if (!b) return b.takeError();
    buffers.push_back(std::move(*b));
    return buffers.back().ptr();
  }

  llvm::Expected<Result> time(const KernelSpec &spec, int64_t rows, double bytes, std::string shape,
                              std::string baseline) {
    auto k = loadKernel(spec);
    if (!k) return k.takeError();
    auto ms = timeMedian([&](int i) { return launches[i % launches.size()](*k, spec, rows); });
    if (!ms) return ms.takeError();
    if (auto e = cuda::synchronize()) return e;
    Result r;
    r.kernel = spec.name();
    r.shape = std::move(shape);
    r.ms = *ms;
    r.bytes = bytes;
    r.baseline = std::move(baseline);
    return r;
  }
};

#define BENCH_TRY(var, expr)                                                                                 \
  auto var##OrErr = (expr);                                                                                  \
  if (!var##OrErr) return var##OrErr.takeError();                                                            \
  auto var = *var##OrErr

llvm::Expected<Result> benchNorm(NormKind kind, NormFusion fusion, int64_t dim, int64_t rows) {
  NormSpec spec(kind, dim, ir::DType::BF16, fusion);
  const bool layer = kind == NormKind::Layer, fused = fusion == NormFusion::ResidualAdd;
  const size_t act = size_t(rows) * dim * 2;
  const int copies = copiesFor(fused ? 2.0 * act : act);
  Bench b;
  BENCH_TRY(gamma, b.keep(upload(randomBf16Bits(dim, 1))));
  BENCH_TRY(beta, b.keep(upload(randomBf16Bits(dim, 2))));
  BENCH_TRY(y, b.keep(cuda::DeviceBuffer::alloc(act)));
  BENCH_TRY(s, b.keep(cuda::DeviceBuffer::alloc(act)));
  std::vector<uint16_t> data = randomBf16Bits(size_t(rows) * dim, 3);
  for (int c = 0; c < copies; ++c) {
    BENCH_TRY(x, b.keep(upload(data)));
    BENCH_TRY(r, b.keep(upload(data)));
    NormParams p{.a = x, .gamma = gamma, .y = y, .rows = int(rows), .eps = 1e-5f};
    if (fused) p.b = r, p.sum = s;
    if (layer) p.beta = beta;
    b.add(p);
  }
  // Read x (and r), write y (and s), read the gains once.
  double bytes = (fused ? 4.0 : 2.0) * act + (layer ? 2.0 : 1.0) * dim * 2;
  std::string baseline = std::string(layer ? "layer_norm" : "rms_norm") + (fused ? "_residual" : "");
  return b.time(spec, rows, bytes, "rows=" + std::to_string(rows) + " dim=" + std::to_string(dim), baseline);
}

llvm::Expected<Result> benchEmbedding(int64_t dim, int64_t rows) {
  constexpr int64_t kTableRows = 32000; // Llama-2's vocabulary
  EmbeddingSpec spec(dim, ir::DType::BF16);
  Bench b;
  BENCH_TRY(table, b.keep(upload(randomBf16Bits(size_t(kTableRows) * dim, 4))));
  BENCH_TRY(out, b.keep(cuda::DeviceBuffer::alloc(size_t(rows) * dim * 2)));
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> pick(0, int(kTableRows) - 1);
  for (int c = 0; c < 4; ++c) { // the table is 128-256 MiB: other ids each run keep gathered rows out of L2
    std::vector<int32_t> ids(rows);
    for (auto &i : ids) i = pick(rng);
    BENCH_TRY(idBuf, b.keep(upload(ids)));
    b.add(EmbeddingParams{.ids = idBuf, .table = table, .out = out, .rows = int(rows), .table_rows = int(kTableRows)});
  }
  double bytes = 2.0 * rows * dim * 2 + rows * 4.0;
  return b.time(spec, rows, bytes, "rows=" + std::to_string(rows) + " dim=" + std::to_string(dim), "embedding");
}

// ropeInverseFrequencies of the default schedule, theta 10000.
std::vector<float> defaultInvFreq(int64_t headDim) {
  std::vector<float> f(headDim / 2);
  for (int64_t i = 0; i < headDim / 2; ++i) f[i] = float(1.0 / std::pow(10000.0, double(2 * i) / headDim));
  return f;
}

std::vector<int32_t> positions(int64_t rows) {
  std::vector<int32_t> p(rows);
  for (int64_t r = 0; r < rows; ++r) p[r] = int32_t(r + 17);
  return p;
}

llvm::Expected<Result> benchRope(int64_t heads, int64_t headDim, int64_t rows) {
  RopeSpec spec(heads, headDim, RopeStyle::Half);
  const size_t act = size_t(rows) * heads * headDim * 2;
  const int copies = copiesFor(act);
  Bench b;
  BENCH_TRY(freq, b.keep(upload(defaultInvFreq(headDim))));
  BENCH_TRY(pos, b.keep(upload(positions(rows))));
  BENCH_TRY(y, b.keep(cuda::DeviceBuffer::alloc(act)));
  std::vector<uint16_t> data = randomBf16Bits(size_t(rows) * heads * headDim, 6);
  for (int c = 0; c < copies; ++c) {
    BENCH_TRY(x, b.keep(upload(data)));
    b.add(RopeParams{.x = x, .y = y, .positions = pos, .inv_freq = freq, .rows = int(rows)});
  }
  double bytes = 2.0 * act + rows * 4.0;
  return b.time(spec, rows, bytes,
                "rows=" + std::to_string(rows) + " heads=" + std::to_string(heads) + " head_dim=" + std::to_string(headDim),
                "rope");
}

llvm::Expected<Result> benchRopeKvWrite(int64_t kvHeads, int64_t headDim, int64_t rows) {
  KvWriteSpec spec(kvHeads, headDim, RopeStyle::Half);
  const int64_t kvd = kvHeads * headDim, maxSeq = std::max<int64_t>(rows, 4096);
  const size_t act = size_t(rows) * kvd * 2;
  const int copies = copiesFor(2.0 * act);
  Bench b;
  BENCH_TRY(freq, b.keep(upload(defaultInvFreq(headDim))));
  BENCH_TRY(seq, b.keep(upload(std::vector<int32_t>(rows, 0))));
  BENCH_TRY(pos, b.keep(upload(positions(rows))));
  BENCH_TRY(kc, b.keep(cuda::DeviceBuffer::alloc(size_t(maxSeq + 17) * kvd * 2)));
  BENCH_TRY(vc, b.keep(cuda::DeviceBuffer::alloc(size_t(maxSeq + 17) * kvd * 2)));
  std::vector<uint16_t> data = randomBf16Bits(size_t(rows) * kvd, 7);
  for (int c = 0; c < copies; ++c) {
    BENCH_TRY(k, b.keep(upload(data)));
    BENCH_TRY(v, b.keep(upload(data)));
    b.add(KvWriteParams{.k = k, .v = v, .k_cache = kc, .v_cache = vc, .seq_of = seq, .pos_of = pos, .inv_freq = freq,
                        .rows = int(rows), .max_seq = int(maxSeq + 17)});
  }
  double bytes = 4.0 * act + rows * 8.0;
  return b.time(spec, rows, bytes,
                "rows=" + std::to_string(rows) + " kv_heads=" + std::to_string(kvHeads) + " head_dim=" + std::to_string(headDim),
                "rope_kv_write");
}

llvm::Expected<Result> benchSiluMul(int64_t cols, int64_t rows) {
  PointwiseSpec spec(PointwiseOp::SiluMul, cols);
  const size_t act = size_t(rows) * cols * 2;
  const int copies = copiesFor(2.0 * act);
  Bench b;
  BENCH_TRY(y, b.keep(cuda::DeviceBuffer::alloc(act)));
  std::vector<uint16_t> data = randomBf16Bits(size_t(rows) * cols, 8);
  for (int c = 0; c < copies; ++c) {
    BENCH_TRY(gate, b.keep(upload(data)));
    BENCH_TRY(up, b.keep(upload(data)));
    b.add(PointwiseParams{.a = gate, .b = up, .y = y, .rows = int(rows)});
  }
  return b.time(spec, rows, 3.0 * act, "rows=" + std::to_string(rows) + " dim=" + std::to_string(cols), "silu_mul");
}

// Logits N(0, 3): the spread a language model's logits have, so sampling's candidate sets are realistic.
llvm::Expected<Result> benchArgmaxOrSample(int64_t vocab, int64_t rows, const SampleSettings *sample) {
  std::unique_ptr<KernelSpec> spec;
  if (sample) spec = std::make_unique<SampleSpec>(vocab);
  else spec = std::make_unique<ArgmaxSpec>(vocab);
  const size_t bytes = size_t(rows) * vocab * 2;
  const int copies = copiesFor(double(bytes));
  Bench b;
  BENCH_TRY(out, b.keep(cuda::DeviceBuffer::alloc(rows * 4)));
  std::vector<uint16_t> data = randomBf16Bits(size_t(rows) * vocab, 9, 3.f);
  for (int c = 0; c < copies; ++c) {
    BENCH_TRY(logits, b.keep(upload(data)));
    if (sample)
      b.add(SampleParams{.logits = logits, .out = out, .rows = int(rows), .temperature = sample->temperature,
                         .top_k = sample->topK, .top_p = sample->topP, .seed = sample->seed, .step = uint64_t(c)});
    else
      b.add(ArgmaxParams{.logits = logits, .out = out, .rows = int(rows)});
  }
  std::string shape = "rows=" + std::to_string(rows) + " vocab=" + std::to_string(vocab);
  if (sample) {
    std::ostringstream s;
    s << " top_k=" << sample->topK << " top_p_pct=" << int(std::lround(sample->topP * 100));
    shape += s.str();
  }
  return b.time(*spec, rows, double(bytes) + rows * 4.0, shape, sample ? "sample" : "argmax");
}

llvm::Expected<std::vector<Result>> runRowOps(const Ceilings &) {
  std::vector<Result> results;
  auto add = [&](llvm::Expected<Result> r, const std::string &what) -> llvm::Error {
    if (!r) return fail("rowops " + what + ": " + llvm::toString(r.takeError()));
    results.push_back(std::move(*r));
    return llvm::Error::success();
  };
  for (int64_t dim : {2048, 4096})
    for (int64_t rows : {1, 2048}) {
      std::string at = " dim " + std::to_string(dim) + " rows " + std::to_string(rows);
      if (auto e = add(benchNorm(NormKind::Rms, NormFusion::None, dim, rows), "rms_norm" + at)) return e;
      if (auto e = add(benchNorm(NormKind::Layer, NormFusion::None, dim, rows), "layer_norm" + at)) return e;
      if (auto e = add(benchNorm(NormKind::Rms, NormFusion::ResidualAdd, dim, rows), "rms_norm_residual" + at)) return e;
      if (auto e = add(benchEmbedding(dim, rows), "embedding" + at)) return e;
    }
  for (int64_t rows : {1, 2048}) {
    std::string at = " rows " + std::to_string(rows);
    if (auto e = add(benchRope(32, 128, rows), "rope 32x128" + at)) return e;
    if (auto e = add(benchRope(4, 64, rows), "rope 4x64" + at)) return e;
    if (auto e = add(benchRopeKvWrite(8, 128, rows), "rope_kv_write 8x128" + at)) return e;
    if (auto e = add(benchSiluMul(5632, rows), "silu_mul 5632" + at)) return e;
  }
  for (int64_t vocab : {32000, 151936}) {
    for (int64_t rows : {1, 2, 4, 8, 16})
      if (auto e = add(benchArgmaxOrSample(vocab, rows, nullptr), "argmax vocab " + std::to_string(vocab))) return e;
    const SampleSettings settings[] = {{0.8f, 50, 0.95f, 1, 0}, {1.0f, 0, 0.9f, 1, 0}};
    for (const SampleSettings &p : settings)
      for (int64_t rows : {1, 16})
        if (auto e = add(benchArgmaxOrSample(vocab, rows, &p), "sample vocab " + std::to_string(vocab))) return e;
  }
  return results;
}

Registration registration("rowops", runRowOps);

} // namespace
} // namespace minfer::bench
