// tests/unit/PersistentPlanTest.cpp — the decode step as one persistent kernel, without a GPU: which plans
// get it (fused, decode batch <= 8) and why the others do not, its tasks against the decode launches they
// replace, the task forms of each family, the plan JSON's task graph, and NVRTC compiling the kernel.
#include "common/TestFiles.h"
#include "common/TestModels.h"

#include "compiler/Fuse.h"
#include "compiler/Plan.h"
#include "compiler/kernels/Attention.h"
#include "compiler/kernels/Gemv.h"
#include "compiler/kernels/Persistent.h"
#include "compiler/kernels/RowOps.h"
#include "jit/Nvrtc.h"

#include <gtest/gtest.h>

#include <set>

using namespace minfer;

namespace {

Plan planExample(const std::string &name, int64_t batch, bool fuse = true, const char *target = "sm_90a",
                 bool weightRing = false) {
  auto m = test::parseVerified(test::readFile(std::string(MINFER_SOURCE_DIR) + "/examples/" + name + ".ir"));
  EXPECT_TRUE(m);
  if (!m) return Plan();
  if (fuse) {
    EXPECT_TRUE(bool(fuseModule(*m)));
  }
  PlanOptions po;
  po.maxBatch = batch;
  po.maxSeq = 256;
  po.weightRing = weightRing;
  auto plan = buildPlan(*m, *parseTarget(target), po);
  EXPECT_TRUE(bool(plan)) << (plan ? "" : llvm::toString(plan.takeError()));
  return plan ? std::move(*plan) : Plan();
}

// Every op launch of a fused decode step becomes a task, in launch order; select and advance stay launches.
TEST(PersistentPlan, FusedDecodeOpsBecomeTasksInLaunchOrder) {
  for (const char *model : {"tinyllama-1.1b", "gpt2-124m", "qwen2.5-0.5b", "llama-2-7b"}) {
    for (int64_t batch : {1, 8}) {
      SCOPED_TRACE(std::string(model) + " batch " + std::to_string(batch));
      Plan p = planExample(model, batch);
      const PersistentDecode &pd = p.persistent;
      ASSERT_TRUE(pd.built()) << pd.why;
      EXPECT_TRUE(pd.why.empty());
      EXPECT_EQ(pd.threads, PersistentDecodeSpec::kThreads);
      size_t ops = 0;
      for (const PlannedLaunch &l : p.decode.launches) ops += l.role == LaunchRole::Op;
      ASSERT_EQ(pd.tasks.size(), ops);
      EXPECT_GT(ops, 20u);
      const auto &spec = static_cast<const PersistentDecodeSpec &>(*p.kernels[pd.kernel]);
      std::set<int> kinds;
      for (size_t i = 0; i < pd.tasks.size(); ++i) {
        const PersistentDecode::Task &t = pd.tasks[i];
        EXPECT_EQ(t.launch, static_cast<int>(i));
        const PlannedLaunch &l = p.decode.launches[t.launch];
        EXPECT_EQ(l.role, LaunchRole::Op);
        const KernelSpec &own = *p.kernels[l.kernel];
        // The same family and Params as the launch, re-instantiated for the kernel's block.
        EXPECT_EQ(&t.spec->params(), &own.params()) << own.name();
        EXPECT_EQ(t.spec->launch(batch).block[0], static_cast<unsigned>(pd.threads)) << t.spec->name();
        ASSERT_GE(t.kind, 0);
        ASSERT_LT(t.kind, static_cast<int>(spec.taskTypes.size()));
        EXPECT_EQ(spec.taskTypes[t.kind], t.spec->taskType());
        kinds.insert(t.kind);
      }
      EXPECT_EQ(kinds.size(), spec.taskTypes.size()) << "every body is some task's";
      for (size_t i = pd.tasks.size(); i < p.decode.launches.size(); ++i)
        EXPECT_NE(p.decode.launches[i].role, LaunchRole::Op);
      // Its buffers: the task table, and counters that start at zero.
      EXPECT_EQ(p.buffers[pd.table].fixedBytes, static_cast<int64_t>(pd.tasks.size() * sizeof(PersistentTaskHost)));
      EXPECT_EQ(p.buffers[pd.counters].fixedBytes, static_cast<int64_t>((pd.tasks.size() + 1) * 4));
      EXPECT_TRUE(p.buffers[pd.counters].zeroed);
      EXPECT_EQ(p.buffers[pd.table].kind, BufferKind::Workspace);
    }
  }
}

// Where it is not built, the plan says why, and the step stays launches.
TEST(PersistentPlan, OtherPlansSayWhyTheyDecodeAsLaunches) {
  Plan big = planExample("tinyllama-1.1b", 16);
  EXPECT_FALSE(big.persistent.built());
  EXPECT_NE(big.persistent.why.find("batches up to 8"), std::string::npos) << big.persistent.why;
  EXPECT_TRUE(big.persistent.tasks.empty());
  Plan unfused = planExample("tinyllama-1.1b", 1, /*fuse=*/false);
  EXPECT_FALSE(unfused.persistent.built());
  EXPECT_NE(unfused.persistent.why.find("no task form"), std::string::npos) << unfused.persistent.why;
  for (const auto &k : unfused.kernels) EXPECT_EQ(k->name().rfind("persistent_decode", 0), std::string::npos);
}

// The task form of each family: the same kernel at the persistent block size, or none where the template
// cannot run with it.
TEST(PersistentPlan, TaskFormsKeepTheKernelAndChangeOnlyTheBlock) {
  GemvSpec gemv(2048, 2048, Epilogue{}, GemvTile{1, 2, 8, false});
  // 396 blocks of 4 warps: 2048 rows give every block a tile at one row a warp (512 tiles).
  auto t = gemv.asTask(128, 396);
  ASSERT_TRUE(t);
  EXPECT_EQ(static_cast<const GemvSpec &>(*t).tile.warps, 4);
  EXPECT_EQ(static_cast<const GemvSpec &>(*t).tile.rowsPerWarp, 1);
  EXPECT_EQ(t->launch(1).grid[0], 2048u / 4);
  EXPECT_EQ(t->taskType(), "minfer::GemvTask<2048, 2048, 1, 1, 4, minfer::EpiPointwise<false, minfer::ActNone, false, "
                           "false>, minfer::ProNone, 8>");
  // An lm_head's 32000 rows: the most rows a warp (8), 1000 tiles instead of 8000 one-row ones.
  GemvSpec head(32000, 2048, Epilogue{}, GemvTile{1, 1, 4, false});
  EXPECT_EQ(head.asTask(128, 396)->launch(1).grid[0], 1000u);
  // 11264 rows over 1584 warps: 7 a warp is the most that gives every block a tile; the gated epilogue
  // takes W rows in pairs, so 6 (470 tiles).
  GemvSpec gated(11264, 2048, Epilogue::gated(Activation::Silu), GemvTile{1, 2, 4, false});
  auto g = gated.asTask(128, 396);
  EXPECT_EQ(static_cast<const GemvSpec &>(*g).tile.rowsPerWarp, 6);
  EXPECT_EQ(g->launch(1).grid[0], 470u);
  EXPECT_EQ(gemv.asTask(100, 396), nullptr) << "not whole warps";
  GemvSpec mma(4096, 4096, Epilogue{}, GemvTile{8, 1, 16, true});
  EXPECT_EQ(mma.asTask(128, 396)->taskType(), "minfer::GemvMmaTask<4096, 4096, 8, 4, minfer::EpiPointwise<false, minfer::ActNone, false, false>, "
            "minfer::ProNone, 8>");
  EXPECT_EQ(mma.asTask(1024, 396), nullptr) << "gemvMma takes at most 16 warps";
  // A wgmma gemv becomes the mma.sync body above one row, but a greedy lm_head's argmax takes the FMA body
  // (the mma.sync body has no argmax), at the launch's rows.
  GemvSpec wgmmaHead(32000, 2048, Epilogue{}, GemvTile::hopper(8, 128, 4, 1));
  EXPECT_TRUE(static_cast<const GemvSpec &>(*wgmmaHead.asTask(128, 396)).tile.mma);
  Epilogue argmax;
  argmax.argmax = true;
  auto greedyHead = GemvSpec(32000, 2048, argmax, GemvTile::hopper(8, 128, 4, 1)).asTask(128, 396);
  ASSERT_TRUE(greedyHead);
  EXPECT_TRUE(static_cast<const GemvSpec &>(*greedyHead).tile.fma());
  EXPECT_EQ(static_cast<const GemvSpec &>(*greedyHead).tile.maxM, 8);
  EXPECT_EQ(greedyHead->taskType().rfind("minfer::GemvTask<32000, 2048, 8, ", 0), 0u) << greedyHead->taskType();

  AttentionDecodeSpec attn(32, 4, 64, 128, 2048);
  auto at = attn.asTask(256, 396);
  ASSERT_TRUE(at);
  EXPECT_EQ(at->launch(3).grid, (std::array<unsigned, 3>{4, 3, 16}));
  EXPECT_EQ(at->taskType(), "minfer::AttentionDecodeTask<32, 4, 64, 128, 256, 40960>");
  // Head dim 64 at 4 warps: 2 stages of 18 KB instead of 3 as a kernel of its own.
  EXPECT_EQ(static_cast<const AttentionDecodeSpec &>(*attn.asTask(128, 396)).sharedBytes(), 36864u);
  EXPECT_EQ(attn.sharedBytes(), 55296u);
  EXPECT_EQ(attn.asTask(1024, 396), nullptr) << "attention_decode takes at most 16 warps";

  NormSpec norm(NormKind::Rms, 4096, ir::DType::BF16);
  EXPECT_EQ(norm.asTask(128, 396)->taskType(), "minfer::NormTask<4096, 128, minfer::bf16, false, false>");
  EXPECT_EQ(NormSpec(NormKind::Rms, 8192, ir::DType::BF16).asTask(32, 396), nullptr)
      << "8192 / 8 = 1024 vectors over 32 threads: 16 is the most a thread holds";
  PointwiseSpec add(PointwiseOp::Add, 768);
  auto addTask = add.asTask(128, 396);
  EXPECT_EQ(addTask->taskType(), "minfer::PointwiseTask<minfer::pw::Add, 768, 128, true>");
  EXPECT_EQ(addTask->launch(1).grid[0], 1u); // 96 vectors, one a thread
  EXPECT_EQ(EmbeddingSpec(768, ir::DType::F32).asTask(128, 396)->taskType(), "minfer::EmbeddingTask<768, float>");
  EXPECT_EQ(ArgmaxSpec(32000).asTask(128, 396), nullptr) << "select stays a launch";
}

// With PlanOptions::weightRing on sm_90 every matmul task streams W through the kernel's weight ring
// (GemvMmaRingTask, the lm_head's argmax included): the ring sits after the tasks' shared memory, holds two
// of the largest piece, and leaves room for two blocks an SM. sm_89 has no cp.async.bulk and keeps the global
// loads, as does every target without the option.
TEST(PersistentPlan, MatmulTasksStreamTheirWeightsThroughTheRingOnSm90) {
  for (const char *model : {"tinyllama-1.1b", "gpt2-124m", "llama-2-7b"}) {
    SCOPED_TRACE(model);
    Plan p = planExample(model, 1, true, "sm_90a", /*weightRing=*/true);
    ASSERT_TRUE(p.persistent.built()) << p.persistent.why;
    const auto &spec = static_cast<const PersistentDecodeSpec &>(*p.kernels[p.persistent.kernel]);
    int64_t largest = 0, streamed = 0;
    for (const PersistentDecode::Task &t : p.persistent.tasks) {
      const auto *g = dynamic_cast<const GemvSpec *>(t.spec.get());
      if (!g) continue;
      ++streamed;
      EXPECT_TRUE(g->stream);
      EXPECT_EQ(g->taskType().rfind("minfer::GemvMmaRingTask<", 0), 0u) << g->taskType();
      largest = std::max(largest, g->ringPieceBytes());
    }
    EXPECT_GT(streamed, 0);
    EXPECT_GE(int64_t(spec.ringBytes), 2 * largest);
    EXPECT_TRUE(p.persistent.ringWhy.empty()) << p.persistent.ringWhy;
    EXPECT_EQ(spec.ringOffset() % 128, 0u);
    EXPECT_GE(spec.ringOffset(), spec.sharedBytes);
    const unsigned shared = spec.launch(1).sharedBytes;
    EXPECT_EQ(shared, spec.ringOffset() + spec.ringBytes);
    EXPECT_EQ(spec.launch(1).block[0], 128u + 32u) << "the bodies' 4 warps and the ring's producer warp";
    EXPECT_LE(2 * (shared + 1024 + 4096), unsigned(p.target.sharedBytesPerSm())) << "two blocks an SM";
    EXPECT_NE(spec.name().find("_ring" + std::to_string(spec.ringBytes) + "_"), std::string::npos) << spec.name();
    EXPECT_NE(spec.entry().find("persistent_decode<128, " + std::to_string(spec.ringOffset()) + ", " +
                                std::to_string(spec.ringBytes) + ", "),
              std::string::npos);
  }
  for (auto [target, ring] : {std::pair{"sm_89", true}, std::pair{"sm_90a", false}}) {
    SCOPED_TRACE(std::string(target) + (ring ? " with" : " without") + " the option");
    Plan plain = planExample("tinyllama-1.1b", 1, true, target, ring);
    ASSERT_TRUE(plain.persistent.built()) << plain.persistent.why;
    const auto &spec = static_cast<const PersistentDecodeSpec &>(*plain.kernels[plain.persistent.kernel]);
    EXPECT_EQ(spec.ringBytes, 0u);
    EXPECT_EQ(spec.launch(1).block[0], 128u) << "no producer warp without a ring";
    EXPECT_EQ(spec.name().find("_ring"), std::string::npos);
    for (const std::string &t : spec.taskTypes) EXPECT_EQ(t.find("RingTask"), std::string::npos) << t;
    // Asked for on a target without it, the plan says why it has none.
    EXPECT_EQ(plain.persistent.ringWhy.empty(), !ring) << plain.persistent.ringWhy;
    if (ring) {
      EXPECT_NE(plain.persistent.ringWhy.find("sm_89 has no cp.async.bulk"), std::string::npos) << plain.persistent.ringWhy;
    }
  }
  // sm_120 (RTX 50) has cp.async.bulk but 99 KB of shared memory a block: beside decode attention's 36 KB at
  // two blocks an SM there is no room for a ring of two pieces. The kernel is built without it, and the plan
  // JSON says why.
  {
    Plan rtx = planExample("tinyllama-1.1b", 1, true, "sm_120", /*weightRing=*/true);
    ASSERT_TRUE(rtx.persistent.built()) << rtx.persistent.why;
    const auto &spec = static_cast<const PersistentDecodeSpec &>(*rtx.kernels[rtx.persistent.kernel]);
    EXPECT_EQ(spec.ringBytes, 0u);
    for (const std::string &t : spec.taskTypes) EXPECT_EQ(t.find("RingTask"), std::string::npos) << t;
    EXPECT_NE(rtx.persistent.ringWhy.find("it needs two pieces of 17408"), std::string::npos) << rtx.persistent.ringWhy;
    llvm::json::Object j = rtx.toJSON();
    const llvm::json::Object *ringJson = j.getObject("decode")->getObject("persistent")->getObject("weight_ring");
    ASSERT_NE(ringJson, nullptr);
    EXPECT_EQ(*ringJson->getInteger("bytes"), 0);
    EXPECT_EQ(ringJson->getString("why_not")->str(), rtx.persistent.ringWhy);
  }

  // The piece sizes mirror gemv.cuh's MmaRingGeometry: 16 rows of up to 512 columns (K rounded up to 32),
  // each row padded to 64 bytes modulo 128, whatever the tile's FMA shape or epilogue.
  auto piece = [](int64_t n, int64_t k, GemvTile tile, Epilogue e = Epilogue{}, int64_t rows = 1) {
    GemvSpec s(n, k, e, tile);
    auto streamed = s.asStreamingTask(rows, 264);
    return streamed ? streamed->ringPieceBytes() : -1;
  };
  EXPECT_EQ(piece(2048, 2048, GemvTile{1, 1, 4, false}), 16 * (1024 + 64)); // 4 pieces along K
  EXPECT_EQ(piece(2048, 5632, GemvTile{1, 1, 4, false}), 16 * (1024 + 64)); // 11 pieces
  EXPECT_EQ(piece(11264, 2048, GemvTile{1, 2, 4, false}, Epilogue::gated(Activation::Silu)), 16 * (1024 + 64));
  EXPECT_EQ(piece(768, 768, GemvTile{1, 1, 4, false}), 16 * (1024 + 64));   // 512 + 256 columns
  EXPECT_EQ(piece(321, 200, GemvTile{1, 2, 4, false}), 16 * 448); // K 200 -> 224 columns: 448 bytes, 64 mod 128
  EXPECT_EQ(piece(64, 32, GemvTile{1, 1, 4, false}), 16 * 64);              // one 64-byte row: already 64 mod 128
  EXPECT_EQ(piece(2048, 2048, GemvTile{8, 1, 4, true}, Epilogue{}, 8), 16 * (1024 + 64)) << "the tensor-core task too";
  EXPECT_EQ(GemvSpec(2048, 2048, Epilogue{}, GemvTile{1, 1, 4, false}).ringPieceBytes(), 0) << "not streamed";
  {
    Epilogue lmHead;
    lmHead.argmax = true;
    auto streamed = GemvSpec(32000, 2048, lmHead, GemvTile{1, 8, 4, false}).asStreamingTask(1, 264);
    ASSERT_NE(streamed, nullptr) << "the lm_head's argmax streams too";
    // 2000 groups of 16 rows over 264 blocks: 8 groups a tile, 250 tiles, one round.
    EXPECT_EQ(streamed->taskType(), "minfer::GemvMmaRingTask<32000, 2048, 1, 4, 8, minfer::EpiArgmax, minfer::ProNone>");
    EXPECT_EQ(streamed->launch(1).grid[0], 250u);
    llvm::Error launched = GemvSpec(32000, 2048, lmHead, GemvTile{1, 1, 4, true}).validate();
    ASSERT_TRUE(bool(launched)) << "as a launch, the mma.sync gemv still has no argmax";
    EXPECT_NE(llvm::toString(std::move(launched)).find("not the mma.sync kernel"), std::string::npos);
  }
  // Groups a tile: as few as take the tiles once round the grid, 1..8 (TinyLlama at 264 blocks: qkv 160 groups
  // -> 1, gate/up 704 -> 3, 235 tiles; Llama-3.2-1B's lm_head 8016 -> 8, 1002 tiles in four rounds).
  auto groupsOf = [](int64_t n, int grid) {
    auto t = GemvSpec(n, 2048, Epilogue{}, GemvTile{1, 1, 4, false}).asStreamingTask(1, grid);
    return t ? static_cast<const GemvSpec &>(*t).ringGroups : -1;
  };
  EXPECT_EQ(groupsOf(2560, 264), 1);
  EXPECT_EQ(groupsOf(11264, 264), 3);
  EXPECT_EQ(groupsOf(128256, 264), 8);
  EXPECT_EQ(groupsOf(32, 0), 2) << "a grid of 0 counts as 1";
  {
    GemvSpec gated(11264, 2048, Epilogue::gated(Activation::Silu), GemvTile{1, 2, 4, false});
    gated.pro = Prologue{Prologue::Kind::Rms};
    auto t = gated.asStreamingTask(1, 264);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->launch(1).grid[0], 235u);
    // MmaRingScratch: 3 groups x 3 warps' partial sums (3 x 3 x 512 bytes), gamma's statistics (8), the
    // prologue's scratch (4 warps x 4 bytes), rounded up to 16.
    EXPECT_EQ(t->launch(1).sharedBytes, 4608u + 32u);
  }
  auto three = GemvSpec(2048, 2048, Epilogue{}, GemvTile{2, 1, 4, false}).asStreamingTask(3, 264);
  ASSERT_NE(three, nullptr);
  EXPECT_EQ(static_cast<const GemvSpec &>(*three).tile.maxM, 4) << "maxM covers the ring's one pass over 3 rows";
  EXPECT_EQ(GemvSpec(2048, 2048, Epilogue{}, GemvTile{16, 1, 4, true}).asStreamingTask(17, 264), nullptr)
      << "17 rows are above the tensor-core gemv's 16";
}

// --emit=plan shows the task graph: each task, the launch it replaces, its tiles, what it waits for and the
// weight bytes it streams; a plan without the kernel says why.
TEST(PersistentPlan, JsonShowsTheTaskGraphOrWhyNot) {
  Plan p = planExample("tinyllama-1.1b", 1);
  llvm::json::Object j = p.toJSON();
  const llvm::json::Object *pj = j.getObject("decode")->getObject("persistent");
  ASSERT_NE(pj, nullptr);
  EXPECT_EQ(*pj->getString("path"), "persistent");
  EXPECT_EQ(*pj->getInteger("launches_after"), 2); // select, advance
  EXPECT_EQ(*pj->getObject("weight_ring")->getInteger("bytes"), 0); // not asked for
  EXPECT_FALSE(pj->getObject("weight_ring")->getString("why_not").hasValue());
  const llvm::json::Array *tasks = pj->getArray("tasks");
  ASSERT_NE(tasks, nullptr);
  ASSERT_EQ(tasks->size(), p.persistent.tasks.size());
  int64_t weights = 0;
  for (size_t i = 0; i < tasks->size(); ++i) {
    const llvm::json::Object &t = *(*tasks)[i].getAsObject();
    EXPECT_EQ(*t.getInteger("task"), static_cast<int64_t>(i));
    if (i > 0) {
      EXPECT_EQ(*t.getInteger("waits_for"), static_cast<int64_t>(i - 1));
    }
    EXPECT_GT(*t.getInteger("tiles"), 0);
    weights += *t.getInteger("weight_bytes");
  }
  // TinyLlama's matmul weights: 22 layers of (2560 + 2048 + 11264) x 2048 + 2048 x 5632, and the lm_head.
  EXPECT_EQ(weights, (22 * ((2560 + 2048 + 11264) * 2048LL + 2048 * 5632LL) + 32000 * 2048LL) * 2);
  EXPECT_EQ(*pj->getInteger("weight_bytes"), weights);
  // The first qkv: 2560 rows, 2 a warp, 4 warps a block.
  EXPECT_EQ(*(*tasks)[1].getAsObject()->getInteger("tiles"), 2560 / 8);

  llvm::json::Object bj = planExample("tinyllama-1.1b", 16).toJSON();
  const llvm::json::Object *why = bj.getObject("decode")->getObject("persistent");
  EXPECT_EQ(*why->getString("path"), "launches");
  EXPECT_TRUE(why->getString("why")->contains("batches up to 8"));
}

// NVRTC compiles the kernel for Hopper (with and without the weight ring) and for Ada (no GPU needed); its
// entry names every body.
TEST(PersistentPlan, TheKernelCompilesForSm90aAndSm89) {
  for (auto [target, ring] : {std::pair{"sm_90a", false}, std::pair{"sm_89", false}, std::pair{"sm_90a", true}}) {
    SCOPED_TRACE(std::string(target) + (ring ? " with the weight ring" : ""));
    Plan p = planExample("gpt2-124m", 1, true, target, ring);
    ASSERT_TRUE(p.persistent.built()) << p.persistent.why;
    EXPECT_EQ(static_cast<const PersistentDecodeSpec &>(*p.kernels[p.persistent.kernel]).ringBytes > 0, ring);
    const KernelSpec &k = *p.kernels[p.persistent.kernel];
    for (const std::string &t : static_cast<const PersistentDecodeSpec &>(k).taskTypes)
      EXPECT_NE(k.entry().find(t), std::string::npos) << t;
    auto compiled = compileKernel(kernelSource(k), *parseTarget(target));
    ASSERT_TRUE(bool(compiled)) << llvm::toString(compiled.takeError());
    EXPECT_FALSE(compiled->cubin.empty());
  }
}

} // namespace
