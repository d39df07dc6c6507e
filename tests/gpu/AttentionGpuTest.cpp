// tests/gpu/AttentionGpuTest.cpp — the attention kernels against the interpreter's `attention` op on a GPU
// (CTest label `gpu`; skipped with the reason when there is none).
//
// Every case draws random bf16 q, k, v (never zeros), builds the reference with ir::evalOp over a KvCache
// holding the earlier positions, and runs the kernel on a device cache where *only* the written positions
// hold data: everything else (later positions, other sequences) is 0xFF bytes, bf16 NaN, so a kernel that
// reads past a context or into the wrong sequence produces NaN. Outputs are poisoned the same way, so an
// unwritten element shows. On a mismatch the failure names where: NaN rows, the worst (row, head) pairs
// and the heads and rows whose error stands out — masking, tail, GQA-mapping and split bugs each leave a
// recognisable pattern.
#include "GpuHarness.h"
#include "common/TestModels.h"
#include "compiler/kernels/Attention.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <sstream>

namespace minfer {
namespace {

struct HeadConfig {
  int heads, kvHeads, headDim;
};

// Llama-2-7B, TinyLlama, Qwen2.5-0.5B, and the test fixtures' shapes (MQA 4/1/32, GQA 4/2/16, 8/8/8).
// 4/2/80 is padded to 128 columns by the wgmma prefill kernel. 32/1/64 is a group of 32 query heads: decode
// attention takes it in two passes of 16.
const HeadConfig kConfigs[] = {{32, 32, 128}, {8, 8, 96}, {32, 4, 64}, {14, 2, 64}, {4, 2, 80},
                               {4, 1, 32},    {2, 2, 24}, {4, 2, 16}, {8, 8, 8},   {32, 1, 64}};

std::string configText(const HeadConfig &c) {
  std::ostringstream s;
  s << "h" << c.heads << "_kv" << c.kvHeads << "_d" << c.headDim;
  return s.str();
}
std::string configName(const testing::TestParamInfo<HeadConfig> &info) { return configText(info.param); }
// CTest lists a parameterised test with its parameter: printed by name, not as bytes.
[[maybe_unused]] void PrintTo(const HeadConfig &c, std::ostream *os) { *os << configText(c); }

// A module whose one attention op has the config's heads; the rest only feeds it types.
struct AttentionModule {
  std::unique_ptr<ir::Module> module;
  const ir::Op *op = nullptr;
};

AttentionModule attentionModule(const HeadConfig &c) {
  int qDim = c.heads * c.headDim, kvDim = c.kvHeads * c.headDim, all = qDim + 2 * kvDim;
  std::ostringstream s;
  s << "model \"attention_test\"\n"
    << "weight @table : bf16[1, " << all << "] = \"table\"\n"
    << "graph(%tokens: i32[T]) {\n"
    << "  %x = embedding %tokens, @table : bf16[T, " << all << "]\n"
    << "  %q, %k, %v = split %x {sizes = [" << qDim << ", " << kvDim << ", " << kvDim << "]} : bf16[T, " << qDim
    << "], bf16[T, " << kvDim << "], bf16[T, " << kvDim << "]\n"
    << "  %y = attention %q, %k, %v {heads = " << c.heads << ", kv_heads = " << c.kvHeads
    << ", head_dim = " << c.headDim << "} : bf16[T, " << qDim << "]\n"
    << "  return %y\n}\n";
  AttentionModule m;
  m.module = test::parseVerified(s.str());
  if (!m.module) return m;
  for (const ir::Item &item : m.module->items)
    if (const ir::Op *op = std::get_if<ir::Op>(&item); op && op->kind == ir::OpKind::Attention) m.op = op;
  return m;
}

// Rows [from, to) of a [rows, cols] tensor.
ir::Tensor sliceRows(const ir::Tensor &t, int64_t from, int64_t to) {
  ir::Tensor out({to - from, t.cols()});
  std::copy(t.row(from), t.row(to), out.data.begin());
  return out;
}

// Where a [rows, heads * headDim] result differs from the reference: NaN rows, the worst (row, head) pairs,
// and the heads / rows whose error is far above the rest. `rowName(r)` labels a row ("row 5 (position 42)").
std::string diagnose(const ir::Tensor &got, const ir::Tensor &ref, int heads, int headDim,
                     const std::function<std::string(int64_t)> &rowName) {
  std::ostringstream s;
  int64_t rows = ref.rows();
  struct Cell {
    double err, num, den;
    int64_t row;
    int head;
    size_t nans;
  };
  std::vector<Cell> cells;
  std::vector<double> headNum(heads), headDen(heads);
  std::vector<int64_t> nanRows;
  for (int64_t r = 0; r < rows; ++r) {
    for (int h = 0; h < heads; ++h) {
      Cell c{0, 0, 0, r, h, 0};
      for (int d = 0; d < headDim; ++d) {
        size_t i = size_t(r) * heads * headDim + size_t(h) * headDim + d;
        float g = got.data[i], e = ref.data[i];
        if (std::isnan(g)) {
          ++c.nans;
          continue;
        }
        c.num += (double(g) - e) * (double(g) - e);
        c.den += double(e) * e;
      }
      c.err = c.nans ? INFINITY : std::sqrt(c.num / std::max(c.den, 1e-30));
      headNum[h] += c.num;
      headDen[h] += c.den;
      if (c.nans && (nanRows.empty() || nanRows.back() != r)) nanRows.push_back(r);
      cells.push_back(c);
    }
  }
  if (!nanRows.empty()) {
    s << "\n  NaN (unwritten, or read from poisoned cache) in " << nanRows.size() << " of " << rows << " rows:";
    for (size_t i = 0; i < std::min<size_t>(nanRows.size(), 8); ++i) s << " " << rowName(nanRows[i]);
    if (nanRows.size() > 8) s << " ... " << rowName(nanRows.back());
  }
  std::sort(cells.begin(), cells.end(), [](const Cell &a, const Cell &b) { return a.err > b.err; });
  s << "\n  worst (row, head) pairs:";
  for (size_t i = 0; i < std::min<size_t>(cells.size(), 5); ++i) {
    const Cell &c = cells[i];
    size_t at = size_t(c.row) * heads * headDim + size_t(c.head) * headDim;
    s << "\n    " << rowName(c.row) << " head " << c.head << ": rel err " << c.err << " (" << c.nans
      << " NaN); got[0..3] = " << got.data[at] << ", " << got.data[at + 1] << ", " << got.data[at + 2]
      << "; ref[0..3] = " << ref.data[at] << ", " << ref.data[at + 1] << ", " << ref.data[at + 2];
  }
  s << "\n  per-head rel err:";
  for (int h = 0; h < heads; ++h) s << " " << std::sqrt(headNum[h] / std::max(headDen[h], 1e-30));
  return s.str();
}

void expectClose(const ir::Tensor &got, const ir::Tensor &ref, const HeadConfig &c, const std::string &what,
                 const std::function<std::string(int64_t)> &rowName) {
  gputest::expectMatches(got, ref, gputest::kBf16Tolerance, what);
  if (gputest::countNaN(got) != 0 || !(gputest::relError(got, ref) < gputest::kBf16Tolerance))
    ADD_FAILURE() << what << ": where it differs:" << diagnose(got, ref, c.heads, c.headDim, rowName);
}

// Compiled kernels by spec name: each spec is compiled once per test binary.
llvm::Expected<const gputest::GpuKernel *> kernelFor(const KernelSpec &spec) {
  static std::map<std::string, std::unique_ptr<gputest::GpuKernel>> built;
  auto it = built.find(spec.name());
  if (it != built.end()) return it->second.get();
  auto k = gputest::buildKernel(spec);
  if (!k) return k.takeError();
  auto owned = std::make_unique<gputest::GpuKernel>(std::move(*k));
  const gputest::GpuKernel *p = owned.get();
  built.emplace(spec.name(), std::move(owned));
  return p;
}

// A bf16 device buffer of `numel` elements, all NaN, with `t`'s rows uploaded from element `offset` on.
llvm::Error uploadRowsAt(cuda::DeviceBuffer &buf, const ir::Tensor &t, size_t offset) {
  if (t.data.empty()) return llvm::Error::success();
  std::vector<uint16_t> bits = gputest::toBf16(t);
  return buf.upload(bits.data(), bits.size() * 2, offset * 2);
}

// What the prefill and decode tests share: a GPU (else the test is skipped), the head config `c` with its
// q and k/v widths and softmax scale, and the module of its attention op (the reference).
class AttentionGpu : public testing::TestWithParam<HeadConfig> {
protected:
  void SetUp() override {
    MINFER_REQUIRE_GPU();
    m = attentionModule(c);
    ASSERT_TRUE(m.op);
  }

  const HeadConfig c = GetParam();
  const int qDim = c.heads * c.headDim, kvDim = c.kvHeads * c.headDim;
  const float scale = 1.0f / std::sqrt(float(c.headDim));
  AttentionModule m;
};

// ---- prefill ----------------------------------------------------------------------------------------------

class AttentionPrefillGpu : public AttentionGpu {};

// rows {1, 17, 64, 150, 200, 300} x start_pos {0, 37} x every tile the autotuner may pick on this GPU
// (mma.sync: 64 / 128 rows x 32 / 64 keys; on sm_90a the wgmma tiles too): one row, a partial row tile, an
// exact tile, a 192-row tile whose third consumer has a few rows (150), several tiles with a tail, and enough
// key tiles to go round the wgmma kernel's ring; a fresh prompt and a continuation whose first rows see
// cached keys outside the diagonal. From 150 rows also keys that grow with their position (x (1 + pos / 32)),
// so that a row's max grows by far more than the wgmma kernel's lazy max lets pass (RowState::kLazyMax) from
// one key tile to the next: its rescale runs mid-row, where random keys alone hardly ever take it past the
// first tile.
TEST_P(AttentionPrefillGpu, MatchesInterpreter) {
  std::mt19937 rng(1234 + c.heads * 7 + c.headDim);

  GPU_TRY(target, gputest::deviceTarget());
  const std::vector<AttentionPrefillSpec> tiles =
      AttentionPrefillSpec::candidates(c.heads, c.kvHeads, c.headDim, &target);
  for (int rows : {1, 17, 64, 150, 200, 300}) {
    for (int start : {0, 37}) {
      for (bool growing : {false, true}) {
        if (growing && rows < 150) continue;
        const int total = start + rows;
        const int maxSeq = total + 5; // a few poisoned positions past the context
        ir::Tensor q = gputest::randomBf16({rows, qDim}, rng);
        ir::Tensor k = gputest::randomBf16({total, kvDim}, rng), v = gputest::randomBf16({total, kvDim}, rng);
        if (growing)
          for (int64_t pos = 0; pos < total; ++pos)
            for (int64_t i = 0; i < kvDim; ++i)
              k.row(pos)[i] = bf16ToFloat(floatToBf16(k.row(pos)[i] * (1.f + pos / 32.f)));

        // Reference: the cache holds positions 0 .. start-1; the op appends this step's rows.
        ir::KvCache cache;
        if (start > 0) {
          cache.k = sliceRows(k, 0, start);
          cache.v = sliceRows(v, 0, start);
        }
        ir::Tensor kNew = sliceRows(k, start, total), vNew = sliceRows(v, start, total);
        auto ref = ir::evalOp(*m.module, *m.op, {&q, &kNew, &vNew}, &cache);
        ASSERT_TRUE(bool(ref)) << llvm::toString(ref.takeError());

        // Device: a cache of two sequences, the data in sequence 1; sequence 0 stays NaN, so reading the
        // wrong slab (an offset bug) shows too.
        const size_t slab = size_t(maxSeq) * kvDim;
        cuda::DeviceBuffer kc = gputest::takeOrFail(gputest::poisonedBf16(2 * slab), "k cache");
        cuda::DeviceBuffer vc = gputest::takeOrFail(gputest::poisonedBf16(2 * slab), "v cache");
        cuda::DeviceBuffer qd = gputest::takeOrFail(gputest::uploadBf16(q), "q");
        ASSERT_FALSE(HasFailure());
        MINFER_ASSERT_OK(uploadRowsAt(kc, k, slab));
        MINFER_ASSERT_OK(uploadRowsAt(vc, v, slab));

        for (const AttentionPrefillSpec &spec : tiles) {
          std::string what = spec.name() + " rows=" + std::to_string(rows) + " start_pos=" + std::to_string(start) +
                             (growing ? " keys growing" : "");
          SCOPED_TRACE(what);
          MINFER_ASSERT_OK(spec.validate(target));
          auto kernel = kernelFor(spec);
          ASSERT_TRUE(bool(kernel)) << llvm::toString(kernel.takeError());
          auto out = gputest::poisonedBf16(size_t(rows) * qDim);
          ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());

          AttentionPrefillParams p{.q = qd.ptr(),
                                   .k_cache = kc.ptr() + slab * 2,
                                   .v_cache = vc.ptr() + slab * 2,
                                   .out = out->ptr(),
                                   .rows = int(rows),
                                   .start_pos = int(start),
                                   .scale = float(scale)};
          MINFER_ASSERT_OK(launchKernel((*kernel)->fn, spec, rows, p));
          MINFER_ASSERT_OK(cuda::synchronize());
          auto got = gputest::downloadBf16(*out, {rows, qDim});
          ASSERT_TRUE(bool(got)) << llvm::toString(got.takeError());
          expectClose(*got, (*ref)[0], c, what, [&](int64_t r) {
            return "row " + std::to_string(r) + " (position " + std::to_string(start + r) + ")";
          });
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Heads, AttentionPrefillGpu, testing::ValuesIn(kConfigs), configName);

// ---- decode -----------------------------------------------------------------------------------------------

class AttentionDecodeGpu : public AttentionGpu {};

// A decode launch's buffers: the partials poisoned too (0xFF bytes: fp32 NaN), so a chunk the merge reads but
// no block wrote shows as NaN; the arrival counters at zero, as the session's start; the output poisoned.
struct DecodeBuffers {
  cuda::DeviceBuffer workspace, arrivals, out;
  static llvm::Expected<DecodeBuffers> make(const AttentionDecodeSpec &dec, int batch, int maxSeq, int qDim) {
    auto ws = cuda::DeviceBuffer::alloc(dec.workspaceBytes(batch, maxSeq));
    if (!ws) return ws.takeError();
    auto arrivals = cuda::DeviceBuffer::alloc(dec.arrivalsBytes(batch));
    if (!arrivals) return arrivals.takeError();
    auto out = gputest::poisonedBf16(size_t(batch) * qDim);
    if (!out) return out.takeError();
    if (auto e = ws->fill(0xFF)) return e;
    if (auto e = arrivals->fill(0)) return e;
    return DecodeBuffers{std::move(*ws), std::move(*arrivals), std::move(*out)};
  }
};

// Contexts (including this step's token) per batch: each of 1, 7, 1000, 4096 alone; three sequences of
// different lengths; one chunk whose warps hold 3 or 4 tiles (200) and both sides of the longest one-chunk
// context (256, 257); sixteen spread around the first four values. The cache holds max_seq = 4099 positions a
// sequence (poisoned past each context): not a multiple of any split, so the grid's last split is short.
const std::vector<std::vector<int>> kContexts = {
    {1}, {7}, {1000}, {4096}, {7, 4096, 1000}, {200, 256, 257},
    {1, 7, 1000, 4096, 2, 8, 997, 4093, 3, 9, 994, 4090, 4, 10, 991, 4087}};
constexpr int kDecodeMaxSeq = 4099;

// Against the interpreter, with the session's split (with 4 warps and with 8) and with 32 (129 chunks of two
// tiles: most warps idle, most chunks past the short contexts), 208 (a split that is not a power of two) and
// 4112 (one chunk for every context: each warp cycles its ring many times), the last two with 2 warps too.
TEST_P(AttentionDecodeGpu, MatchesInterpreter) {
  std::mt19937 rng(4321 + c.heads * 7 + c.headDim);

  for (const std::vector<int> &contexts : kContexts) {
    const int batch = int(contexts.size());
    std::ostringstream ctxList;
    for (size_t i = 0; i < contexts.size(); ++i) ctxList << (i ? "," : "") << contexts[i];
    const std::string ctxText = ctxList.str();

    // Reference, sequence by sequence: the cache holds positions 0 .. ctx-2, the op appends position ctx-1.
    ir::Tensor q = gputest::randomBf16({batch, qDim}, rng);
    ir::Tensor ref({batch, qDim});
    const size_t slab = size_t(kDecodeMaxSeq) * kvDim;
    cuda::DeviceBuffer kc = gputest::takeOrFail(gputest::poisonedBf16(size_t(batch) * slab), "k cache");
    cuda::DeviceBuffer vc = gputest::takeOrFail(gputest::poisonedBf16(size_t(batch) * slab), "v cache");
    cuda::DeviceBuffer qd = gputest::takeOrFail(gputest::uploadBf16(q), "q");
    cuda::DeviceBuffer ctxd = gputest::takeOrFail(gputest::uploadVector(contexts), "context_len");
    ASSERT_FALSE(HasFailure());
    for (int b = 0; b < batch; ++b) {
      const int ctx = contexts[b];
      ir::Tensor k = gputest::randomBf16({ctx, kvDim}, rng), v = gputest::randomBf16({ctx, kvDim}, rng);
      MINFER_ASSERT_OK(uploadRowsAt(kc, k, size_t(b) * slab));
      MINFER_ASSERT_OK(uploadRowsAt(vc, v, size_t(b) * slab));
      ir::KvCache cache;
      if (ctx > 1) {
        cache.k = sliceRows(k, 0, ctx - 1);
        cache.v = sliceRows(v, 0, ctx - 1);
      }
      ir::Tensor qb = sliceRows(q, b, b + 1), kNew = sliceRows(k, ctx - 1, ctx), vNew = sliceRows(v, ctx - 1, ctx);
      auto r = ir::evalOp(*m.module, *m.op, {&qb, &kNew, &vNew}, &cache);
      ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
      std::copy((*r)[0].data.begin(), (*r)[0].data.end(), ref.row(b));
    }

    // (split, threads): the session's split also with AttentionDecodeSpec::kFewBlocksThreads, the block
    // forSession gives a grid of one block an SM.
    const int chosen = AttentionDecodeSpec::chooseSplitTokens(c.kvHeads, c.headDim, kDecodeMaxSeq, batch);
    std::vector<std::pair<int, int>> splits = {{chosen, 128}, {chosen, AttentionDecodeSpec::kFewBlocksThreads},
                                               {32, 128}, {208, 128}, {4112, 128},
                                               {208, AttentionDecodeSpec::kManyPairsThreads},
                                               {4112, AttentionDecodeSpec::kManyPairsThreads}};
    // 16 warps, a tile the tuner may pick at short contexts (AttentionDecodeSpec::kTunedThreads), where it fits.
    if (AttentionDecodeSpec(c.heads, c.kvHeads, c.headDim, 208, kDecodeMaxSeq, 512).sharedBytes() <= 227 * 1024)
      splits.insert(splits.end(), {{208, 512}, {4112, 512}});
    std::sort(splits.begin(), splits.end());
    splits.erase(std::unique(splits.begin(), splits.end()), splits.end());
    for (auto [split, threads] : splits) {
      AttentionDecodeSpec dec(c.heads, c.kvHeads, c.headDim, split, kDecodeMaxSeq, threads);
      std::string what = dec.name() + " contexts=" + ctxText;
      SCOPED_TRACE(what);
      MINFER_ASSERT_OK(dec.validate());
      auto dk = kernelFor(dec);
      ASSERT_TRUE(bool(dk)) << llvm::toString(dk.takeError());

      GPU_TRY(bufs, DecodeBuffers::make(dec, batch, kDecodeMaxSeq, qDim));
      cuda::DeviceBuffer *ws = &bufs.workspace, *arrivals = &bufs.arrivals, *out = &bufs.out;

      cuda::DevicePtr partialOut = ws->ptr(), partialLse = ws->ptr() + dec.partialLseOffset(batch, kDecodeMaxSeq);
      AttentionDecodeParams dp{.q = qd.ptr(), .k_cache = kc.ptr(), .v_cache = vc.ptr(), .out = out->ptr(),
                               .partial_out = partialOut, .partial_lse = partialLse, .arrivals = arrivals->ptr(),
                               .context_len = ctxd.ptr(), .max_seq = int(kDecodeMaxSeq), .scale = float(scale)};
      // Twice: the first launch must leave the counters at zero for the second (a session's next layer and
      // step), whose output is the one compared.
      MINFER_ASSERT_OK(launchKernel((*dk)->fn, dec, batch, dp));
      MINFER_ASSERT_OK(out->fill(0xFF));
      MINFER_ASSERT_OK(launchKernel((*dk)->fn, dec, batch, dp));
      MINFER_ASSERT_OK(cuda::synchronize());
      std::vector<uint32_t> left(size_t(batch) * c.kvHeads, 1);
      MINFER_ASSERT_OK(arrivals->download(left.data(), left.size() * sizeof(uint32_t)));
      EXPECT_EQ(std::count(left.begin(), left.end(), 0u), static_cast<long>(left.size())) << "arrival counters left non-zero";
      auto got = gputest::downloadBf16(*out, {batch, qDim});
      ASSERT_TRUE(bool(got)) << llvm::toString(got.takeError());
      expectClose(*got, ref, c, what, [&](int64_t b) {
        return "sequence " + std::to_string(b) + " (context " + std::to_string(contexts[b]) + ")";
      });
    }
  }
}

// Stands in for the qkv kernel before decode attention: lets the next kernel start at once, sleeps ~`ns`,
// then copies the final K and V caches (the newest rows) and the final context lengths over the ones the
// attention kernel may already have read.
constexpr const char *kLateWriter = R"(
template <int Unused>
__global__ void late_writer(int *context_len, const int *final_context, int batch, unsigned short *k_cache,
                            unsigned short *v_cache, const unsigned short *final_k, const unsigned short *final_v,
                            long long elements, long long ns) {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); while (t - t0 < (unsigned long long)ns);
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = blockIdx.x * blockDim.x + threadIdx.x; i < elements; i += stride) {
    k_cache[i] = final_k[i];
    v_cache[i] = final_v[i];
  }
  for (int b = blockIdx.x * blockDim.x + threadIdx.x; b < batch; b += stride) context_len[b] = final_context[b];
}
)";

// Under programmatic dependent launch the kernel starts while the one before it (qkv) still writes the newest
// cache rows, and the step's context may still be advancing: nothing it reads before its wait may decide what
// it computes (its L2 prefetch reads a context before the wait, as a hint only). Here the kernel before
// (late_writer) lets it start, sleeps, then writes each sequence's newest rows and its context, one or many
// positions on: one-chunk contexts of one tile and of several, one that crosses the one-chunk limit
// (256 -> 257) and split ones (1000 -> 1001, and all of them at 32-position chunks). The attention kernel,
// launched as a programmatic dependent launch, must answer for the final contexts and rows; the rows from
// the first context's newest on are NaN until late_writer writes them, so reading them early shows. (The
// driver decides whether the two kernels overlap; on an idle GPU they do, which the session's end-to-end
// tests also rely on.)
TEST_P(AttentionDecodeGpu, AnswersForTheContextTheKernelBeforeItWrites) {
  GPU_TRY(target, gputest::deviceTarget());
  if (target.smVersion() < 90) GTEST_SKIP() << "programmatic dependent launch needs sm_90 or later";
  std::mt19937 rng(8765 + c.heads * 7 + c.headDim);
  const std::vector<int> first = {1, 3, 100, 150, 256, 1000}, last = {2, 4, 140, 151, 257, 1001};
  const int batch = int(first.size()), maxSeq = 1100;
  const size_t slab = size_t(maxSeq) * kvDim;

  ir::Tensor q = gputest::randomBf16({batch, qDim}, rng);
  ir::Tensor ref({batch, qDim});
  cuda::DeviceBuffer kc = gputest::takeOrFail(gputest::poisonedBf16(batch * slab), "k cache");
  cuda::DeviceBuffer vc = gputest::takeOrFail(gputest::poisonedBf16(batch * slab), "v cache");
  cuda::DeviceBuffer kFinal = gputest::takeOrFail(gputest::poisonedBf16(batch * slab), "final k cache");
  cuda::DeviceBuffer vFinal = gputest::takeOrFail(gputest::poisonedBf16(batch * slab), "final v cache");
  cuda::DeviceBuffer qd = gputest::takeOrFail(gputest::uploadBf16(q), "q");
  cuda::DeviceBuffer ctxd = gputest::takeOrFail(gputest::uploadVector(first), "context_len");
  cuda::DeviceBuffer ctxFinal = gputest::takeOrFail(gputest::uploadVector(last), "final context_len");
  ASSERT_FALSE(HasFailure());
  for (int b = 0; b < batch; ++b) {
    ir::Tensor k = gputest::randomBf16({last[b], kvDim}, rng), v = gputest::randomBf16({last[b], kvDim}, rng);
    // The cache as the first context finds it: positions up to its newest, exclusive.
    MINFER_ASSERT_OK(uploadRowsAt(kc, sliceRows(k, 0, first[b] - 1), size_t(b) * slab));
    MINFER_ASSERT_OK(uploadRowsAt(vc, sliceRows(v, 0, first[b] - 1), size_t(b) * slab));
    MINFER_ASSERT_OK(uploadRowsAt(kFinal, k, size_t(b) * slab));
    MINFER_ASSERT_OK(uploadRowsAt(vFinal, v, size_t(b) * slab));
    ir::KvCache cache;
    cache.k = sliceRows(k, 0, last[b] - 1);
    cache.v = sliceRows(v, 0, last[b] - 1);
    ir::Tensor qb = sliceRows(q, b, b + 1), kNew = sliceRows(k, last[b] - 1, last[b]),
               vNew = sliceRows(v, last[b] - 1, last[b]);
    auto r = ir::evalOp(*m.module, *m.op, {&qb, &kNew, &vNew}, &cache);
    ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
    std::copy((*r)[0].data.begin(), (*r)[0].data.end(), ref.row(b));
  }
  GPU_TRY(writer, gputest::buildSource("late_writer", kLateWriter, "late_writer<0>"));

  for (int split : {AttentionDecodeSpec::chooseSplitTokens(c.kvHeads, c.headDim, maxSeq, batch), 32}) {
    AttentionDecodeSpec dec(c.heads, c.kvHeads, c.headDim, split, maxSeq);
    SCOPED_TRACE(dec.name());
    MINFER_ASSERT_OK(dec.validate());
    auto dk = kernelFor(dec);
    ASSERT_TRUE(bool(dk)) << llvm::toString(dk.takeError());
    GPU_TRY(bufs, DecodeBuffers::make(dec, batch, maxSeq, qDim));
    cuda::DeviceBuffer *ws = &bufs.workspace, *arrivals = &bufs.arrivals, *out = &bufs.out;
    // Back to the first state (the previous split's run wrote the final one).
    MINFER_ASSERT_OK(ctxd.upload(first.data(), first.size() * sizeof(int)));
    for (int b = 0; b < batch; ++b) {
      const size_t from = (b * slab + size_t(first[b] - 1) * kvDim) * 2, bytes = (slab - size_t(first[b] - 1) * kvDim) * 2;
      std::vector<uint8_t> nan(bytes, 0xFF);
      MINFER_ASSERT_OK(kc.upload(nan.data(), bytes, from));
      MINFER_ASSERT_OK(vc.upload(nan.data(), bytes, from));
    }

    cuda::DevicePtr ctxPtr = ctxd.ptr(), finalCtx = ctxFinal.ptr(), kPtr = kc.ptr(), vPtr = vc.ptr(),
                    kFin = kFinal.ptr(), vFin = vFinal.ptr();
    int batchArg = batch;
    long long elements = (long long)(batch * slab), ns = 200000; // 0.2 ms: far longer than a launch
    void *args[] = {&ctxPtr, &finalCtx, &batchArg, &kPtr, &vPtr, &kFin, &vFin, &elements, &ns};
    LaunchDims dims;
    dims.grid = {8, 1, 1};
    dims.block = {256, 1, 1};
    MINFER_ASSERT_OK(cuda::launch(writer.fn, dims, args));
    AttentionDecodeParams dp{.q = qd.ptr(), .k_cache = kc.ptr(), .v_cache = vc.ptr(), .out = out->ptr(),
                             .partial_out = ws->ptr(), .partial_lse = ws->ptr() + dec.partialLseOffset(batch, maxSeq),
                             .arrivals = arrivals->ptr(), .context_len = ctxd.ptr(), .max_seq = maxSeq,
                             .scale = float(scale)};
    MINFER_ASSERT_OK(launchKernel((*dk)->fn, dec, batch, dp, nullptr, /*dependent=*/true));
    MINFER_ASSERT_OK(cuda::synchronize());
    auto got = gputest::downloadBf16(*out, {batch, qDim});
    ASSERT_TRUE(bool(got)) << llvm::toString(got.takeError());
    expectClose(*got, ref, c, dec.name(), [&](int64_t b) {
      return "sequence " + std::to_string(b) + " (context " + std::to_string(first[b]) + " -> " +
             std::to_string(last[b]) + ")";
    });
  }
}

INSTANTIATE_TEST_SUITE_P(Heads, AttentionDecodeGpu, testing::ValuesIn(kConfigs), configName);

} // namespace
} // namespace minfer
