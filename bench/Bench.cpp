// bench/Bench.cpp — the timing loop, the copy-bandwidth ceiling, the JSON a result becomes, and the suite
// registry.
//
// Timing (timeMedian and its busy block) lives in runtime/Timing.cpp, shared with the autotuner.
#include "bench/Bench.h"

#include <cstring>
#include <regex>


namespace minfer::bench {

std::vector<Suite> &suites() {
  static std::vector<Suite> all; // function-local: safe from other files' static Registration objects
  return all;
}

namespace {
std::string filterText;
std::regex filterRegex;
} // namespace

void setFilter(const std::string &regex) {
  filterText = regex;
  filterRegex = std::regex(regex, std::regex::ECMAScript);
}

bool selected(const std::string &what) { return filterText.empty() || std::regex_search(what, filterRegex); }

llvm::Expected<Ceilings> measureCeilings() {
  // 1 GiB each way: 20x the L2 of an H100/H200, so the copy streams DRAM, not cache.
  constexpr size_t bytes = size_t(1) << 30;
  auto src = cuda::DeviceBuffer::alloc(bytes);
  if (!src) return src.takeError();
  auto dst = cuda::DeviceBuffer::alloc(bytes);
  if (!dst) return dst.takeError();
  if (llvm::Error e = src->fill(0x3C)) return e;
  // Each copy runs ~0.3-1 ms: 3 warm-ups and 15 timed runs take well under a second.
  auto ms = timeMedian([&](int) { return cuda::copyDeviceToDevice(dst->ptr(), src->ptr(), bytes); }, 3, 15);
  if (!ms) return ms.takeError();
  Ceilings c;
  c.copyGBps = 2.0 * double(bytes) / (*ms * 1e-3) / 1e9; // read + write, decimal GB as vendors quote them
  // The weight loader's ceiling: 1 GiB from page-locked memory over the bus, one copy at a time.
  auto pinned = cuda::PinnedBuffer::alloc(bytes);
  if (!pinned) return pinned.takeError();
  std::memset(pinned->data(), 0x3C, bytes);
  auto h2d = timeMedian([&](int) { return cuda::copyHostToDeviceAsync(dst->ptr(), pinned->data(), bytes, nullptr); }, 1, 5);
  if (!h2d) return h2d.takeError();
  c.hostToDeviceGBps = double(bytes) / (*h2d * 1e-3) / 1e9;
  return c;
}

llvm::json::Object toJSON(const Result &r, const Ceilings &c) {
  double seconds = r.ms * 1e-3;
  double gbps = seconds > 0 ? r.bytes / seconds / 1e9 : 0;
  double tflops = seconds > 0 ? r.flops / seconds / 1e12 : 0;
  return llvm::json::Object{
      {"kernel", r.kernel},
      {"shape", r.shape},
      {"ms", r.ms},
      {"bytes", r.bytes},
      {"flops", r.flops},
      {"gbps", gbps},
      {"tflops", tflops},
      {"copy_gbps", c.copyGBps},
      {"fraction_of_copy", c.copyGBps > 0 ? gbps / c.copyGBps : 0.0},
  };
}

} // namespace minfer::bench
