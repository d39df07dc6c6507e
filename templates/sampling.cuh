// templates/sampling.cuh — the next token of each row of logits: greedy argmax, and temperature / top-k /
// top-p sampling with a counter-based random number, reproducible bit for bit on the host.
//
//   argmax<V, THREADS>(ArgmaxParams: logits [rows, V], out [rows], rows)
//   sample<V, THREADS>(SampleParams: logits [rows, V], out [rows], rows, temperature, top_k, top_p, seed,
//                      step, step_offset (nullable, added to step))
//
// One block of THREADS threads per row (ArgmaxSpec: 1024, SampleSpec: 512; RowOps.h says why).
//
// argmax: the lowest index of the largest logit (-0 and +0 are equal, like the interpreter's
// generateGreedy); NaN logits are skipped, and a row with nothing above -inf gives 0.
//
// sample — the algorithm, defined exactly (compiler/kernels/RowOps.cpp sampleReference is the host copy,
// and tests hold the kernel to it):
//   0. temperature <= 0 (or NaN), or top_k == 1: argmax.
//   1. key(l) is a 16-bit key of the bf16 logit, monotone in its value (-0 folded into +0; NaN gets key
//      0, below -inf). The candidates are totally ordered by (key descending, index ascending).
//   2. m = the largest non-NaN logit; a row with m = -inf (nothing finite) gives argmax.
//   3. The weight of a logit l is the fixed-point number W(l) = round_to_nearest_even(expf(d * invT) * 2^40)
//      with d = l - m (0 when l == m, so +inf logits work), invT = 1.0f / temperature (fp32), and W = 0
//      for NaN. W(m) = 2^40; a token more than ~28.4 * temperature below the top gets W = 0 and is never
//      drawn (its probability is below 2^-41 of the top token's: at most V * 2^-41 ≈ 7e-8 of the mass
//      for V = 152k). Integer weights make every sum exact and independent of summation order, so a run
//      is deterministic and the host reproduces the kernel bit for bit wherever expf agrees.
//   4. top-k: k = top_k, or V when top_k <= 0 or top_k >= V. K = the first k candidates in the order.
//      Ties at the k-th value are broken by index (the lowest indices stay), so exactly k remain.
//   5. top-p, applied when 0 < top_p < 1: S_k = sum of W over K, P = (double)top_p * (double)S_k; the kept
//      set is the shortest prefix of K (same order) whose summed W, converted to double, is >= P.
//      Otherwise the kept set is K.
//   6. S = sum of W over the kept set (S = 0 cannot happen for a finite m; it would give argmax).
//      bits = splitmix64(splitmix64(splitmix64(seed) ^ step) ^ row), u = (bits >> 11) * 2^-53 in [0, 1),
//      target = min((uint64)(u * (double)S), S - 1).
//   7. The token is the lowest index i in the kept set whose running sum of W over kept indices <= i is
//      > target: an inverse-CDF draw in vocabulary order, with probability W(i) / S for each kept token.
//
// How the block computes it without sorting V <= 152k logits: keys are 16 bits, so the k-th key and the
// top-p crossing are found by two-level radix selection in shared memory (4096 bins of the key's high 12
// bits, then 16 of the low 4 bits inside the chosen bin); counts and fixed-point masses are integers, so
// shared-memory atomics give the same sums in any order. Passes over the row (it stays in L2 after the
// first): the max (+ coarse counts for top-k); fine counts (top-k); coarse masses (top-p) or the total
// mass; fine counts in the crossing bin (top-p); the draw: each warp sums the kept mass of a contiguous
// chunk, a scan over the warps finds the chunk that holds the target, and that warp alone walks it in
// order. One block (one SM) does a whole row, which bounds the time of a decode step with few rows; see
// SampleSpec in compiler/kernels/RowOps.h for what was measured.
#pragma once

#include "common.cuh"
#include "pointwise.cuh"

namespace minfer {

// The kernels' one argument; its host mirror (same field names and offsets, checked in every generated
// source) is in compiler/kernels/RowOps.h.
struct ArgmaxParams {
  const bf16 *logits; // [rows, V]
  int *out;           // [rows]
  int rows;
};

struct SampleParams {
  const bf16 *logits;    // [rows, V]
  int *out;              // [rows]
  int rows;
  float temperature;
  int top_k;
  float top_p;
  unsigned long long seed;
  unsigned long long step;
  const int *step_offset; // nullable: added to `step` (the advance kernel's counter)
};


namespace sampling {

using u64 = unsigned long long;

// ---- the counter-based random number (host copy: compiler/kernels/RowOps.cpp) -------------------------

// splitmix64's output function (Steele, Lea, Flood 2014): a bijective 64-bit mix.
__device__ __forceinline__ u64 splitmix64(u64 z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__device__ __forceinline__ u64 randomBits(u64 seed, u64 step, u64 row) {
  return splitmix64(splitmix64(splitmix64(seed) ^ step) ^ row);
}

// -inf without <cmath>'s INFINITY, which NVRTC does not define.
__device__ __forceinline__ float negInf() { return __int_as_float(0xff800000); }

// ---- keys and weights ---------------------------------------------------------------------------------

// The order key of a bf16 logit: larger key <=> larger value; -0 shares +0's key, NaN is 0.
__device__ __forceinline__ unsigned orderKey(bf16 x) {
  unsigned b = __bfloat16_as_ushort(x);
  if ((b & 0x7FFFu) > 0x7F80u) return 0;  // NaN
  if (b == 0x8000u) b = 0;                 // -0 -> +0
  return (b & 0x8000u) ? (~b & 0xFFFFu) : (b | 0x8000u);
}

// The logit of a key (key 0 gives a NaN).
__device__ __forceinline__ float keyValue(unsigned key) {
  const unsigned b = (key & 0x8000u) ? (key & 0x7FFFu) : (~key & 0xFFFFu);
  return __uint_as_float(b << 16);
}

inline constexpr float kWeightOne = 1099511627776.0f; // 2^40: W of the top logit

__device__ __forceinline__ u64 fixedWeight(float l, float m, float invT) {
  const float d = (l == m) ? 0.f : l - m;
  const float w = expf(d * invT);
  return w > 0.f ? __float2ull_rn(w * kWeightOne) : 0ull; // NaN (from a NaN logit) -> 0
}

// ---- block-wide helpers -------------------------------------------------------------------------------

// The radix split of the 16-bit keys: 4096 coarse bins (the high 12 bits), then 16 fine ones. Logits crowd
// into a few binades; a bin spans 1/8 of a binade, so the lanes of a warp seldom add into the same one
// (with 8-bit coarse bins, ten bins took nearly every logit and the atomics serialised: 4-8x slower).
inline constexpr int kFineBits = 4;
inline constexpr int kCoarse = 1 << (16 - kFineBits); // 4096
inline constexpr int kFine = 1 << kFineBits;          // 16
inline constexpr unsigned kFull = 0xffffffffu;

struct Shared {
  u64 hist[kCoarse]; // coarse masses, or coarse counts through a 32-bit view (32 KB)
  unsigned cnt[kFine];
  u64 fineMass[kFine];
  u64 scanA[32];
  unsigned scanB[32];
  float redF[32];
  int redI[32];
  int bin;   // results of the bin search, read by every thread
  u64 above;
  u64 total;
  int found;
};

__device__ __forceinline__ unsigned *countView(Shared &sh) { return reinterpret_cast<unsigned *>(sh.hist); }

template <int THREADS> __device__ __forceinline__ void clearHist(Shared &sh) {
  for (int i = threadIdx.x; i < kCoarse; i += THREADS) sh.hist[i] = 0;
  if (threadIdx.x < kFine) sh.cnt[threadIdx.x] = 0;
}

// Inclusive scan of (a, b) over the 32 lanes of a warp (all of them call it): lane i ends with the sums of
// lanes 0..i.
__device__ __forceinline__ void warpScan(u64 &a, unsigned &b, int lane) {
#pragma unroll
  for (int off = 1; off < kWarpSize; off *= 2) {
    const u64 ta = __shfl_up_sync(kFull, a, off);
    const unsigned tb = __shfl_up_sync(kFull, b, off);
    if (lane >= off) {
      a += ta;
      b += tb;
    }
  }
}

// Inclusive block scan of (a, b); every thread also gets the block totals.
template <int THREADS>
__device__ __forceinline__ void blockScan(u64 &a, unsigned &b, u64 &totalA, unsigned &totalB, Shared &sh) {
  constexpr int kWarps = THREADS / kWarpSize;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  warpScan(a, b, lane);
  __syncthreads(); // the previous call's readers are done with scanA/scanB
  if (lane == kWarpSize - 1) {
    sh.scanA[warp] = a;
    sh.scanB[warp] = b;
  }
  __syncthreads();
  if (warp == 0) {
    u64 x = lane < kWarps ? sh.scanA[lane] : 0;
    unsigned y = lane < kWarps ? sh.scanB[lane] : 0;
    warpScan(x, y, lane);
    if (lane < kWarps) {
      sh.scanA[lane] = x;
      sh.scanB[lane] = y;
    }
  }
  __syncthreads();
  if (warp > 0) {
    a += sh.scanA[warp - 1];
    b += sh.scanB[warp - 1];
  }
  totalA = sh.scanA[kWarps - 1];
  totalB = sh.scanB[kWarps - 1];
}

// The largest of v over the block (NaN skipped), in every thread; redF holds THREADS / 32 floats.
template <int THREADS> __device__ __forceinline__ float blockMaxF(float v, float *redF) {
  constexpr int kWarps = THREADS / kWarpSize;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
#pragma unroll
  for (int off = kWarpSize / 2; off > 0; off /= 2) v = fmaxf(v, __shfl_xor_sync(kFull, v, off));
  __syncthreads(); // redF may still be read by an earlier use
  if (lane == 0) redF[warp] = v;
  __syncthreads();
  v = lane < kWarps ? redF[lane] : negInf();
#pragma unroll
  for (int off = kWarpSize / 2; off > 0; off /= 2) v = fmaxf(v, __shfl_xor_sync(kFull, v, off));
  return v;
}

template <int THREADS> __device__ __forceinline__ u64 blockSumU64(u64 v, Shared &sh) {
  unsigned none = 0, noneTotal;
  u64 total;
  blockScan<THREADS>(v, none, total, noneTotal, sh);
  return total;
}

// Walking bins[NB - 1] down to bins[0], finds the first bin b where reached(offset + (sum of bins >= b),
// total) holds (total = the sum of all bins); sets sh.bin = b, sh.above = the sum of bins > b, sh.total.
// `reached` must be monotone in its first argument; when nothing reaches, bin 0. Every thread of the block
// calls it (it synchronises, also before reading the bins); the results are in sh when it returns.
template <int THREADS, int NB, typename T, typename Reached>
__device__ __forceinline__ void findFromTop(Shared &sh, const T *bins, u64 offset, Reached reached) {
  constexpr int PER = (NB + THREADS - 1) / THREADS; // bins per thread, thread 0 owning the highest
  const int first = NB - 1 - static_cast<int>(threadIdx.x) * PER;
  __syncthreads(); // the histogram is complete
  u64 local = 0;
#pragma unroll
  for (int j = 0; j < PER; ++j)
    if (first - j >= 0) local += bins[first - j];
  u64 incl = local, total;
  unsigned none = 0, noneTotal;
  blockScan<THREADS>(incl, none, total, noneTotal, sh);
  const u64 excl = incl - local;
  if (reached(offset + incl, total) && (threadIdx.x == 0 || !reached(offset + excl, total))) {
    u64 run = excl;
    for (int j = 0; j < PER && first - j >= 0; ++j) {
      const int b = first - j;
      if (reached(offset + run + bins[b], total)) {
        sh.bin = b;
        sh.above = run;
        break;
      }
      run += bins[b];
    }
    sh.total = total;
  } else if (!reached(offset + total, total) && first >= 0 && first - PER < 0) { // nothing reaches
    sh.bin = 0;
    sh.above = total - bins[0];
    sh.total = total;
  }
  __syncthreads();
}


// ---- reading a row ------------------------------------------------------------------------------------

// VEC logits at p through the read-only path (a 16-byte load for VEC = 8).
template <int VEC> __device__ __forceinline__ Pack<bf16, VEC> loadLogits(const bf16 *p) {
  Pack<bf16, VEC> out;
  if constexpr (VEC == 8) *reinterpret_cast<uint4 *>(&out) = __ldg(reinterpret_cast<const uint4 *>(p));
  else if constexpr (VEC == 4) *reinterpret_cast<uint2 *>(&out) = __ldg(reinterpret_cast<const uint2 *>(p));
  else if constexpr (VEC == 2) *reinterpret_cast<unsigned *>(&out) = __ldg(reinterpret_cast<const unsigned *>(p));
  else *reinterpret_cast<unsigned short *>(&out) = __ldg(reinterpret_cast<const unsigned short *>(p));
  return out;
}

template <int V, int THREADS> struct RowShape {
  static constexpr int VEC = vecWidth<bf16, V>(); // logits per access
  static constexpr int NV = V / VEC;              // accesses per row
  static constexpr int ITERS = (NV + THREADS - 1) / THREADS;
};

// Calls f(index, logit) for this thread's logits: access vi = it * THREADS + threadIdx.x, so a tile of
// THREADS accesses covers a contiguous stretch of the row in thread order. UNROLL accesses are loaded
// before any is used, so that many 16-byte loads per thread are in flight: 4 for argmax, which does little
// per logit; 2 for the sampling passes, which mostly re-read a row already in L2 and whose bodies are
// large (at 4, sample<151936, 512> needs 88 registers instead of 64 and compiles a third slower).
template <int V, int THREADS, int UNROLL = 2, typename F>
__device__ __forceinline__ void forEachLogit(const bf16 *row, F &&f) {
  using S = RowShape<V, THREADS>;
  for (int it0 = 0; it0 < S::ITERS; it0 += UNROLL) {
    Pack<bf16, S::VEC> p[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int vi = (it0 + u) * THREADS + threadIdx.x;
      if (it0 + u < S::ITERS && vi < S::NV) p[u] = loadLogits<S::VEC>(row + vi * S::VEC);
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int vi = (it0 + u) * THREADS + threadIdx.x;
      if (it0 + u < S::ITERS && vi < S::NV) {
#pragma unroll
        for (int e = 0; e < S::VEC; ++e) f(vi * S::VEC + e, p[u].v[e]);
      }
    }
  }
}

// The lowest index of the largest logit (NaN skipped; 0 when nothing is above -inf). Every thread of the
// block calls it and gets the answer.
template <int V, int THREADS> __device__ __forceinline__ int argmaxRow(const bf16 *row, float *redF, int *redI) {
  static_assert(THREADS % kWarpSize == 0 && THREADS <= 1024, "argmax: THREADS must be whole warps, at most 1024");
  constexpr int kNone = 0x7fffffff;
  float best = negInf();
  int idx = kNone;
  // Indices grow within a thread, so a strict > keeps the first of equal logits.
  forEachLogit<V, THREADS, 4>(row, [&](int i, bf16 x) {
    const float v = toFloat(x);
    if (v > best) {
      best = v;
      idx = i;
    }
  });
  auto merge = [&](float ob, int oi) {
    if (ob > best || (ob == best && oi < idx)) {
      best = ob;
      idx = oi;
    }
  };
#pragma unroll
  for (int off = kWarpSize / 2; off > 0; off /= 2) {
    const float ob = __shfl_xor_sync(kFull, best, off);
    const int oi = __shfl_xor_sync(kFull, idx, off);
    merge(ob, oi);
  }
  constexpr int kWarps = THREADS / kWarpSize;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  __syncthreads(); // redF/redI may still be read by an earlier use
  if (lane == 0) {
    redF[warp] = best;
    redI[warp] = idx;
  }
  __syncthreads();
  best = lane < kWarps ? redF[lane] : negInf();
  idx = lane < kWarps ? redI[lane] : kNone;
#pragma unroll
  for (int off = kWarpSize / 2; off > 0; off /= 2) {
    const float ob = __shfl_xor_sync(kFull, best, off);
    const int oi = __shfl_xor_sync(kFull, idx, off);
    merge(ob, oi);
  }
  return idx == kNone ? 0 : idx;
}

// The smallest r in [1, c] with (double)(A + r * w) >= P (step 5 inside one key).
__device__ __forceinline__ u64 smallestReaching(u64 A, u64 w, u64 c, double P) {
  if (w == 0 || c <= 1) return 1; // (w > 0 and c >= 1 at a crossing key; never leave the set empty)
  const double est = ceil((P - static_cast<double>(A)) / static_cast<double>(w));
  u64 r = est < 1.0 ? 1 : (est > static_cast<double>(c) ? c : static_cast<u64>(est));
  while (r > 1 && static_cast<double>(A + (r - 1) * w) >= P) --r;
  while (r < c && static_cast<double>(A + r * w) < P) ++r;
  return r;
}

} // namespace sampling

template <int V, int THREADS>
__global__ void __launch_bounds__(THREADS) argmax(const ArgmaxParams p) {
  const bf16 *logits = p.logits;
  int *out = p.out;
  const int rows = p.rows;
  gridDependencyWait();
  static_assert(V > 0, "argmax: V must be positive");
  __shared__ float redF[kWarpSize];
  __shared__ int redI[kWarpSize];
  const long long r = blockIdx.x;
  if (r >= rows) return;
  const int i = sampling::argmaxRow<V, THREADS>(logits + r * V, redF, redI);
  if (threadIdx.x == 0) out[r] = i;
}

template <int V, int THREADS>
__global__ void __launch_bounds__(THREADS) sample(const SampleParams p) {
  const bf16 *logits = p.logits;
  int *out = p.out;
  const int rows = p.rows, top_k = p.top_k;
  const float temperature = p.temperature, top_p = p.top_p;
  const unsigned long long seed = p.seed, step = p.step;
  const int *step_offset = p.step_offset; // nullable: added to `step`
  gridDependencyWait();
  using namespace sampling;
  using S = RowShape<V, THREADS>;
  static_assert(V > 1 && V < (1 << 24), "sample: V must be in [2, 2^24) (indices and counts stay exact)");
  static_assert(THREADS % kWarpSize == 0 && THREADS >= kWarpSize && THREADS <= 1024,
                "sample: THREADS must be whole warps, at most 1024");
  __shared__ Shared sh;
  const long long r = blockIdx.x;
  if (r >= rows) return;
  const bf16 *row = logits + r * V;
  const bool warp0 = threadIdx.x < kWarpSize;

  const u64 k = (top_k <= 0 || top_k >= V) ? u64(V) : u64(top_k);
  if (!(temperature > 0.f) || k == 1) {
    const int i = argmaxRow<V, THREADS>(row, sh.redF, sh.redI);
    if (threadIdx.x == 0) out[r] = i;
    return;
  }
  const bool topK = k < u64(V);
  const bool topP = top_p > 0.f && top_p < 1.f;
  const float invT = 1.f / temperature;

  // Pass 1: the largest logit, and the coarse counts of the keys for top-k.
  if (topK) {
    clearHist<THREADS>(sh);
    __syncthreads();
  }
  float mx = negInf();
  forEachLogit<V, THREADS, 4>(row, [&](int, bf16 x) {
    mx = fmaxf(mx, toFloat(x)); // fmaxf skips NaN
    if (topK) atomicAdd(countView(sh) + (orderKey(x) >> kFineBits), 1u);
  });
  mx = blockMaxF<THREADS>(mx, sh.redF);
  if (!(mx > negInf())) { // nothing finite: no weights to draw from
    const int i = argmaxRow<V, THREADS>(row, sh.redF, sh.redI);
    if (threadIdx.x == 0) out[r] = i;
    return;
  }

  // Top-k: K = keys > tk, plus the first rk logits (by index) whose key is tk. Without top-k, every
  // non-NaN logit (key > 0; key 0 has W = 0 anyway).
  unsigned tk = 0;
  u64 rk = u64(V);
  if (topK) {
    findFromTop<THREADS, kCoarse>(sh, countView(sh), 0, [&](u64 c, u64) { return c >= k; });
    const unsigned hb = sh.bin;
    const u64 aboveHi = sh.above;
    // Pass 2: fine counts inside the coarse bin that holds the k-th key (cnt was cleared with the histogram).
    forEachLogit<V, THREADS, 4>(row, [&](int, bf16 x) {
      const unsigned key = orderKey(x);
      if ((key >> kFineBits) == hb) atomicAdd(&sh.cnt[key & (kFine - 1)], 1u);
    });
    findFromTop<THREADS, kFine>(sh, sh.cnt, aboveHi, [&](u64 c, u64) { return c >= k; });
    tk = (hb << kFineBits) | unsigned(sh.bin);
    rk = k - aboveHi - sh.above;
  }
  const u64 wTk = fixedWeight(keyValue(tk), mx, invT);

  // The kept set: keys > tStar, plus the first rStar logits (by index) whose key is tStar; its mass sStar.
  unsigned tStar = tk;
  u64 rStar = rk, sStar;
  if (topP) {
    // Pass 3: coarse masses of K.
    __syncthreads(); // every thread has read the last search's results and is done with the counts
    clearHist<THREADS>(sh);
    __syncthreads();
    forEachLogit<V, THREADS>(row, [&](int, bf16 x) {
      const unsigned key = orderKey(x);
      if (key > tk) {
        const u64 w = fixedWeight(toFloat(x), mx, invT);
        if (w) atomicAdd(&sh.hist[key >> kFineBits], w);
      }
    });
    __syncthreads();
    if (threadIdx.x == 0) sh.hist[tk >> kFineBits] += rk * wTk; // K's logits at tk itself
    findFromTop<THREADS, kCoarse>(sh, sh.hist, 0, [&](u64 m, u64 total) {
      return static_cast<double>(m) >= static_cast<double>(top_p) * static_cast<double>(total);
    });
    const unsigned hp = sh.bin;
    const u64 aboveHi = sh.above;
    const double P = static_cast<double>(top_p) * static_cast<double>(sh.total); // sh.total = S_k
    // Pass 4: fine counts of K inside the coarse bin where the mass crosses P.
    forEachLogit<V, THREADS, 4>(row, [&](int, bf16 x) {
      const unsigned key = orderKey(x);
      if ((key >> kFineBits) == hp && key > tk) atomicAdd(&sh.cnt[key & (kFine - 1)], 1u);
    });
    __syncthreads();
    if (threadIdx.x < kFine) {
      const unsigned key = (hp << kFineBits) | threadIdx.x;
      if (key == tk) sh.cnt[threadIdx.x] += unsigned(rk);
      sh.fineMass[threadIdx.x] = u64(sh.cnt[threadIdx.x]) * fixedWeight(keyValue(key), mx, invT);
    }
    findFromTop<THREADS, kFine>(sh, sh.fineMass, aboveHi, [&](u64 m, u64) { return static_cast<double>(m) >= P; });
    tStar = (hp << kFineBits) | unsigned(sh.bin);
    const u64 A = aboveHi + sh.above, w = fixedWeight(keyValue(tStar), mx, invT);
    rStar = smallestReaching(A, w, sh.cnt[sh.bin], P);
    sStar = A + rStar * w;
  } else {
    // Pass 3': the mass of K.
    u64 local = 0;
    forEachLogit<V, THREADS>(row, [&](int, bf16 x) {
      if (orderKey(x) > tk) local += fixedWeight(toFloat(x), mx, invT);
    });
    sStar = blockSumU64<THREADS>(local, sh) + rk * wTk;
  }

  // The draw (step 6, 7).
  const u64 bits = randomBits(seed, step + (step_offset ? u64(*step_offset) : 0), u64(r));
  const double u = static_cast<double>(bits >> 11) * 0x1p-53;
  u64 target = sStar ? static_cast<u64>(u * static_cast<double>(sStar)) : 0;
  if (sStar && target >= sStar) target = sStar - 1;

  // Pass 5, the draw in index order. Warp w owns the contiguous accesses [w * CH, (w + 1) * CH) of the row.
  // Phase A: each warp sums its chunk's kept mass (keys > tStar) and its tStar ties, with no barrier inside;
  // a scan over the warps then says which warp's chunk holds the target. Phase B: that warp walks its
  // chunk in order, 32 accesses at a time with warp scans, and the lane that crosses the target writes it.
  constexpr int kWarps = THREADS / kWarpSize;
  constexpr int CH = (S::NV + kWarps - 1) / kWarps; // accesses per warp
  constexpr int ROUNDS = (CH + kWarpSize - 1) / kWarpSize;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int chunkEnd = (warp + 1) * CH < S::NV ? (warp + 1) * CH : S::NV;
  const u64 wStar = fixedWeight(keyValue(tStar), mx, invT);
  // The mass above tStar and the tStar ties among one access's logits.
  auto tally = [&](const Pack<bf16, S::VEC> &p, u64 &above, unsigned &ties) {
#pragma unroll
    for (int e = 0; e < S::VEC; ++e) {
      const unsigned key = orderKey(p.v[e]);
      if (key > tStar) above += fixedWeight(toFloat(p.v[e]), mx, invT);
      ties += key == tStar;
    }
  };
  u64 above = 0;
  unsigned ties = 0;
  for (int i0 = 0; i0 < ROUNDS; i0 += 2) { // two loads in flight per lane
    Pack<bf16, S::VEC> p[2];
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int vi = warp * CH + (i0 + u) * kWarpSize + lane;
      if (i0 + u < ROUNDS && vi < chunkEnd) p[u] = loadLogits<S::VEC>(row + vi * S::VEC);
    }
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int vi = warp * CH + (i0 + u) * kWarpSize + lane;
      if (i0 + u < ROUNDS && vi < chunkEnd) tally(p[u], above, ties);
    }
  }
#pragma unroll
  for (int off = kWarpSize / 2; off > 0; off /= 2) {
    above += __shfl_xor_sync(kFull, above, off);
    ties += __shfl_xor_sync(kFull, ties, off);
  }
  __syncthreads(); // scanA/scanB are free (the last block scan's readers are done)
  if (threadIdx.x == 0) sh.found = 0;
  if (lane == 0) {
    sh.scanA[warp] = above;
    sh.scanB[warp] = ties;
  }
  __syncthreads();
  // The kept mass before this warp's chunk and after it.
  u64 runAbove = 0, runTies = 0;
  for (int w = 0; w < warp; ++w) runAbove += sh.scanA[w], runTies += sh.scanB[w];
  const u64 before = runAbove + wStar * (runTies < rStar ? runTies : rStar);
  const u64 afterTies = runTies + ties;
  const u64 after = runAbove + above + wStar * (afterTies < rStar ? afterTies : rStar);
  if (sStar && before <= target && target < after) {
    bool found = false;
    for (int i = 0; i < ROUNDS && !found; ++i) {
      const int vi = warp * CH + i * kWarpSize + lane;
      const bool valid = vi < chunkEnd;
      Pack<bf16, S::VEC> p;
      u64 a = 0;
      unsigned t = 0;
      if (valid) {
        p = loadLogits<S::VEC>(row + vi * S::VEC);
        tally(p, a, t);
      }
      u64 inclA = a;
      unsigned inclT = t;
#pragma unroll
      for (int off = 1; off < kWarpSize; off *= 2) {
        const u64 ta = __shfl_up_sync(kFull, inclA, off);
        const unsigned tt = __shfl_up_sync(kFull, inclT, off);
        if (lane >= off) inclA += ta, inclT += tt;
      }
      u64 seen = runTies + (inclT - t);
      u64 cum = runAbove + (inclA - a) + wStar * (seen < rStar ? seen : rStar);
      bool mine = false;
      if (valid && cum <= target) {
#pragma unroll
        for (int e = 0; e < S::VEC; ++e) {
          const unsigned key = orderKey(p.v[e]);
          bool kept = key > tStar;
          u64 w = kept ? fixedWeight(toFloat(p.v[e]), mx, invT) : 0;
          if (key == tStar) {
            kept = seen < rStar;
            w = kept ? wStar : 0;
            ++seen;
          }
          cum += w;
          if (kept && cum > target && !mine) {
            mine = true;
            out[r] = vi * S::VEC + e;
          }
        }
      }
      found = __any_sync(kFull, mine);
      runAbove += __shfl_sync(kFull, inclA, kWarpSize - 1);
      runTies += __shfl_sync(kFull, inclT, kWarpSize - 1);
    }
    if (found && lane == 0) sh.found = 1;
  }
  __syncthreads();
  if (!sh.found) { // unreachable for a finite row (sStar >= 2^40); never leave the output unwritten
    const int i = argmaxRow<V, THREADS>(row, sh.redF, sh.redI);
    if (threadIdx.x == 0) out[r] = i;
  }
}

} // namespace minfer
