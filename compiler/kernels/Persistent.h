// compiler/kernels/Persistent.h — the decode step as one persistent kernel (templates/persistent.cuh): the
// step's launches become tasks of a kernel whose blocks stay resident for the whole step, ordered by
// counters in global memory instead of by kernel boundaries.
//
// The plan (compiler/Plan.cpp, planPersistentDecode) turns the decode phase's op launches into tasks: each
// launch's spec re-instantiated for the persistent block size (KernelSpec::asTask), its Params as the launch
// would have had them, its grid as the task's tiles. The kernel instantiates one body per distinct task
// spec (its `kind`); the runtime fills the task table (PersistentTaskHost) per batch size and launches as
// many blocks as the device holds at once (never more: a block spinning on a tile that no resident block
// will run would hang the step).
#pragma once

#include "compiler/kernels/KernelSpec.h"

#include <cstdint>
#include <string>
#include <vector>

namespace minfer {

struct PersistentParams { // persistent.cuh
  uint64_t tasks = 0;     // PersistentTaskHost [num_tasks], in launch order
  uint64_t counters = 0;  // u32 [num_tasks + 1], zero at the start (the kernel leaves them zero)
  uint64_t trace = 0;     // null, or u64 [num_tasks + 1]: each task's end, then the kernel's start (ns)
  int32_t num_tasks = 0;
  static const ParamsLayout &layout();
};

// One task as the kernel reads it (persistent.cuh PersistentTask): the body, the launch's grid, its Params.
struct alignas(16) PersistentTaskHost {
  int32_t kind = 0;
  int32_t nx = 1, ny = 1, nz = 1;
  uint8_t params[kMaxParamsBytes] = {};
};
static_assert(sizeof(PersistentTaskHost) == 16 + kMaxParamsBytes, "PersistentTaskHost: persistent.cuh's layout");

struct PersistentDecodeSpec : KernelSpec {
  // 4 warps a block: the block size of the decode gemvs the tuner picks at batch 1 (w4) and of decode
  // attention, and small enough that several blocks share an SM (attention's 54-68 KB of shared memory
  // allows 3-4), so a small task's tiles spread over many SMs.
  static constexpr int kThreads = 128;
  // Blocks an SM the plan expects when it shapes the tasks' tiles (the runtime finds the real number): 128
  // registers a thread (head dim 64; ~170 at 128) and attention's 37 KB rings leave room for 4.
  static constexpr int kBlocksPerSmEstimate = 4;
  // With the weight ring (sm_90 and later): blocks an SM the plan sizes the ring for, each with its own
  // ring in the shared memory the SM has left after the tasks' share.
  static constexpr int kRingBlocksPerSm = 2;

  int threads = kThreads;
  std::vector<std::string> taskTypes; // the bodies, by kind (KernelSpec::taskType of each distinct task spec)
  unsigned sharedBytes = 0;           // dynamic shared memory: the most any task's launch takes
  // The weight ring (templates/persistent.cuh WeightRing), after the tasks' shared memory: ringBytes from
  // ringOffset(). 0 when no task streams its weights.
  unsigned ringBytes = 0;
  unsigned ringOffset() const { return (sharedBytes + 127) / 128 * 128; } // sharedBytes rounded up to 128
  // The block: `threads` for the bodies, and with a ring one more warp, its producer.
  int blockThreads() const { return threads + (ringBytes ? 32 : 0); }

  // persistent_decode_t128_k7_3f2a9c10: block size, number of bodies, and a hash of their types (and ring
  // layout); persistent_decode_t128_ring73728_k7_... with a weight ring of 73728 bytes.
  std::string name() const override;
  std::string header() const override { return "persistent.cuh"; }
  const ParamsLayout &params() const override { return PersistentParams::layout(); }
  // minfer::persistent_decode<128, RING_OFFSET, RING_BYTES, minfer::EmbeddingTask<...>, ...>
  std::string entry() const override;
  // Block blockThreads(), the dynamic shared memory (the tasks' and the ring); grid.x 1: the runtime sets the grid
  // from the device's occupancy (blocks per SM x SMs), which is not known here.
  LaunchDims launch(int64_t rows) const override;
  llvm::json::Object toJSON() const override;
  llvm::Error validate(const Target &) const override;
};

} // namespace minfer
