// tests/gpu/FusedMatmulGpuTest.cpp — the fused matmul kernels, in every tile the autotuner can pick.
//
// For each fused epilogue (gated MLP; qkv with half / interleaved / no rope, with and without bias, writing
// k and v into a KV cache; bias + activation + scale + residual; the greedy lm_head's argmax, gemv only,
// whose keys must name each row's largest stored value) and each prologue (none, a folded RMSNorm or
// LayerNorm in gemv, an RMSNorm whose gains ride in W in gemv and the wgmma gemm, the gemm's from rows'
// squares given in three parts: the kernel gets W's columns times gamma and the reference the norm with
// gamma, then W; and the residual epilogue that writes those squares, checked against the squares of what it
// stored), every candidate tile of the buckets' row counts (gemv: 1, 5, 16 rows; gemm: 37
// rows, a partial tile) is compiled (in parallel, through the cache) and run against the interpreter's own
// definition of the fused op (ir::evalOp), with the weights laid out as the plan lays them out at load
// (Plan.h rowOrder) and the output poisoned first so an unwritten element shows.
#include "gpu/GpuHarness.h"

#include "common/TestModels.h"
#include "jit/KernelCache.h"
#include "jit/ParallelCompile.h"
#include "compiler/Plan.h"
#include "compiler/kernels/Epilogue.h"
#include "compiler/kernels/Gemm.h"
#include "compiler/kernels/Gemv.h"

#include <gtest/gtest.h>

#include <sstream>
#include <thread>

using namespace minfer;
using namespace minfer::gputest;

namespace {

constexpr int64_t kN = 256, kK = 128, kHeads = 4, kKvHeads = 2, kHeadDim = 32, kMaxSeq = 128;

// The ops whose semantics the kernels must reproduce; %x stands for any activation (evalOp takes operands).
std::string moduleText() {
  std::ostringstream s;
  s << "model \"fused\"\n\ndim n = " << kN << "\ndim k = " << kK << "\n\n"
    << "weight @e : bf16[4, k] = \"e\"\nweight @w : bf16[n, k] = \"w\"\nweight @b : bf16[n] = \"b\"\n"
    << "weight @g : bf16[k] = \"g\"\nweight @gf : f32[k] = \"gf\"\nweight @bf : f32[k] = \"bf\"\n\n"
    << "graph(%tokens: i32[T], %positions: i32[T]) {\n"
    << "  %x = embedding %tokens, @e : bf16[T, k]\n"
    << "  %rms = rms_norm %x, @g {eps = 0.00001} : bf16[T, k]\n"
    << "  %ln = layer_norm %x, @gf, @bf {eps = 0.00001} : bf16[T, k]\n"
    << "  %gated = gated_matmul %x, @w {act = silu} : bf16[T, 128]\n"
    << "  %q1, %k1, %v1 = qkv %x, %positions, @w, @b {heads = 4, kv_heads = 2, head_dim = 32, rope = half, "
       "theta = 10000.0, schedule = default} : bf16[T, 128], bf16[T, 64], bf16[T, 64]\n"
    << "  %q2, %k2, %v2 = qkv %x, %positions, @w {heads = 4, kv_heads = 2, head_dim = 32, rope = interleaved, "
       "theta = 500000.0, schedule = default} : bf16[T, 128], bf16[T, 64], bf16[T, 64]\n"
    << "  %q3, %k3, %v3 = qkv %x, %positions, @w, @b {heads = 4, kv_heads = 2, head_dim = 32, rope = none} "
       ": bf16[T, 128], bf16[T, 64], bf16[T, 64]\n"
    << "  %q4, %k4, %v4 = qkv %x, %positions, @w {heads = 4, kv_heads = 2, head_dim = 32, rope = half, "
       "theta = 500000.0, schedule = llama3, factor = 32.0, low_freq_factor = 1.0, high_freq_factor = 4.0, "
       "original_max_pos = 8192} : bf16[T, 128], bf16[T, 64], bf16[T, 64]\n"
    << "  %pw = matmul_residual %x, @w, %gated2, @b {act = gelu_tanh, scale = 0.5} : bf16[T, n]\n"
    << "  return %pw\n}\n";
  std::string text = s.str();
  // %gated2: any [T, n] value for the residual operand.
  text.replace(text.find("  %pw"), 0, "  %gated2 = matmul %x, @w : bf16[T, n]\n");
  return text;
}

struct Case {
  std::string name;
  Epilogue epi;
  const char *op;                        // the result naming the reference op
  PlanBuffer::Layout layout = PlanBuffer::Layout::AsIs;
};

Epilogue argmaxEpilogue() {
  Epilogue e;
  e.argmax = true;
  return e;
}

std::vector<Case> cases() {
  return {
      {"gated_silu", Epilogue::gated(Activation::Silu), "gated", PlanBuffer::Layout::GateUp},
      {"qkv_half_bias", Epilogue::qkv(kHeads, kKvHeads, kHeadDim, QkvRope::Half, true), "q1",
       PlanBuffer::Layout::RopePairs},
      {"qkv_interleaved", Epilogue::qkv(kHeads, kKvHeads, kHeadDim, QkvRope::Interleaved, false), "q2"},
      // Half style without a bias, the llama3 schedule's frequencies in the rotation table.
      {"qkv_half_llama3", Epilogue::qkv(kHeads, kKvHeads, kHeadDim, QkvRope::Half, false), "q4",
       PlanBuffer::Layout::RopePairs},
      {"qkv_norope_bias", Epilogue::qkv(kHeads, kKvHeads, kHeadDim, QkvRope::None, true), "q3"},
      {"bias_gelu_scale_residual", Epilogue::pointwise(true, Activation::GeluTanh, true, true), "pw"},
      // The same, also writing each row's partial sums of squares (the wgmma gemm only).
      {"bias_gelu_scale_residual_rowsq", [] {
         Epilogue e = Epilogue::pointwise(true, Activation::GeluTanh, true, true);
         e.rowSquares = true;
         return e;
       }(), "pw"},
      {"argmax", argmaxEpilogue(), "gated2"},
  };
}

const ir::Op *opDefining(const ir::Module &m, const std::string &value) {
  for (const ir::Item &item : m.items)
    if (const ir::Op *op = std::get_if<ir::Op>(&item))
      for (ir::ValueId r : op->results)
        if (m.value(r).name == value) return op;
  return nullptr;
}

// Rows of `t` (a weight [rows, cols] or a vector) in the plan's load order.
ir::Tensor laidOut(const ir::Tensor &t, PlanBuffer::Layout layout) {
  PlanBuffer b;
  b.layout = layout;
  b.layoutHeadDim = kHeadDim;
  b.layoutRows = (kHeads + kKvHeads) * kHeadDim;
  int64_t rows = t.shape[0], cols = t.shape.size() == 2 ? t.shape[1] : 1;
  std::vector<int64_t> order = rowOrder(b, rows);
  if (order.empty()) return t;
  ir::Tensor out(t.shape);
  for (int64_t r = 0; r < rows; ++r) std::copy_n(t.data.data() + order[r] * cols, cols, out.data.data() + r * cols);
  return out;
}

ir::Tensor roundedToBf16(ir::Tensor t) {
  for (float &x : t.data) x = bf16ToFloat(floatToBf16(x));
  return t;
}

TEST(FusedMatmul, EveryTunableTileOfEveryFusedEpilogueMatchesTheInterpreter) {
  MINFER_REQUIRE_GPU();
  GPU_TRY(target, deviceTarget());
  auto m = test::parseVerified(moduleText());
  ASSERT_TRUE(m);
  std::mt19937 rng(11);
  const int64_t maxRows = 40;
  ir::Tensor x = randomBf16({maxRows, kK}, rng), w = randomBf16({kN, kK}, rng, 0, 1 / std::sqrt(float(kK)));
  ir::Tensor bias = randomBf16({kN}, rng), res = randomBf16({maxRows, kN}, rng);
  ir::Tensor gamma = randomBf16({kK}, rng, 1, 0.2f), beta = randomBf16({kK}, rng, 0, 0.2f);
  ir::Tensor positions({maxRows});
  for (int64_t r = 0; r < maxRows; ++r) positions.data[r] = float(3 * r + 1); // distinct cache rows (< kMaxSeq)

  // Every spec: each case x prologue x rows x candidate tile.
  struct Run {
    std::shared_ptr<KernelSpec> spec;
    const Case *c;
    Prologue pro;
    int64_t rows;
  };
  std::vector<Case> all = cases();
  std::vector<Run> runs;
  for (const Case &c : all) {
    for (int64_t rows : {1, 5, 16}) {
      if (c.epi.rowSquares) break; // a gemm's epilogue only
      for (Prologue pro : {Prologue{}, Prologue{Prologue::Kind::Rms, ir::DType::BF16},
                           Prologue{Prologue::Kind::Layer, ir::DType::F32}, Prologue::rmsUnitGain()}) {
        GemvSpec base(kN, kK, c.epi, GemvTile{1, 2, 4}, pro);
        for (auto &s : base.tuningCandidates(target, rows)) runs.push_back({s, &c, pro, rows});
      }
    }
    // The gemm: without a prologue, and with a folded RMS norm whose gains ride in W and whose rows' squares
    // come from the gemm before (wgmma tiles only).
    for (Prologue pro : {Prologue{}, Prologue::rmsRowSquares()}) {
      if (pro.rowSquares && c.epi.rowSquares) continue; // one row_sq buffer: a gemm reads or writes squares
      GemmSpec base(kN, kK, c.epi, GemmTile{}, pro);
      for (auto &s : base.tuningCandidates(target, 64)) runs.push_back({s, &c, pro, 37});
      if (target.hasWgmma()) // the ping-pong schedule (128-row tiles), one block: its consumers take turns;
        for (int bn : {64, 128, 80, 176}) { // 80 and 176: widths fitted to the SMs, tiles across heads
          auto pp = std::make_shared<GemmSpec>(kN, kK, c.epi, GemmTile::hopperPingpong(bn, 4), pro);
          pp->smCount = 1;
          if (llvm::Error e = pp->validate(target)) llvm::consumeError(std::move(e));
          else runs.push_back({pp, &c, pro, 37});
          // And one pair of blocks sharing W: 37 rows leave the second block's tile past M.
          auto pair = std::make_shared<GemmSpec>(kN, kK, c.epi, GemmTile::hopperPingpong(bn, 4).paired(), pro);
          pair->smCount = 2;
          if (llvm::Error e = pair->validate(target)) llvm::consumeError(std::move(e));
          else runs.push_back({pair, &c, pro, 37});
        }
    }
  }
  std::vector<KernelSource> sources;
  std::set<std::string> names;
  for (const Run &r : runs)
    if (names.insert(r.spec->name()).second) sources.push_back(kernelSource(*r.spec));
  KernelCache cache = KernelCache::openDefault();
  auto compiled = compileAll(sources, target, {}, cache, std::max(1u, std::thread::hardware_concurrency()));
  ASSERT_TRUE(bool(compiled)) << llvm::toString(compiled.takeError());
  std::cout << "[ fused ] " << runs.size() << " runs of " << sources.size() << " kernels\n";

  GPU_TRY(xDev, uploadBf16(x));
  GPU_TRY(resDev, uploadBf16(res));
  std::vector<int32_t> pos32(maxRows), seqOf(maxRows, 0);
  for (int64_t r = 0; r < maxRows; ++r) pos32[r] = static_cast<int32_t>(positions.data[r]);
  GPU_TRY(posDev, uploadVector(pos32));
  GPU_TRY(seqDev, uploadVector(seqOf));
  GPU_TRY(gammaDev, uploadBf16(gamma));
  GPU_TRY(gammaF32, uploadVector(gamma.data));
  GPU_TRY(betaF32, uploadVector(beta.data));
  std::map<const Case *, std::pair<cuda::DeviceBuffer, cuda::DeviceBuffer>> weights; // laid-out W, bias
  // With unit gains: W's columns times gamma, rounded to bf16 once (what the engine uploads), laid out.
  ir::Tensor wGains = w;
  for (int64_t r = 0; r < kN; ++r)
    for (int64_t i = 0; i < kK; ++i) wGains.row(r)[i] = bf16ToFloat(floatToBf16(w.row(r)[i] * gamma.data[i]));
  std::map<const Case *, cuda::DeviceBuffer> weightsWithGains;
  std::map<const Case *, cuda::DeviceBuffer> ropeTables; // each roping case's rotation table, kMaxSeq rows
  for (const Case &c : all) {
    GPU_TRY(wDev, uploadBf16(laidOut(w, c.layout)));
    GPU_TRY(bDev, uploadBf16(laidOut(bias, c.layout)));
    weights.emplace(&c, std::make_pair(std::move(wDev), std::move(bDev)));
    GPU_TRY(wgDev, uploadBf16(laidOut(wGains, c.layout)));
    weightsWithGains.emplace(&c, std::move(wgDev));
    if (c.epi.kind == Epilogue::Kind::Qkv && c.epi.rope != QkvRope::None) {
      GPU_TRY(tableDev, uploadVector(rotationTable(ir::ropeInverseFrequencies(*opDefining(*m, c.op)), kMaxSeq)));
      ropeTables.emplace(&c, std::move(tableDev));
    }
  }
  int64_t kvd = kKvHeads * kHeadDim;
  GPU_TRY(kCache, poisonedBf16(size_t(kMaxSeq * kvd)));
  GPU_TRY(vCache, poisonedBf16(size_t(kMaxSeq * kvd)));
  GPU_TRY(out, poisonedBf16(size_t(maxRows * kN)));
  // Row squares: what a gemm writes (poisoned first: NaN), and what a folding gemm reads, x's rows' squares in
  // three unequal parts computed here in double.
  constexpr int64_t kMaxParts = kN / 16, kParts = 3;
  GPU_TRY(rowSqOut, cuda::DeviceBuffer::alloc(size_t(maxRows * kMaxParts * 4)));
  std::vector<float> partials(size_t(maxRows * kParts));
  for (int64_t r = 0; r < maxRows; ++r)
    for (int64_t j = 0; j < kParts; ++j) {
      double sum = 0;
      for (int64_t i = j * 40; i < (j == kParts - 1 ? kK : (j + 1) * 40); ++i) sum += double(x.row(r)[i]) * x.row(r)[i];
      partials[size_t(r * kParts + j)] = float(sum);
    }
  GPU_TRY(rowSqIn, uploadVector(partials));
  GPU_TRY(keys, uploadVector(std::vector<uint64_t>(maxRows, 0))); // the argmax epilogue's, zero before a launch

  int failures = 0;
  for (const Run &run : runs) {
    SCOPED_TRACE(run.spec->name() + " rows=" + std::to_string(run.rows));
    const Case &c = *run.c;
    int64_t rows = run.rows;
    // The reference: the norm (rounded to bf16, what the norm kernel stores), then the fused op.
    ir::Tensor xs({rows, kK});
    std::copy_n(x.data.begin(), rows * kK, xs.data.begin());
    ir::Tensor in = xs;
    if (run.pro.kind != Prologue::Kind::None) {
      bool layer = run.pro.kind == Prologue::Kind::Layer;
      const ir::Op *norm = opDefining(*m, layer ? "ln" : "rms");
      std::vector<const ir::Tensor *> ops = {&xs, &gamma};
      if (layer) ops.push_back(&beta);
      GPU_TRY(n, ir::evalOp(*m, *norm, ops));
      in = roundedToBf16(n[0]);
    }
    ir::Tensor posRows({rows}), resRows({rows, kN});
    std::copy_n(positions.data.begin(), rows, posRows.data.begin());
    std::copy_n(res.data.begin(), rows * kN, resRows.data.begin());
    const ir::Op *op = opDefining(*m, c.op);
    std::vector<const ir::Tensor *> operands;
    if (op->kind == ir::OpKind::Qkv) {
      operands = {&in, &posRows, &w};
      if (op->operands.size() > 3) operands.push_back(&bias);
    } else if (op->kind == ir::OpKind::GatedMatmul || op->kind == ir::OpKind::Matmul) {
      operands = {&in, &w};
    } else {
      operands = {&in, &w, &resRows, &bias};
    }
    GPU_TRY(ref, ir::evalOp(*m, *op, operands));

    // The kernel.
    auto kernel = loadKernel(*run.spec, target, &cache);
    ASSERT_TRUE(bool(kernel)) << llvm::toString(kernel.takeError());
    MINFER_ASSERT_OK(out.fill(0xFF));
    MINFER_ASSERT_OK(kCache.fill(0xFF));
    MINFER_ASSERT_OK(vCache.fill(0xFF));
    const cuda::DevicePtr wPtr = run.pro.unitGain ? weightsWithGains.at(&c).ptr() : weights.at(&c).first.ptr();
    MatmulParams p{.C = out.ptr(), .A = xDev.ptr(), .W = wPtr, .rows = static_cast<int32_t>(rows)};
    EpiParams &epi = p.epi;
    epi.bias = weights.at(&c).second.ptr();
    epi.residual = resDev.ptr();
    epi.scale = 0.5f;
    epi.max_seq = static_cast<int32_t>(kMaxSeq);
    epi.positions = posDev.ptr();
    epi.seq_of = seqDev.ptr();
    epi.rope = ropeTables.count(&c) ? ropeTables.at(&c).ptr() : 0;
    epi.k_cache = kCache.ptr();
    epi.v_cache = vCache.ptr();
    bool f32Norm = run.pro.weights == ir::DType::F32;
    epi.gamma = run.pro.unitGain ? 0 : f32Norm ? gammaF32.ptr() : gammaDev.ptr(); // unit gains read none
    MINFER_ASSERT_OK(rowSqOut.fill(0xFF));
    epi.row_sq = run.pro.rowSquares ? rowSqIn.ptr() : c.epi.rowSquares ? rowSqOut.ptr() : 0;
    epi.row_sq_parts = run.pro.rowSquares ? static_cast<int32_t>(kParts) : 0;
    epi.beta = betaF32.ptr();
    epi.eps = 1e-5f;
    epi.argmax = keys.ptr();
    MINFER_ASSERT_OK(keys.fill(0));
    MINFER_ASSERT_OK(launchKernel(kernel->fn, *run.spec, rows, p));
    MINFER_ASSERT_OK(cuda::synchronize());

    int64_t cols = c.epi.outCols(kN);
    GPU_TRY(got, downloadBf16(out, {rows, cols}));
    double err = relError(got, ref[0]);
    bool ok = countNaN(got) == 0 && err < kBf16Tolerance;
    if (op->kind == ir::OpKind::Qkv) {
      // k and v went into the caches at the rows' positions (sequence 0).
      GPU_TRY(kc, downloadBf16(kCache, {kMaxSeq, kvd}));
      GPU_TRY(vc, downloadBf16(vCache, {kMaxSeq, kvd}));
      ir::Tensor kGot({rows, kvd}), vGot({rows, kvd});
      for (int64_t r = 0; r < rows; ++r) {
        std::copy_n(kc.row(pos32[r]), kvd, kGot.row(r));
        std::copy_n(vc.row(pos32[r]), kvd, vGot.row(r));
      }
      double ek = relError(kGot, ref[1]), ev = relError(vGot, ref[2]);
      ok = ok && countNaN(kGot) == 0 && countNaN(vGot) == 0 && ek < kBf16Tolerance && ev < kBf16Tolerance;
      if (!ok) ADD_FAILURE() << "q err " << err << ", k err " << ek << ", v err " << ev;
    } else if (c.epi.argmax) {
      if (!ok) ADD_FAILURE() << "relative error " << err << ", " << countNaN(got) << " unwritten";
      // Each row's key: the largest value the kernel stored in that row, ties to the lowest column
      // (argmax_key.cuh), as the host finds it in the downloaded logits; rows past the launch's, none.
      std::vector<uint64_t> k(static_cast<size_t>(maxRows));
      MINFER_ASSERT_OK(keys.download(k.data(), k.size() * 8));
      for (int64_t r = 0; r < maxRows; ++r) {
        int64_t want = -1;
        if (r < rows) {
          want = 0;
          for (int64_t col = 1; col < kN; ++col)
            if (got.row(r)[col] > got.row(r)[want]) want = col;
        }
        int64_t token = k[r] == 0 ? -1 : int64_t(0xffffffffu - uint32_t(k[r] & 0xffffffffu));
        if (token != want) {
          ok = false;
          ADD_FAILURE() << "row " << r << ": the key names column " << token << ", expected " << want;
          break;
        }
      }
    } else if (!ok) {
      ADD_FAILURE() << "relative error " << err << ", " << countNaN(got) << " unwritten";
    }
    if (c.epi.rowSquares) {
      // Each row's partial j: the squares of what the kernel stored in tile j's columns, added here in double.
      const int64_t bn = static_cast<const GemmSpec &>(*run.spec).tile.bn, parts = (kN + bn - 1) / bn;
      std::vector<float> sq(size_t(rows * parts));
      MINFER_ASSERT_OK(rowSqOut.download(sq.data(), sq.size() * 4));
      int bad = 0;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < parts; ++j) {
          double want = 0;
          for (int64_t i = j * bn; i < std::min(kN, (j + 1) * bn); ++i) want += double(got.row(r)[i]) * got.row(r)[i];
          const float have = sq[size_t(r * parts + j)];
          if (!(std::abs(have - want) <= 1e-5 * want + 1e-6) && ++bad <= 3)
            ADD_FAILURE() << "row " << r << " part " << j << ": squares " << have << ", want " << want;
        }
      ok = ok && bad == 0;
    }
    if (!ok && ++failures > 10) FAIL() << "more than 10 failures; stopping";
  }
}

} // namespace
