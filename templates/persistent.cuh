// templates/persistent.cuh — the decode step as one persistent kernel: every launch of the step becomes a
// task, run by blocks that stay resident for the whole step.
//
// At batch 1-8 a decode step is ~6 small kernels per layer, each moving 1-50 MB; launched one by one, each
// ramps up and drains, and a third of a 1B model's step is those bubbles. Here the step's launches are a
// task list (PersistentTask, in launch order, filled by the runtime from the plan), and the grid is as many
// blocks as fit on the device at once (the runtime sizes it from the occupancy and launches it cooperative,
// so the driver refuses a grid that cannot be resident together: no block waits on a block that never runs). Task i's tiles are its launch's blocks; tile t of task i runs
// on block (t + start_i) mod G, where start_i rotates by the tiles before it, so small tasks land on
// different blocks. Each block walks the tasks in order and runs its tiles through the family's body (the
// same code as the kernel of its own: GemvTask, AttentionDecodeTask, ...).
//
// Dependencies are counters in global memory, one per task: a block that finishes a tile of task i adds 1
// to counters[i] (release, after a block barrier so every thread's writes are in). A body calls its wait
// where the kernel of its own would call griddepcontrol.wait, i.e. after prefetching its weights into L2:
// TaskWait spins (one lane per warp, acquire) until counters[i - 1] holds all of task i - 1's tiles. That
// orders the tasks as the launches were ordered: every tile of task i - 1 waited in turn for all of task
// i - 2, so everything an earlier task wrote is visible, and every read an earlier task made of a buffer
// task i overwrites is done. Before running a tile, a block starts its next tile's weights towards L2
// (Task::prefetch). Task 0 waits for the kernel before this one (griddepcontrol.wait): the step's inputs
// come from there.
//
// Status (H200, bench/NOTES.md session 9): correct on every golden model, but 0.58-0.79x the speed of the
// launches: its 4 blocks an SM (the registers of its largest body) keep too few weight loads in flight, and
// each of the ~6 hops a layer costs 3-6 us. Streaming the weights through shared memory and fewer hops are
// the next steps; MINFER_PERSISTENT_TRACE=FILE (runtime/Session.h) gives each task's time.
//
// Data written by an earlier task is read with plain loads (MINFER_TASKS_SHARE_MEMORY: common.cuh's
// loadProduced), never through the read-only path, which may hold lines from before the write.
//
// The counters must be zero when the kernel starts; the last block to finish (counters[num_tasks] counts
// the blocks done) sets them back to zero, so the next step (a CUDA graph replay) starts clean.
#pragma once

#define MINFER_TASKS_SHARE_MEMORY 1

#include "attention_decode.cuh"
#include "common.cuh"
#include "embedding.cuh"
#include "gemv.cuh"
#include "norm.cuh"
#include "pointwise.cuh"
#include "ptx.cuh"

namespace minfer {

// One launch of the decode step as a task: which body (an index into the kernel's Tasks...), its grid, and
// its Params as the launch would have had them. 16-byte aligned: Params hold pointers.
inline constexpr int kTaskParamsBytes = 256; // compiler/kernels/Params.h kMaxParamsBytes
struct alignas(16) PersistentTask {
  int kind;
  int nx, ny, nz; // the launch's grid: tiles = nx * ny * nz
  unsigned char params[kTaskParamsBytes];
};

// The kernel's one argument; its host mirror (same field names and offsets, checked in every generated
// source) is in compiler/kernels/Persistent.h.
struct PersistentParams {
  const PersistentTask *tasks; // [num_tasks], in launch order
  unsigned *counters;          // [num_tasks + 1], zero at the start: tiles done per task, then blocks done
  unsigned long long *trace;   // null, or [num_tasks + 1]: when each task's last tile finished, then when
                               // block 0 started (%globaltimer, ns): where a step's time goes, per task
  int num_tasks;
};

// Waits until task `i - 1` has finished all its tiles (task 0: the kernel before this one).
struct TaskWait {
  const unsigned *counter; // counters[i - 1]; null for task 0
  unsigned tiles;          // task i - 1's tiles
  __device__ __forceinline__ void operator()() const {
    if (!counter) {
      gridDependencyWait();
      return;
    }
    // One lane per warp polls; __syncwarp hands what its acquire made visible to the other lanes.
    if (threadIdx.x % kWarpSize == 0)
      while (loadAcquireGpu(counter) < tiles) __nanosleep(32);
    __syncwarp();
  }
};

namespace persistent_detail {

// Runs Tasks...[kind]'s body on `tile`.
template <class... Tasks>
__device__ __forceinline__ void runTask(int kind, const unsigned char *params, const Tile &tile, const TaskWait &wait) {
  int k = 0;
  (void)((kind == k++ ? (Tasks::run(*reinterpret_cast<const typename Tasks::Params *>(params), tile, wait), true)
                      : false) ||
         ...);
}

// Starts Tasks...[kind]'s weights for `tile` towards L2 (nothing for tasks without weights).
template <class... Tasks> __device__ __forceinline__ void prefetchTask(int kind, const unsigned char *params, const Tile &tile) {
  int k = 0;
  (void)((kind == k++ ? (Tasks::prefetch(*reinterpret_cast<const typename Tasks::Params *>(params), tile), true) : false) ||
         ...);
}

__device__ __forceinline__ int tilesOf(const PersistentTask &t) { return t.nx * t.ny * t.nz; }
__device__ __forceinline__ Tile tileAt(const PersistentTask &t, int i) {
  return {i % t.nx, (i / t.nx) % t.ny, i / (t.nx * t.ny), t.nx, t.ny, t.nz};
}

// A block's place in the task list: tile `tile` of task `task`, whose tile 0 runs on block `start`.
struct Cursor {
  int task, tile, start;
};

// The block's first tile in task `from` or later, given the block that runs task `from`'s tile 0; false
// when it has none left.
__device__ __forceinline__ bool seek(const PersistentParams &p, int self, int blocks, int from, int start, Cursor &c) {
  for (int i = from; i < p.num_tasks; ++i) {
    const int tiles = tilesOf(p.tasks[i]), first = (self - start + blocks) % blocks;
    if (first < tiles) {
      c = {i, first, start};
      return true;
    }
    start = (start + tiles) % blocks;
  }
  return false;
}

// The block's tile after `c`: the same task's next (blocks further on), else the first in a later task.
__device__ __forceinline__ bool advance(const PersistentParams &p, int self, int blocks, Cursor &c) {
  const int tiles = tilesOf(p.tasks[c.task]);
  if (c.tile + blocks < tiles) {
    c.tile += blocks;
    return true;
  }
  return seek(p, self, blocks, c.task + 1, (c.start + tiles) % blocks, c);
}

} // namespace persistent_detail

// Grid: at most the blocks the device holds at once (the runtime's occupancy check); block THREADS;
// dynamic shared memory: the most any task's launch takes. Each block runs its tiles in task order; before
// running one, it starts the weights of the one after it towards L2, so they stream in while this tile and
// the wait for the task before it take their time.
template <int THREADS, class... Tasks>
__global__ void __launch_bounds__(THREADS) persistent_decode(const PersistentParams p) {
  using namespace persistent_detail;
  static_assert(sizeof...(Tasks) >= 1, "persistent_decode: no tasks");
  static_assert(((Tasks::kThreads == THREADS || Tasks::kThreads == 0) && ...),
                "persistent_decode: every task's body must be instantiated for the kernel's block size");
  static_assert(((sizeof(typename Tasks::Params) <= kTaskParamsBytes) && ...), "persistent_decode: Params too large");
  const int blocks = gridDim.x, self = blockIdx.x;
  if (p.trace && self == 0 && threadIdx.x == 0) p.trace[p.num_tasks] = globalNanoseconds();
  Cursor cur;
  bool have = seek(p, self, blocks, 0, 0, cur);
  if (have) prefetchTask<Tasks...>(p.tasks[cur.task].kind, p.tasks[cur.task].params, tileAt(p.tasks[cur.task], cur.tile));
  while (have) {
    Cursor next = cur;
    const bool more = advance(p, self, blocks, next);
    if (more) prefetchTask<Tasks...>(p.tasks[next.task].kind, p.tasks[next.task].params, tileAt(p.tasks[next.task], next.tile));
    const PersistentTask &task = p.tasks[cur.task];
    const TaskWait wait{cur.task ? p.counters + cur.task - 1 : nullptr,
                        cur.task ? static_cast<unsigned>(tilesOf(p.tasks[cur.task - 1])) : 0u};
    runTask<Tasks...>(task.kind, task.params, tileAt(task, cur.tile), wait);
    __syncthreads(); // every thread's writes of the tile are in, and the shared memory is free again
    if (threadIdx.x == 0) {
      if (!p.trace) {
        addReleaseGpu(p.counters + cur.task, 1);
      } else if (fetchAddReleaseGpu(p.counters + cur.task, 1) + 1 == static_cast<unsigned>(tilesOf(task))) {
        p.trace[cur.task] = globalNanoseconds(); // the task's last tile
      }
    }
    cur = next;
    have = more;
  }
  // The last block out resets the counters for the next launch: every other block has passed all its
  // waits by the time it counts itself done.
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(p.counters + p.num_tasks, 1u) == static_cast<unsigned>(blocks) - 1) {
      for (int i = 0; i <= p.num_tasks; ++i) atomicExch(p.counters + i, 0u);
      __threadfence();
    }
  }
}

} // namespace minfer
