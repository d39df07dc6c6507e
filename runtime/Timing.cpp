// runtime/Timing.cpp — timing GPU work with CUDA events (Timing.h), for the autotuner and the benchmarks.
//
// A kernel of a few microseconds (decode GEMV, decode attention) is shorter than what the host
// needs to enqueue it (~3-5 us per launch plus an event record), so timing launch by launch would measure
// the host. timeMedian therefore enqueues every timed run behind a block of device-to-device copies that
// keeps the GPU busy, checks afterwards that the GPU had not got through that block by the time the host
// finished enqueueing (so no run waited on the host), and retries with a longer block if it had.
#include "runtime/Timing.h"

#include "io/Safetensors.h"
#include "ir/Diagnostics.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cassert>
#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

namespace minfer::timing {
namespace {



// The busy block: copies between the halves of a 256 MiB scratch buffer. 128 MiB a copy is ~2.6x the
// 50 MiB L2 of an H100/H200, so each copy streams DRAM for ~80-100 us there (longer on smaller GPUs).
constexpr size_t kScratchBytes = size_t(256) << 20;
// Copies in the first attempt (~0.4 ms on Hopper, ample to enqueue 50 runs); doubled on each retry, up to
// kMaxBusyCopies (~3 ms), after which the last attempt's numbers are taken as they are.
constexpr int kFirstBusyCopies = 4;
constexpr int kMaxBusyCopies = 32;

// Allocated on first use and kept: allocating 256 MiB per timed kernel would dominate a suite. Null when
// the device could not spare it; timing then goes without the busy block.
cuda::DeviceBuffer *scratch() {
  static std::optional<cuda::DeviceBuffer> buf = []() -> std::optional<cuda::DeviceBuffer> {
    auto b = cuda::DeviceBuffer::alloc(kScratchBytes);
    if (!b) {
      llvm::consumeError(b.takeError());
      return std::nullopt;
    }
    return std::move(*b);
  }();
  return buf ? &*buf : nullptr;
}

llvm::Error enqueueBusyBlock(int copies) {
  cuda::DeviceBuffer *s = scratch();
  if (!s) return llvm::Error::success();
  size_t half = s->size() / 2;
  for (int c = 0; c < copies; ++c) {
    cuda::DevicePtr from = s->ptr() + (c % 2 ? half : 0), to = s->ptr() + (c % 2 ? 0 : half);
    if (llvm::Error e = cuda::copyDeviceToDevice(to, from, half)) return e;
  }
  return llvm::Error::success();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

} // namespace

llvm::Expected<double> timeMedian(const std::function<llvm::Error(int)> &launch, int warmup, int iters) {
  if (iters < 1 || warmup < 0)
    return ir::makeError("timeMedian: need iters >= 1 and warmup >= 0, got iters=" + llvm::Twine(iters) +
                " warmup=" + llvm::Twine(warmup));
  int run = 0; // the `i` given to launch: counts every run, warm-up and retries included
  for (; run < warmup; ++run)
    if (llvm::Error e = launch(run)) return e;

  // marks[i] and marks[i + 1] bracket timed run i.
  std::vector<cuda::Event> marks;
  for (int i = 0; i <= iters; ++i) {
    auto ev = cuda::Event::create();
    if (!ev) return ev.takeError();
    marks.push_back(std::move(*ev));
  }
  auto busyDone = cuda::Event::create();
  if (!busyDone) return busyDone.takeError();

  std::vector<double> ms(iters);
  for (int copies = kFirstBusyCopies;; copies *= 2) {
    if (llvm::Error e = enqueueBusyBlock(copies)) return e;
    if (llvm::Error e = busyDone->record()) return e;
    if (llvm::Error e = marks[0].record()) return e;
    for (int i = 0; i < iters; ++i, ++run) {
      if (llvm::Error e = launch(run)) return e;
      if (llvm::Error e = marks[i + 1].record()) return e;
    }
    // Still busy when the host is done enqueueing: every run was queued before the GPU reached it.
    auto done = busyDone->done();
    if (!done) return done.takeError();
    bool hostKeptAhead = !*done && scratch();
    if (llvm::Error e = marks[iters].synchronize()) return e;
    for (int i = 0; i < iters; ++i) {
      auto t = cuda::Event::elapsedMs(marks[i], marks[i + 1]);
      if (!t) return t.takeError();
      ms[i] = *t;
    }
    if (hostKeptAhead || !scratch() || copies >= kMaxBusyCopies) break;
  }
  return median(std::move(ms));
}

llvm::Expected<double> timeMedianChained(const std::function<llvm::Error(int, bool)> &launch, int chain, int warmup,
                                         int iters) {
  if (chain < 1) return ir::makeError("timeMedianChained: need chain >= 1, got " + llvm::Twine(chain));
  auto ms = timeMedian(
      [&](int run) -> llvm::Error {
        for (int j = 0; j < chain; ++j)
          if (llvm::Error e = launch(run * chain + j, j > 0)) return e;
        return llvm::Error::success();
      },
      warmup, iters);
  if (!ms) return ms.takeError();
  return *ms / chain;
}

int copiesFor(double bytes) {
  return int(std::clamp(std::ceil(3.0 * (50 << 20) / std::max(bytes, 1.0)), 1.0, 16.0));
}

std::vector<uint8_t> randomElements(size_t count, ir::DType type, float halfRange, uint64_t seed) {
  assert(type != ir::DType::I32 && "randomElements: a floating-point element type");
  const size_t elementBytes = ir::dtypeSize(type);
  std::vector<uint8_t> out(count * elementBytes);
  uint64_t state = seed;
  for (size_t i = 0; i < count; ++i) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const float f = (static_cast<float>(z >> 40) * 0x1p-23f - 1.f) * halfRange; // 24 bits: [-1, 1) x halfRange
    if (type == ir::DType::F32) {
      std::memcpy(out.data() + 4 * i, &f, 4);
    } else {
      const uint16_t half = type == ir::DType::F16 ? floatToF16(f) : floatToBf16(f);
      std::memcpy(out.data() + 2 * i, &half, 2);
    }
  }
  return out;
}

namespace {
constexpr float kFilledHalfRange = 0.25f; // filled()'s values: uniform in [-0.25, 0.25)
} // namespace

float rowSquarePartial(int64_t k, int parts) {
  const float meanSquare = kFilledHalfRange * kFilledHalfRange / 3.f;
  return float(k) * meanSquare / float(std::max(parts, 1));
}

llvm::Expected<cuda::DeviceBuffer> filledRowSquares(size_t bytes, int64_t k, int parts) {
  auto b = cuda::DeviceBuffer::alloc(std::max<size_t>(bytes, 16));
  if (!b) return b.takeError();
  if (auto e = b->fillWords(0, b->size(), std::bit_cast<uint32_t>(rowSquarePartial(k, parts)))) return e;
  return b;
}

llvm::Expected<cuda::DeviceBuffer> filled(size_t bytes) {
  // 4 MiB of values, made once, uploaded over and over from a start that moves with each call.
  static const std::vector<uint8_t> noise = randomElements(size_t(2) << 20, ir::DType::BF16, kFilledHalfRange, 0x5EED);
  static std::atomic<size_t> calls = 0; // safe to call from any thread
  auto b = cuda::DeviceBuffer::alloc(std::max<size_t>(bytes, 16));
  if (!b) return b.takeError();
  const size_t start = (calls++ * 12347 * 2) % noise.size(); // even: whole bf16 values
  for (size_t at = 0, n = std::max<size_t>(bytes, 16); at < n;) {
    const size_t from = (start + at) % noise.size(), len = std::min(n - at, noise.size() - from);
    if (auto e = b->upload(noise.data() + from, len, at)) return e;
    at += len;
  }
  return b;
}

} // namespace minfer::timing
