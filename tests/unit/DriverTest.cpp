// DriverTest.cpp — the CUDA driver layer where there may be no driver at all (CI, the build machine):
// the messages for a missing or foreign libcuda, $MINFER_LIBCUDA, available() with its reason, and every
// API entry returning init()'s error instead of crashing when called without init. With a GPU present
// the no-driver cases skip; tests/gpu/DriverGpuTest.cpp covers the GPU side.
#include "runtime/Driver.h"
#include "runtime/KernelLoader.h"
#include "runtime/Timing.h"
#include "compiler/kernels/Gemm.h"
#include "common/TestFiles.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <tuple>

using namespace minfer;
using llvm::StringRef;

namespace {

// A path that cannot exist, for "the library is missing".
constexpr const char *kMissingLibrary = "/nonexistent/minfer-test/libcuda.so.1";

using test::failsMentioning;

TEST(Driver, MissingLibraryIsNoCudaDriverNamingThePath) {
  EXPECT_TRUE(failsMentioning(cuda::probeDriver(kMissingLibrary), {"no CUDA driver", "cannot load", kMissingLibrary}));
}

TEST(Driver, FileThatIsNotALibraryIsNoCudaDriver) {
  llvm::SmallString<128> path;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("minfer-not-libcuda", "so", path));
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    ASSERT_FALSE(ec);
    os << "this is not an ELF shared object\n";
  }
  EXPECT_TRUE(failsMentioning(cuda::probeDriver(path), {"no CUDA driver", "cannot load", path}));
  llvm::sys::fs::remove(path);
}

TEST(Driver, LibraryWithoutDriverEntryPointsIsNotACudaDriver) {
  // libm loads everywhere and exports no cuDriverGetVersion.
  EXPECT_TRUE(failsMentioning(cuda::probeDriver("libm.so.6"), {"no CUDA driver", "libm.so.6", "cuDriverGetVersion"}));
}

TEST(Driver, MissingLibrarySaysWhereToPointMinferLibcuda) {
  EXPECT_TRUE(failsMentioning(cuda::probeDriver(kMissingLibrary), {"set MINFER_LIBCUDA"}));
}

// cuGetErrorName needs a working driver; the common CUresults are named without one.
TEST(Driver, CommonResultsAreNamedWithoutADriver) {
  EXPECT_STREQ(cuda::resultName(34), "CUDA_ERROR_STUB_LIBRARY");
  EXPECT_STREQ(cuda::resultName(100), "CUDA_ERROR_NO_DEVICE");
  EXPECT_STREQ(cuda::resultName(200), "CUDA_ERROR_INVALID_IMAGE");
  EXPECT_STREQ(cuda::resultName(0), "CUDA_SUCCESS");
  EXPECT_EQ(cuda::resultName(123456), nullptr);
}
// (The toolkit's stub libcuda, named by CUDA_ERROR_STUB_LIBRARY: tests/lit/cli-driver-stub.test.)

TEST(Driver, VersionsAreReadable) {
  EXPECT_EQ(cuda::versionString(12080), "12.8");
  EXPECT_EQ(cuda::versionString(13000), "13.0");
  EXPECT_GE(cuda::headerCudaVersion(), 12000);
}

// init() reads $MINFER_LIBCUDA once and keeps its answer, so this runs in a fresh process (a
// "threadsafe" death test re-executes the test binary for just this test).
TEST(DriverDeathTest, InitHonoursMinferLibcuda) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("MINFER_LIBCUDA", kMissingLibrary, 1);
        llvm::Error e = cuda::init();
        std::string msg = e ? llvm::toString(std::move(e)) : "init succeeded";
        std::string why;
        bool avail = cuda::available(&why);
        fprintf(stderr, "init: %s\navailable: %d, why: %s\n", msg.c_str(), int(avail), why.c_str());
        std::exit(avail ? 1 : 0);
      },
      testing::ExitedWithCode(0), "init: no CUDA driver: cannot load /nonexistent/minfer-test/libcuda.so.1: .*"
                                  "available: 0, why: no CUDA driver: cannot load /nonexistent/minfer-test");
}

TEST(Driver, AvailableGivesAReasonWhenThereIsNoGpu) {
  std::string why = "stale";
  if (cuda::available(&why)) {
    EXPECT_TRUE(why.empty());
    GTEST_SKIP() << "a GPU is present; the no-GPU answer cannot be checked here";
  }
  EXPECT_FALSE(why.empty());
  EXPECT_NE(why, "stale");
  // The answer is kept: a second call says the same.
  std::string again;
  EXPECT_FALSE(cuda::available(&again));
  EXPECT_EQ(why, again);
  EXPECT_TRUE(failsMentioning(cuda::init(), {why}));
}

// Every entry point initialises on its own; without a driver each returns init()'s error, no crash.
TEST(Driver, EveryCallWithoutADriverReturnsTheInitError) {
  std::string why;
  if (cuda::available(&why)) GTEST_SKIP() << "a GPU is present; DriverGpuTest covers these calls";
  EXPECT_TRUE(failsMentioning(cuda::deviceInfo(), {why}));
  EXPECT_TRUE(failsMentioning(cuda::DeviceBuffer::alloc(1024), {why}));
  EXPECT_TRUE(failsMentioning(cuda::synchronize(), {why}));
  EXPECT_TRUE(failsMentioning(cuda::EventTimer::create(), {why}));
  EXPECT_TRUE(failsMentioning(cuda::Event::create(), {why}));
  EXPECT_TRUE(failsMentioning(cuda::copyDeviceToDevice(0x1000, 0x2000, 64), {why}));
  const char bytes[16] = {1, 2, 3};
  EXPECT_TRUE(failsMentioning(cuda::Module::load(bytes, "m"), {why}));
  cuda::Function fn;
  fn.handle = reinterpret_cast<void *>(0x1); // never dereferenced: init fails first
  fn.name = "k";
  EXPECT_TRUE(failsMentioning(cuda::launch(fn, LaunchDims{}, nullptr), {why}));
}

// Objects that were never created are safe to use and destroy, with or without a GPU.
TEST(Driver, DefaultConstructedObjectsAreInertAndSayWhy) {
  cuda::DeviceBuffer buf;
  char host[8] = {};
  EXPECT_TRUE(failsMentioning(buf.upload(host, sizeof host), {"upload of 8 bytes", "buffer of 0 bytes"}));
  EXPECT_TRUE(failsMentioning(buf.download(host, sizeof host), {"download of 8 bytes"}));
  EXPECT_FALSE(bool(buf.upload(host, 0))); // nothing to move is not an error
  cuda::Module mod;
  EXPECT_TRUE(failsMentioning(mod.function("add_one"), {"cuModuleGetFunction(add_one)", "no module loaded"}));
  cuda::Function fn;
  fn.name = "add_one";
  EXPECT_TRUE(failsMentioning(cuda::launch(fn, LaunchDims{}, nullptr), {"add_one", "no function"}));
  cuda::EventTimer timer;
  EXPECT_TRUE(failsMentioning(timer.start(), {"event not created"}));
  cuda::Event ev;
  EXPECT_TRUE(failsMentioning(ev.done(), {"event not created"}));
  // Moves of empty objects, then destruction: nothing to free.
  cuda::DeviceBuffer moved = std::move(buf);
  cuda::Module movedMod = std::move(mod);
  cuda::EventTimer movedTimer = std::move(timer);
  EXPECT_EQ(moved.ptr(), 0u);
}

// Tensor maps (the wgmma kernels' TMA descriptors): the shapes the driver would refuse are refused first,
// with the numbers, with or without a GPU.
TEST(Driver, TensorMapsTheDriverCannotEncodeAreRefusedWithTheShape) {
  for (auto [base, inner, outer, boxInner, boxOuter] :
       {std::tuple<uint64_t, int64_t, int64_t, int, int>{0x1008, 64, 64, 64, 64}, // base not 16-byte aligned
        {0x1000, 100, 64, 64, 64},                                               // rows not a multiple of 8
        {0x1000, 64, 0, 64, 64},                                                 // no rows
        {0x1000, 64, 64, 128, 64},                                               // box wider than 128 bytes
        {0x1000, 64, 64, 64, 512}})                                              // box taller than 256
    EXPECT_TRUE(failsMentioning(cuda::encodeTensorMap2D(base, inner, outer, boxInner, boxOuter),
                                {"tensor map of a " + std::to_string(outer) + " x " + std::to_string(inner),
                                 "16-byte aligned"}));
}

// A spec whose tensor map names a field its Params lacks (or one that is not a pointer) is an error at the
// launch, before anything reaches the driver.
TEST(Driver, ATensorMapOfAFieldThatIsNoPointerIsRefusedAtLaunch) {
  struct BadMaps : GemmSpec {
    using GemmSpec::GemmSpec;
    const char *field = "";
    std::vector<TensorMapArg> tensorMaps(int64_t) const override { return {TensorMapArg{field, 64, 64, 64, 64}}; }
  };
  BadMaps spec(64, 64, Epilogue::None, GemmTile::hopper(64, 64, 2));
  MatmulParams p;
  cuda::Function fn;
  fn.name = "gemm";
  for (const char *field : {"rows", "no_such_field"}) {
    spec.field = field;
    EXPECT_TRUE(failsMentioning(launchSpec(fn, spec, 64, &p), {spec.name(), std::string("'") + field + "'",
                                                               "not a pointer field of minfer::MatmulParams"}));
  }
}

// The launcher keeps at most three tensor maps on the stack (64-byte aligned); a spec asking for more is an
// error at the launch, naming the kernel and the limit.
TEST(Driver, MoreThanThreeTensorMapsAreRefusedAtLaunch) {
  struct FourMaps : GemmSpec {
    using GemmSpec::GemmSpec;
    std::vector<TensorMapArg> tensorMaps(int64_t) const override {
      return std::vector<TensorMapArg>(4, TensorMapArg{"A", 64, 64, 64, 64});
    }
  };
  FourMaps spec(64, 64, Epilogue::None, GemmTile::hopper(64, 64, 2));
  MatmulParams p;
  cuda::Function fn;
  fn.name = "gemm";
  EXPECT_TRUE(failsMentioning(launchSpec(fn, spec, 64, &p), {spec.name(), "4 tensor maps, at most 3"}));
}

// A map's extra rows (attention's start_pos) come from an int field of the Params; naming any other field
// is an error at the launch.
TEST(Driver, ATensorMapThatAddsAFieldThatIsNoIntIsRefusedAtLaunch) {
  struct BadPlus : GemmSpec {
    using GemmSpec::GemmSpec;
    const char *plus = "";
    std::vector<TensorMapArg> tensorMaps(int64_t) const override {
      TensorMapArg m{"A", 64, 64, 64, 64};
      m.outerPlus = plus;
      return {m};
    }
  };
  BadPlus spec(64, 64, Epilogue::None, GemmTile::hopper(64, 64, 2));
  MatmulParams p;
  cuda::Function fn;
  fn.name = "gemm";
  for (const char *field : {"A", "no_such_field"}) {
    spec.plus = field;
    EXPECT_TRUE(failsMentioning(launchSpec(fn, spec, 64, &p), {spec.name(), std::string("'") + field + "'",
                                                               "not an int field of minfer::MatmulParams"}));
  }
}

TEST(Timing, AChainOfNoLaunchesIsRefusedBeforeTouchingTheGpu) {
  int calls = 0;
  auto ms = timing::timeMedianChained([&](int, bool) { ++calls; return llvm::Error::success(); }, 0, 1, 1);
  ASSERT_FALSE(ms);
  EXPECT_NE(llvm::toString(ms.takeError()).find("need chain >= 1, got 0"), std::string::npos);
  EXPECT_EQ(calls, 0);
}

} // namespace
