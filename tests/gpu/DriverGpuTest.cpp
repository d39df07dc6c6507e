// DriverGpuTest.cpp — the CUDA driver layer on a real GPU (CTest label `gpu`; each test skips with the
// reason when there is none): device memory round trips, a kernel compiled with NVRTC, loaded and
// launched, the dynamic shared memory opt-in above 48 KiB and the refusal beyond the device's limit, event
// timing, timed chains of programmatic dependent launches, device-to-device copies, and the errors for garbage modules and unknown kernel names.
#include "GpuHarness.h"

#include "runtime/Timing.h"

#include <numeric>
#include <random>
#include <thread>
#include <vector>

using namespace minfer;
using llvm::StringRef;

namespace {

// Unwraps an Expected inside a TEST body, failing (and returning) with the error.
#define ASSIGN_OR_FAIL(var, expr)                                                                            \
  auto var##OrErr = (expr);                                                                                  \
  if (!var##OrErr) FAIL() << #expr << ": " << llvm::toString(var##OrErr.takeError());                       \
  auto &var = *var##OrErr

std::string errorText(llvm::Error e) { return e ? llvm::toString(std::move(e)) : std::string(); }

constexpr const char *kAddOne = R"(
template <int N> __global__ void add_one(float *x) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) x[i] += 1.f;
}
)";

// Writes `n` floats of dynamic shared memory (every one, so a too-small allocation faults), then thread 0
// sums them: out[0] = sum over i of (i % 8), exact in fp32 for any n here (7n < 2^24).
constexpr const char *kSharedSum = R"(
template <int Unused> __global__ void shared_sum(float *out, int n) {
  extern __shared__ float s[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) s[i] = float(i % 8);
  __syncthreads();
  if (threadIdx.x == 0) {
    float acc = 0.f;
    for (int i = n - 1; i >= 0; --i) acc += s[i];
    out[0] = acc;
  }
}
)";

// The same with a static array beside the dynamic one: thread 0 also writes the static bytes.
constexpr const char *kSharedSumStatic = R"(
template <int Unused> __global__ void shared_sum_static(float *out, int n) {
  __shared__ float fixed[4];
  extern __shared__ float s[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) s[i] = float(i % 8);
  if (threadIdx.x < 4) fixed[threadIdx.x] = 1.f;
  __syncthreads();
  if (threadIdx.x == 0) {
    float acc = fixed[0] + fixed[1] + fixed[2] + fixed[3];
    for (int i = n - 1; i >= 0; --i) acc += s[i];
    out[0] = acc;
  }
}
)";

TEST(DriverGpu, DeviceInfoIsPlausible) {
  MINFER_REQUIRE_GPU();
  ASSIGN_OR_FAIL(info, cuda::deviceInfo());
  EXPECT_FALSE(info.name.empty());
  EXPECT_GE(info.major, 8) << "minfer targets sm_80 and newer";
  EXPECT_GT(info.smCount, 0);
  EXPECT_GT(info.totalMemory, size_t(1) << 30);
  EXPECT_GE(info.maxSharedPerBlockOptin, 48 * 1024);
  EXPECT_GE(info.driverVersion, 12000);
  std::printf("device: %s sm_%d%d, %d SMs, %.1f GiB, %d bytes shared/block opt-in, driver %d\n", info.name.c_str(),
              info.major, info.minor, info.smCount, double(info.totalMemory) / (1 << 30),
              info.maxSharedPerBlockOptin, info.driverVersion);
}

TEST(DriverGpu, ProbeAgreesWithTheLoadedDriver) {
  MINFER_REQUIRE_GPU();
  ASSIGN_OR_FAIL(info, cuda::deviceInfo());
  const char *env = std::getenv("MINFER_LIBCUDA");
  ASSIGN_OR_FAIL(version, cuda::probeDriver(env && *env ? env : "libcuda.so.1"));
  EXPECT_EQ(version, info.driverVersion);
  MINFER_ASSERT_OK(cuda::synchronize()); // probing (load, look up, unload) left the driver in use alone
}

TEST(DriverGpu, EveryThreadGetsTheContext) {
  MINFER_REQUIRE_GPU();
  // cuCtxSetCurrent is per thread: a thread that never called init() must still be able to use the API.
  std::string error;
  uint32_t got = 0;
  std::thread worker([&] {
    auto buf = cuda::DeviceBuffer::alloc(4);
    if (!buf) return void(error = llvm::toString(buf.takeError()));
    if (llvm::Error e = buf->fill(0x7E)) return void(error = llvm::toString(std::move(e)));
    if (llvm::Error e = buf->download(&got, 4)) return void(error = llvm::toString(std::move(e)));
  });
  worker.join();
  EXPECT_EQ(error, "");
  EXPECT_EQ(got, 0x7E7E7E7Eu);
}

TEST(DriverGpu, UploadDownloadRoundTrip) {
  MINFER_REQUIRE_GPU();
  std::vector<uint32_t> host(1 << 20); // 4 MiB
  std::iota(host.begin(), host.end(), 0x1234u);
  ASSIGN_OR_FAIL(buf, cuda::DeviceBuffer::alloc(host.size() * 4));
  EXPECT_NE(buf.ptr(), 0u);
  EXPECT_EQ(buf.size(), host.size() * 4);
  MINFER_ASSERT_OK(buf.upload(host.data(), host.size() * 4));
  std::vector<uint32_t> back(host.size(), 0);
  MINFER_ASSERT_OK(buf.download(back.data(), back.size() * 4));
  EXPECT_EQ(back, host);

  // Offsets: overwrite words 10..19, read words 5..24.
  std::vector<uint32_t> patch(10, 0xABCDEF01u);
  MINFER_ASSERT_OK(buf.upload(patch.data(), 40, 40));
  std::vector<uint32_t> window(20);
  MINFER_ASSERT_OK(buf.download(window.data(), 80, 20));
  for (int i = 0; i < 20; ++i) EXPECT_EQ(window[i], (i >= 5 && i < 15) ? 0xABCDEF01u : host[5 + i]) << i;

  std::string overrun = errorText(buf.upload(host.data(), 8, buf.size() - 4));
  EXPECT_NE(overrun.find("overruns a device buffer"), std::string::npos) << overrun;

  // The asynchronous upload: the same range check before anything is enqueued, and the bytes land.
  std::string asyncOverrun = errorText(buf.uploadAsync(host.data(), 8, buf.size() - 4, nullptr));
  EXPECT_NE(asyncOverrun.find("overruns a device buffer"), std::string::npos) << asyncOverrun;
  std::vector<uint32_t> words(4, 0x01020304u);
  MINFER_ASSERT_OK(buf.uploadAsync(words.data(), 16, 0, nullptr));
  MINFER_ASSERT_OK(cuda::synchronize());
  std::vector<uint32_t> head(4);
  MINFER_ASSERT_OK(buf.download(head.data(), 16));
  EXPECT_EQ(head, words);
}

TEST(DriverGpu, FillSetsEveryByte) {
  MINFER_REQUIRE_GPU();
  ASSIGN_OR_FAIL(buf, cuda::DeviceBuffer::alloc(3 * 1000 + 1)); // odd size: no alignment assumptions
  MINFER_ASSERT_OK(buf.fill(0xFF));
  std::vector<uint8_t> back(buf.size(), 0);
  MINFER_ASSERT_OK(buf.download(back.data(), back.size()));
  for (size_t i = 0; i < back.size(); ++i) ASSERT_EQ(back[i], 0xFF) << i;
  MINFER_ASSERT_OK(buf.fill(0x3C));
  MINFER_ASSERT_OK(buf.download(back.data(), back.size()));
  for (size_t i = 0; i < back.size(); ++i) ASSERT_EQ(back[i], 0x3C) << i;
}

TEST(DriverGpu, MovedBuffersOwnTheirMemoryOnce) {
  MINFER_REQUIRE_GPU();
  ASSIGN_OR_FAIL(a, cuda::DeviceBuffer::alloc(256));
  cuda::DevicePtr p = a.ptr();
  cuda::DeviceBuffer b = std::move(a);
  EXPECT_EQ(a.ptr(), 0u);
  EXPECT_EQ(b.ptr(), p);
  ASSIGN_OR_FAIL(c, cuda::DeviceBuffer::alloc(128));
  c = std::move(b); // frees c's own 128 bytes
  EXPECT_EQ(c.ptr(), p);
  EXPECT_EQ(c.size(), 256u);
}

TEST(DriverGpu, CompiledKernelLaunchesAndRuns) {
  MINFER_REQUIRE_GPU();
  ASSIGN_OR_FAIL(k, gputest::buildSource("add_one_1000", kAddOne, "add_one<1000>"));
  constexpr int n = 1000;
  std::vector<float> host(n);
  for (int i = 0; i < n; ++i) host[i] = 0.5f * i - 100.f;
  ASSIGN_OR_FAIL(buf, gputest::uploadVector(host));
  cuda::DevicePtr x = buf.ptr();
  void *args[] = {&x};
  LaunchDims dims;
  dims.grid = {(n + 255) / 256, 1, 1}; // 256 threads a block: 4 blocks cover 1000
  dims.block = {256, 1, 1};
  MINFER_ASSERT_OK(cuda::launch(k.fn, dims, args));
  MINFER_ASSERT_OK(cuda::launch(k.fn, dims, args)); // twice: +2 each
  MINFER_ASSERT_OK(cuda::synchronize());
  std::vector<float> back(n);
  MINFER_ASSERT_OK(buf.download(back.data(), n * 4));
  for (int i = 0; i < n; ++i) ASSERT_EQ(back[i], host[i] + 2.f) << i;
}

// Launches a shared-sum kernel (kSharedSum, kSharedSumStatic) with `bytes` of dynamic shared memory on 256
// threads; returns out[0].
llvm::Expected<float> launchSharedSum(const cuda::Function &fn, unsigned bytes) {
  auto out = cuda::DeviceBuffer::alloc(4);
  if (!out) return out.takeError();
  if (auto e = out->fill(0xFF)) return e;
  cuda::DevicePtr p = out->ptr();
  int n = int(bytes / 4);
  void *args[] = {&p, &n};
  LaunchDims dims;
  dims.block = {256, 1, 1};
  dims.sharedBytes = bytes;
  if (auto e = cuda::launch(fn, dims, args)) return e;
  if (auto e = cuda::synchronize()) return e;
  float got = 0;
  if (auto e = out->download(&got, 4)) return e;
  return got;
}
// What kSharedSum leaves in out[0] for `bytes` of dynamic shared memory.
double sharedSumOf(unsigned bytes) {
  double want = 0;
  for (unsigned i = 0; i < bytes / 4; ++i) want += i % 8;
  return want;
}

TEST(DriverGpu, DynamicSharedMemoryAbove48KiBIsOptedIn) {
  MINFER_REQUIRE_GPU();
  ASSIGN_OR_FAIL(info, cuda::deviceInfo());
  // 100 KiB: twice the 48 KiB default; clamped to the device's opt-in limit (227 KiB on sm_90, 163 KiB on
  // sm_80, 99 KiB on sm_86/sm_89).
  unsigned bytes = std::min<unsigned>(100 * 1024, unsigned(info.maxSharedPerBlockOptin));
  if (bytes <= 48 * 1024) GTEST_SKIP() << "device allows only " << bytes << " bytes of shared memory per block";
  ASSIGN_OR_FAIL(k, gputest::buildSource("shared_sum", kSharedSum, "shared_sum<0>"));
  ASSIGN_OR_FAIL(got, launchSharedSum(k.fn, bytes));
  EXPECT_EQ(double(got), sharedSumOf(bytes));
  // A smaller launch after the opt-in still works (the attribute is only ever raised).
  ASSIGN_OR_FAIL(smaller, launchSharedSum(k.fn, 64 * 1024));
  EXPECT_EQ(double(smaller), sharedSumOf(64 * 1024));
}

// The 48 KiB a kernel gets without opting in count its static shared memory too: exactly 48 KiB of dynamic
// memory beside 16 static bytes must be opted in (decode attention with 8 warps at head dim 8 or 16 is such
// a kernel).
TEST(DriverGpu, DynamicSharedMemoryBesideStaticIsOptedInPast48KiBTogether) {
  MINFER_REQUIRE_GPU();
  ASSIGN_OR_FAIL(info, cuda::deviceInfo());
  if (info.maxSharedPerBlockOptin < 48 * 1024 + 16) GTEST_SKIP() << "device allows only 48 KiB a block";
  ASSIGN_OR_FAIL(k, gputest::buildSource("shared_sum_static", kSharedSumStatic, "shared_sum_static<0>"));
  EXPECT_EQ(k.fn.staticSharedBytes, 16);
  ASSIGN_OR_FAIL(got, launchSharedSum(k.fn, 48 * 1024));
  EXPECT_EQ(double(got), 4 + sharedSumOf(48 * 1024)); // the four static 1s
}

TEST(DriverGpu, SharedMemoryBeyondTheDeviceLimitIsRefusedBeforeLaunch) {
  MINFER_REQUIRE_GPU();
  ASSIGN_OR_FAIL(info, cuda::deviceInfo());
  ASSIGN_OR_FAIL(k, gputest::buildSource("shared_sum", kSharedSum, "shared_sum<0>"));
  EXPECT_EQ(k.fn.maxSharedOptin, info.maxSharedPerBlockOptin);
  ASSIGN_OR_FAIL(out, cuda::DeviceBuffer::alloc(4));
  cuda::DevicePtr p = out.ptr();
  int n = 1;
  void *args[] = {&p, &n};
  LaunchDims dims;
  dims.block = {32, 1, 1};
  dims.sharedBytes = unsigned(info.maxSharedPerBlockOptin) + 1024;
  std::string msg = errorText(cuda::launch(k.fn, dims, args));
  EXPECT_NE(msg.find(k.fn.name), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::to_string(dims.sharedBytes)), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::to_string(info.maxSharedPerBlockOptin)), std::string::npos) << msg;
  EXPECT_EQ(msg.find("CUDA_ERROR"), std::string::npos) << "the driver saw the launch: " << msg;
  // Nothing was launched, so the context is healthy.
  dims.sharedBytes = 1024;
  MINFER_ASSERT_OK(cuda::launch(k.fn, dims, args));
  MINFER_ASSERT_OK(cuda::synchronize());
}

TEST(DriverGpu, GarbageModuleIsAnErrorNamingCuModuleLoadData) {
  MINFER_REQUIRE_GPU();
  // Random bytes of a cubin-like size. Not ELF, not a fatbin (magic 0xBA55ED50), and NUL-terminated, because
  // the driver reads non-ELF data as PTX text up to the first NUL. Never a truncated ELF: that can crash
  // the driver.
  std::vector<char> bytes(16 * 1024);
  std::mt19937 rng(1234);
  for (char &c : bytes) c = char(rng() & 0xFF);
  bytes[0] = 'Z';
  bytes.back() = 0;
  auto mod = cuda::Module::load(bytes, "garbage");
  ASSERT_FALSE(mod) << "the driver accepted random bytes as a module";
  std::string msg = llvm::toString(mod.takeError());
  EXPECT_NE(msg.find("cuModuleLoadData"), std::string::npos) << msg;
  EXPECT_NE(msg.find("CUDA_ERROR_"), std::string::npos) << msg;
  EXPECT_NE(msg.find("garbage"), std::string::npos) << msg;
  // The context survives a rejected image.
  MINFER_ASSERT_OK(cuda::synchronize());
}

TEST(DriverGpu, UnknownKernelNameIsAnErrorNamingIt) {
  MINFER_REQUIRE_GPU();
  auto target = gputest::deviceTarget();
  ASSERT_TRUE(bool(target)) << llvm::toString(target.takeError());
  auto compiled = compileKernel(KernelSource{"add_one_8", kAddOne, "add_one<8>", {}}, *target);
  ASSERT_TRUE(bool(compiled)) << llvm::toString(compiled.takeError());
  ASSIGN_OR_FAIL(mod, cuda::Module::load(compiled->cubin, "add_one_8"));
  auto fn = mod.function("no_such_kernel");
  ASSERT_FALSE(fn);
  std::string msg = llvm::toString(fn.takeError());
  EXPECT_NE(msg.find("cuModuleGetFunction(no_such_kernel)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("CUDA_ERROR_NOT_FOUND"), std::string::npos) << msg;
}

TEST(DriverGpu, DeviceToDeviceCopyAndEventTiming) {
  MINFER_REQUIRE_GPU();
  constexpr size_t bytes = 64 << 20; // 64 MiB: long enough (~50 us at 3 TB/s) for events to resolve
  ASSIGN_OR_FAIL(src, cuda::DeviceBuffer::alloc(bytes));
  ASSIGN_OR_FAIL(dst, cuda::DeviceBuffer::alloc(bytes));
  MINFER_ASSERT_OK(src.fill(0x5A));
  MINFER_ASSERT_OK(dst.fill(0x00));
  ASSIGN_OR_FAIL(timer, cuda::EventTimer::create());
  MINFER_ASSERT_OK(timer.start());
  MINFER_ASSERT_OK(cuda::copyDeviceToDevice(dst.ptr(), src.ptr(), bytes));
  ASSIGN_OR_FAIL(ms, timer.stop());
  EXPECT_GT(ms, 0.f);
  std::vector<uint8_t> back(bytes);
  MINFER_ASSERT_OK(dst.download(back.data(), bytes));
  EXPECT_EQ(std::count(back.begin(), back.end(), uint8_t(0x5A)), std::ptrdiff_t(bytes));
  std::printf("64 MiB device-to-device copy: %.3f ms, %.0f GB/s (read + write)\n", ms, 2.0 * bytes / (ms * 1e6));

  // The same with the lower-level events.
  ASSIGN_OR_FAIL(a, cuda::Event::create());
  ASSIGN_OR_FAIL(b, cuda::Event::create());
  MINFER_ASSERT_OK(a.record());
  MINFER_ASSERT_OK(cuda::copyDeviceToDevice(src.ptr(), dst.ptr(), bytes));
  MINFER_ASSERT_OK(b.record());
  MINFER_ASSERT_OK(b.synchronize());
  ASSIGN_OR_FAIL(done, b.done());
  EXPECT_TRUE(done);
  ASSIGN_OR_FAIL(ms2, cuda::Event::elapsedMs(a, b));
  EXPECT_GT(ms2, 0.f);
}

// timing::timeMedianChained (how the tuner times gemvs): every timed run is `chain` launches, the first
// of each an ordinary launch and the rest programmatic dependent ones, numbered in order; every one of them
// runs (each adds one to every element), and the result is one launch's share of a run.
TEST(DriverGpu, TimedChainsNumberTheirLaunchesAndMakeAllButTheFirstDependent) {
  MINFER_REQUIRE_GPU();
  ASSIGN_OR_FAIL(k, gputest::buildSource("add_one_1000", kAddOne, "add_one<1000>"));
  constexpr int n = 1000, chain = 3, warmup = 2, iters = 4;
  ASSIGN_OR_FAIL(buf, gputest::uploadVector(std::vector<float>(n, 0.f)));
  cuda::DevicePtr x = buf.ptr();
  void *args[] = {&x};
  LaunchDims dims;
  dims.grid = {(n + 255) / 256, 1, 1};
  dims.block = {256, 1, 1};
  std::vector<std::pair<int, bool>> seen;
  auto ms = timing::timeMedianChained(
      [&](int i, bool dependent) {
        seen.push_back({i, dependent});
        return cuda::launch(k.fn, dims, args, nullptr, dependent);
      },
      chain, warmup, iters);
  MINFER_ASSERT_OK(ms.takeError());
  EXPECT_GE(*ms, 0.0);
  MINFER_ASSERT_OK(cuda::synchronize());
  // timeMedian may retry its timed runs behind a longer busy block: at least warmup + iters runs.
  ASSERT_GE(seen.size(), size_t((warmup + iters) * chain));
  ASSERT_EQ(seen.size() % chain, 0u);
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].first, int(i));
    EXPECT_EQ(seen[i].second, i % chain != 0) << "launch " << i;
  }
  std::vector<float> back(n);
  MINFER_ASSERT_OK(buf.download(back.data(), n * 4));
  for (int i = 0; i < n; ++i) ASSERT_EQ(back[i], float(seen.size())) << i;
}

} // namespace
