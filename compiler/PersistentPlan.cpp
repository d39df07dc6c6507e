// compiler/PersistentPlan.cpp — the decode step's op launches as the tasks of one persistent kernel
// (compiler/kernels/Persistent.h, templates/persistent.cuh), where every one of them has a task form.
#include "compiler/Plan.h"
#include "compiler/kernels/Persistent.h"

#include <algorithm>
#include <map>

namespace minfer {

namespace {

// The kernel, its matmul tasks streaming their weights through the ring where `ring` says so and it fits.
void planTasks(Plan &plan, bool ring) {
  PersistentDecode &pd = plan.persistent;
  pd = {};
  auto refuse = [&](std::string why) {
    pd = {};
    pd.why = std::move(why);
  };
  if (plan.options.maxBatch > kMaxPersistentBatch)
    return refuse("the decode batch is " + std::to_string(plan.options.maxBatch) + "; the persistent kernel is built for " +
                  "batches up to " + std::to_string(kMaxPersistentBatch));
  const int threads = PersistentDecodeSpec::kThreads;
  // The grid the runtime will find (blocks resident at once), estimated for shaping tiles.
  const int grid = plan.target.nominalSmCount() *
                   (ring ? PersistentDecodeSpec::kRingBlocksPerSm : PersistentDecodeSpec::kBlocksPerSmEstimate);
  auto spec = std::make_shared<PersistentDecodeSpec>();
  spec->threads = threads;
  std::map<std::string, int> kindOf;
  const std::vector<PlannedLaunch> &launches = plan.decode.launches;
  for (size_t i = 0; i < launches.size(); ++i) {
    const PlannedLaunch &l = launches[i];
    if (l.role != LaunchRole::Op) {
      if (pd.tasks.empty()) return refuse("the decode step starts with a " + launchRoleName(l.role).str() + " launch");
      // Select and advance stay launches; nothing after them may be an op.
      for (size_t j = i; j < launches.size(); ++j)
        if (launches[j].role == LaunchRole::Op) return refuse("the op launch of " + launches[j].op + " comes after the select launch");
      break;
    }
    const KernelSpec &kernel = *plan.kernels[l.kernel];
    if (l.perSequence) return refuse(kernel.name() + " (" + l.op + ") is launched once per sequence");
    std::shared_ptr<KernelSpec> task = kernel.asTask(threads, grid);
    if (!task)
      return refuse(kernel.name() + " (" + l.op + ") has no task form for blocks of " + std::to_string(threads) + " threads");
    if (ring)
      if (std::shared_ptr<KernelSpec> streamed = task->asStreamingTask(plan.options.maxBatch, grid)) task = std::move(streamed);
    auto [it, fresh] = kindOf.try_emplace(task->taskType(), static_cast<int>(kindOf.size()));
    if (fresh) spec->taskTypes.push_back(it->first);
    spec->sharedBytes = std::max(spec->sharedBytes, task->launch(plan.options.maxBatch).sharedBytes);
    pd.tasks.push_back({static_cast<int>(i), it->second, std::move(task)});
  }
  if (pd.tasks.empty()) return refuse("the decode step has no op launches");
  if (static_cast<int>(spec->sharedBytes) > plan.target.maxSharedBytesPerBlock())
    return refuse("its tasks need " + std::to_string(spec->sharedBytes) + " bytes of shared memory a block; " +
                  plan.target.name + " allows " + std::to_string(plan.target.maxSharedBytesPerBlock()));
  int64_t piece = 0;
  for (const PersistentDecode::Task &t : pd.tasks) piece = std::max(piece, t.spec->ringPieceBytes());
  if (piece > 0) {
    // The ring takes what an SM's shared memory leaves to each of kRingBlocksPerSm blocks after the tasks'
    // share, the SM's 1 KB a block reserved, and ~4 KB of the bodies' static shared memory; it must hold two
    // of the largest piece (persistent.cuh: a piece is at most half the ring).
    constexpr int64_t kStaticEstimate = 4096;
    const int64_t perBlock = plan.target.sharedBytesPerSm() / PersistentDecodeSpec::kRingBlocksPerSm - 1024 - kStaticEstimate;
    const int64_t bytes = (perBlock - spec->ringOffset()) / 128 * 128;
    if (bytes < 2 * piece) { // the ring is an option: the tasks keep their own loads
      planTasks(plan, false);
      pd.ringWhy = "the tasks' " + std::to_string(spec->sharedBytes) + " bytes of shared memory leave the weight ring " +
                   std::to_string(std::max<int64_t>(bytes, 0)) + " bytes a block; it needs two pieces of " +
                   std::to_string(piece);
      return;
    }
    spec->ringBytes = static_cast<unsigned>(bytes);
  }

  std::string name = spec->name();
  auto found = plan.kernelIndex.find(name);
  if (found != plan.kernelIndex.end()) {
    pd.kernel = found->second;
  } else {
    plan.kernels.push_back(std::move(spec));
    pd.kernel = plan.kernelIndex[name] = static_cast<int>(plan.kernels.size() - 1);
  }
  pd.threads = threads;
  auto workspace = [&](const char *name, size_t bytes, bool zeroed) {
    PlanBuffer b;
    b.name = name;
    b.kind = BufferKind::Workspace;
    b.fixedBytes = static_cast<int64_t>(bytes);
    b.zeroed = zeroed;
    plan.buffers.push_back(std::move(b));
    return static_cast<int>(plan.buffers.size() - 1);
  };
  const size_t n = pd.tasks.size();
  pd.table = workspace("persistent_tasks", n * sizeof(PersistentTaskHost), false);
  pd.counters = workspace("persistent_counters", (n + 1) * sizeof(uint32_t), true);
  pd.trace = workspace("persistent_trace", (n + 1) * sizeof(uint64_t), false);
}

} // namespace

void planPersistentDecode(Plan &plan) {
  // Matmul tasks stream their weights through a ring in shared memory where asked and the target has
  // cp.async.bulk.
  const bool ring = plan.options.weightRing && plan.target.major >= 9;
  planTasks(plan, ring);
  if (plan.options.weightRing && !ring && plan.persistent.built())
    plan.persistent.ringWhy = plan.target.name + " has no cp.async.bulk (sm_90 and later)";
}

} // namespace minfer
