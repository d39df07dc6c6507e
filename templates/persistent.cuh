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
// Status (H200, bench/NOTES.md sessions 9, 16 and 17): correct on every golden model, but slower than the
// launches: 0.74x at batch 1 (TinyLlama 1.182 ms against 0.874, session 17). Its few blocks an SM (the
// registers of its largest body) keep too few weight loads in flight, and each of the ~5 hops a layer costs
// 2-6 us.
// MINFER_PERSISTENT_TRACE=FILE (runtime/Session.h) gives each task's time.
//
// The weight ring (WeightRing below, PlanOptions::weightRing, off by default): the matmul tasks' W streams
// into shared memory ahead of the tasks, across their dependencies, fed by a producer warp, and the
// tensor-core body reads it from there (gemv.cuh GemvMmaRingTask). TinyLlama 1.273 ms at batch 1, 1.309 at
// batch 2 (launches 0.873 and 0.916, session 17). What holds it back (session 16):
// the blocks' streams (~11 GB/s a block with ~50 KB in flight), and the tasks whose tiles fill only half the
// grid (o and down projections: 128 tiles of 16 rows on 264 blocks).
//
// Data written by an earlier task is read with plain loads (MINFER_TASKS_SHARE_MEMORY: common.cuh's
// loadProduced), never through the read-only path, which may hold lines from before the write.
//
// The counters must be zero when the kernel starts; the last block to finish (counters[num_tasks] counts
// the blocks done) sets them back to zero, so the next step (a CUDA graph replay) starts clean.
#pragma once

#define MINFER_TASKS_SHARE_MEMORY 1
#define MINFER_TASK_THREADS 128 // the bodies' block (compiler/kernels/Persistent.h PersistentDecodeSpec::kThreads)

#include "attention_decode.cuh"
#include "common.cuh"
#include "embedding.cuh"
#include "gemv.cuh"
#include "hopper.cuh"
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

// Waits until task `task - 1` has finished all its tiles (task 0: the kernel before this one). `known` is the
// calling thread's last task it saw finished (-2: none yet, -1: the kernel before): a block's second and
// later tiles of a task return at once instead of polling the counter again.
struct TaskWait {
  const unsigned *counter; // counters[task - 1]; null for task 0
  unsigned tiles;          // task - 1's tiles
  int task;
  int *known;
  __device__ __forceinline__ void operator()() const {
    if (*known >= task - 1) return;
    if (!counter) {
      gridDependencyWait();
    } else {
      // One lane per warp polls, relaxed, then acquires once: an acquire per poll invalidated the SM's L1
      // each time, under the other block's running tile (its activations, gamma, the task table). __syncwarp
      // hands what the acquire made visible to the other lanes.
      if (threadIdx.x % kWarpSize == 0) {
        while (loadRelaxedGpu(counter) < tiles) __nanosleep(32);
        (void)loadAcquireGpu(counter); // reads the count just seen or a later one: all the tiles' releases
      }
      __syncwarp();
    }
    *known = task - 1;
  }
};

// A task whose weights stream through the kernel's weight ring (gemv.cuh GemvMmaRingTask): it has kPieces
// pieces a tile, describes each (piece), and its body takes the ring.
template <class T>
concept StreamsWeights = requires { T::kPieces; };

namespace persistent_detail {

template <class T> struct TypeTag {
  using type = T;
};
// Calls f(TypeTag<T>{}) with T = Tasks...[kind].
template <class... Tasks, class F> __device__ __forceinline__ void withTask(int kind, F &&f) {
  int k = 0;
  (void)((kind == k++ ? (f(TypeTag<Tasks>{}), true) : false) || ...);
}
template <class T> __device__ __forceinline__ const typename T::Params &paramsOf(const unsigned char *params) {
  return *reinterpret_cast<const typename T::Params *>(params);
}

// Runs Tasks...[kind]'s body on `tile`, with its Params copied out of the task table first: read through a
// reference, every use of a field after a barrier, an mbarrier wait or any other asm with a memory clobber
// was a load from the table in global memory again (the norm prologue's gamma pointer, twice a ring piece,
// each behind the L1 invalidation of the last acquire); a kernel of its own has them in the constant bank.
template <class... Tasks, class Ring>
__device__ __forceinline__ void runTask(int kind, const unsigned char *params, const Tile &tile, const TaskWait &wait,
                                        Ring &ring) {
  withTask<Tasks...>(kind, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const typename T::Params local = paramsOf<T>(params);
    if constexpr (StreamsWeights<T>) T::run(local, tile, wait, ring);
    else T::run(local, tile, wait);
  });
}
// Starts Tasks...[kind]'s weights for `tile` towards L2 (nothing for tasks without weights, or whose weights
// stream through the ring).
template <class... Tasks> __device__ __forceinline__ void prefetchTask(int kind, const unsigned char *params, const Tile &tile) {
  withTask<Tasks...>(kind, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!StreamsWeights<T>) T::prefetch(paramsOf<T>(params), tile);
  });
}
// Pieces a tile of Tasks...[kind] streams through the ring (0: none).
template <class... Tasks> __device__ __forceinline__ int piecesOf(int kind) {
  int n = 0;
  withTask<Tasks...>(kind, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (StreamsWeights<T>) n = T::kPieces;
  });
  return n;
}
// Piece j of `tile` of Tasks...[kind] (a task that streams).
template <class... Tasks>
__device__ __forceinline__ RingPiece pieceOf(int kind, const unsigned char *params, const Tile &tile, int j) {
  RingPiece r{nullptr, 0, 0, 0, 0};
  withTask<Tasks...>(kind, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (StreamsWeights<T>) r = T::piece(paramsOf<T>(params), tile, j);
  });
  return r;
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

// The weight ring: RING_BYTES of the block's dynamic shared memory that the weights of its streaming tiles
// (StreamsWeights) pass through, in the order the block runs them, as pieces of at most RING_BYTES / 2.
// A warp of its own after the bodies' threads is the producer: it walks the block's tiles
// ahead of the block on its own cursor and issues each piece's copies (cp.async.bulk onto the entry's `full`
// mbarrier) as soon as the ring has room, whatever the task's dependencies, so a block's next weights stream
// in while it waits for a task before or runs one without weights. The body is the consumer: wait(bytes)
// for each piece in order, release() when the warp is done with it (each consumer warp arrives on the
// entry's `empty` mbarrier; no block barrier, so the warps of a tile never wait for each other or for the
// producer between pieces).
//
// Both sides place piece i at the same offset: at the next free byte, or at the ring's start when it would
// not fit before the end (`place`), on a position that only grows (offset = position % RING_BYTES). The
// producer issues a piece only where it ends within RING_BYTES of the end of the last piece every consumer
// warp has released, and with fewer than kEntries pieces in flight, so a piece never lands on bytes still
// being read; since no piece is larger than half the ring, the piece the consumers wait for always fits once
// every piece before it is released, so they never wait on a piece that cannot be issued.
template <int RING_BYTES, int CONSUMERS, int SCRATCH, class... Tasks> struct WeightRing {
  static constexpr unsigned kEntries = 16;
  static constexpr int kScratchBytes = SCRATCH;
  const PersistentParams &p;
  int self, blocks;
  unsigned base, full, empty; // shared addresses: the ring, kEntries mbarriers each
  unsigned char *scratch;     // the tasks' kScratchBytes of dynamic shared memory before the ring: a streaming
                              // body's own (its launch's dynamic shared memory)
  // The consumer (every consumer thread keeps the same copy).
  unsigned consumed = 0;
  unsigned long long cpos = 0, cend = 0;

  __device__ __forceinline__ static unsigned long long place(unsigned long long pos, unsigned bytes) {
    const unsigned long long off = pos % RING_BYTES;
    return off + bytes > RING_BYTES ? pos + (RING_BYTES - off) : pos;
  }
  // Before the kernel's first barrier, by one thread.
  __device__ __forceinline__ void init() const {
    for (unsigned i = 0; i < kEntries; ++i) {
      mbarInit(full + 8 * i, 1);
      mbarInit(empty + 8 * i, CONSUMERS / kWarpSize);
    }
    mbarInitFence();
  }
  // The consumer's next piece, `bytes` long (rows x stride, as the task's piece() says): waits until it has
  // landed and returns its shared address.
  __device__ __forceinline__ unsigned wait(unsigned bytes) {
    const unsigned long long start = place(cpos, bytes);
    cend = start + bytes;
    mbarWait(full + (consumed % kEntries) * 8, (consumed / kEntries) & 1);
    return base + static_cast<unsigned>(start % RING_BYTES);
  }
  // The calling warp is done with the piece wait() returned last (its reads are in registers).
  __device__ __forceinline__ void release() {
    __syncwarp();
    if (threadIdx.x % kWarpSize == 0) mbarArrive(empty + (consumed % kEntries) * 8);
    cpos = cend;
    ++consumed;
  }
  // The producer, a whole warp: every piece of the block's tiles from `c` on, in order. The lanes walk the
  // tiles together; lane 0 arms the entry's mbarrier, then each lane issues its rows' copies (a piece's 16
  // copies one after another from a single thread held a block's stream to ~10 GB/s).
  __device__ __forceinline__ void produce(Cursor c, bool have) const {
    const int lane = threadIdx.x % kWarpSize;
    unsigned issued = 0, released = 0;
    unsigned long long pos = 0, head = 0; // where the next piece may go; the end of the last released piece
    unsigned long long ends[kEntries];    // the end of each piece in flight, by entry
    for (; have; have = advance(p, self, blocks, c)) {
      const PersistentTask &t = p.tasks[c.task];
      const int pieces = piecesOf<Tasks...>(t.kind);
      const Tile tile = tileAt(t, c.tile);
      for (int j = 0; j < pieces; ++j) {
        const RingPiece piece = pieceOf<Tasks...>(t.kind, t.params, tile, j);
        const unsigned bytes = static_cast<unsigned>(piece.rows) * piece.stride;
        const unsigned long long start = place(pos, bytes);
        while (issued - released >= kEntries || start + bytes - head > RING_BYTES) { // wait for the oldest
          const unsigned e = released % kEntries;
          mbarWait(empty + 8 * e, (released / kEntries) & 1);
          head = ends[e];
          ++released;
        }
        const unsigned e = issued % kEntries, bar = full + 8 * e, dst = base + static_cast<unsigned>(start % RING_BYTES);
        if (lane == 0) mbarArriveExpectTx(bar, static_cast<unsigned>(piece.rows) * piece.bytes);
        __syncwarp(); // the entry is armed before any of its bytes can land
        if (piece.bytes == piece.srcStride && piece.stride == piece.srcStride) { // whole rows: one run of W
          if (lane == 0 && piece.rows > 0) bulkLoad(dst, piece.src, static_cast<unsigned>(piece.rows) * piece.bytes, bar);
        } else {
          for (int r = lane; r < piece.rows; r += kWarpSize)
            bulkLoad(dst + r * piece.stride, static_cast<const char *>(piece.src) + static_cast<long long>(r) * piece.srcStride,
                     piece.bytes, bar);
        }
        ends[e] = start + bytes;
        pos = start + bytes;
        ++issued;
      }
    }
  }
};

} // namespace persistent_detail

template <class T> __host__ __device__ constexpr unsigned pieceBytesOne() {
  if constexpr (StreamsWeights<T>) return T::kMaxPieceBytes;
  else return 0;
}

// Grid: at most the blocks the device holds at once (the runtime's occupancy check); block THREADS, plus the
// weight ring's producer warp when there is a ring; dynamic shared memory: RING_OFFSET (the most any task's
// launch takes, rounded up to 128) and, from there, the weight ring's RING_BYTES (0: no task streams its
// weights). Each block runs its tiles in task order; before running one, it starts the weights of the one
// after it towards L2 (tasks without the ring), so they stream in while this tile and the wait for the task
// before it take their time.
template <int THREADS, int RING_OFFSET, int RING_BYTES, class... Tasks>
__global__ void __launch_bounds__(THREADS + (RING_BYTES > 0 ? kWarpSize : 0)) persistent_decode(const PersistentParams p) {
  using namespace persistent_detail;
  static_assert(sizeof...(Tasks) >= 1, "persistent_decode: no tasks");
  static_assert(THREADS == MINFER_TASK_THREADS, "persistent_decode: the bodies' barriers count MINFER_TASK_THREADS threads");
  static_assert(((Tasks::kThreads == THREADS || Tasks::kThreads == 0) && ...),
                "persistent_decode: every task's body must be instantiated for the kernel's block size");
  static_assert(((sizeof(typename Tasks::Params) <= kTaskParamsBytes) && ...), "persistent_decode: Params too large");
  static_assert(RING_OFFSET % 128 == 0 && RING_BYTES % 128 == 0 && RING_BYTES >= 0, "persistent_decode: ring layout");
  static_assert(((2 * pieceBytesOne<Tasks>() <= static_cast<unsigned>(RING_BYTES)) && ...),
                "persistent_decode: a streamed piece is larger than half the weight ring");
  const int blocks = gridDim.x, self = blockIdx.x;
  if (p.trace && self == 0 && threadIdx.x == 0) p.trace[p.num_tasks] = globalNanoseconds();
  extern __shared__ __align__(128) unsigned char persistentShared[];
  using Ring = WeightRing<(RING_BYTES > 0 ? RING_BYTES : 1), THREADS, RING_OFFSET, Tasks...>;
  __shared__ __align__(8) unsigned long long ringBars[RING_BYTES > 0 ? 2 * Ring::kEntries : 1];
  Ring ring{p, self, blocks, smemAddress(persistentShared) + RING_OFFSET, smemAddress(ringBars),
            smemAddress(ringBars) + 8 * Ring::kEntries, persistentShared};
  Cursor cur;
  bool have = seek(p, self, blocks, 0, 0, cur);
  if constexpr (RING_BYTES > 0) {
    requireDynamicShared(RING_OFFSET + RING_BYTES);
    if (threadIdx.x == 0) ring.init();
    __syncthreads(); // the whole block, the producer warp included, once
    if (threadIdx.x >= THREADS) { // the producer warp
      ring.produce(cur, have);
      return;
    }
  }
  if (have) prefetchTask<Tasks...>(p.tasks[cur.task].kind, p.tasks[cur.task].params, tileAt(p.tasks[cur.task], cur.tile));
  int known = -2; // the last task this thread saw finished (TaskWait)
  while (have) {
    Cursor next = cur;
    const bool more = advance(p, self, blocks, next);
    if (more) prefetchTask<Tasks...>(p.tasks[next.task].kind, p.tasks[next.task].params, tileAt(p.tasks[next.task], next.tile));
    const PersistentTask &task = p.tasks[cur.task];
    const TaskWait wait{cur.task ? p.counters + cur.task - 1 : nullptr,
                        cur.task ? static_cast<unsigned>(tilesOf(p.tasks[cur.task - 1])) : 0u, cur.task, &known};
    runTask<Tasks...>(task.kind, task.params, tileAt(task, cur.tile), wait, ring);
    blockSync(); // every thread's writes of the tile are in, and the shared memory is free again
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
