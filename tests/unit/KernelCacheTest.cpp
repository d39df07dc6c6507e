// tests/unit/KernelCacheTest.cpp — the disk cache and compileAll, without a GPU.
//
// Every test gets its own cache directory. Hits are observed through nvrtcCompileCount() (no timing), bad
// entries are made by truncating or flipping bytes, concurrency by fork(): two processes racing on one key,
// and a lock holder killed with SIGKILL. Tests run as root, so an unwritable cache is a path that goes
// through a regular file.
#include "jit/KernelCache.h"
#include "jit/ParallelCompile.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

#include "common/TestFiles.h"

#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <set>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace minfer;
using test::ScopedEnv;
using test::scaleKernel;
using test::target;

namespace {

// getOrCompile that fails the test on error; reports whether it hit.
CompiledKernel get(KernelCache &c, const KernelSource &s, const Target &t, bool *hit,
                   const CompileOptions &o = {}) {
  llvm::Expected<CompiledKernel> k = c.getOrCompile(s, t, o, hit);
  EXPECT_TRUE(bool(k)) << llvm::toString(k.takeError());
  return k ? std::move(*k) : CompiledKernel{};
}

std::vector<CacheEntryInfo> listed(const KernelCache &c) {
  llvm::Expected<std::vector<CacheEntryInfo>> l = c.list();
  EXPECT_TRUE(bool(l)) << llvm::toString(l.takeError());
  return l ? std::move(*l) : std::vector<CacheEntryInfo>{};
}

void expectSameKernel(const CompiledKernel &a, const CompiledKernel &b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.loweredName, b.loweredName);
  EXPECT_TRUE(a.cubin == b.cubin) << "cubins differ: " << a.cubin.size() << " vs " << b.cubin.size() << " bytes";
  EXPECT_EQ(a.ptx, b.ptx);
}

class KernelCacheTest : public ::testing::Test {
protected:
  void SetUp() override {
    llvm::SmallString<128> p;
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("minfer-cache-test", p));
    root = std::string(p);
  }
  void TearDown() override { llvm::sys::fs::remove_directories(root); }

  KernelCache cache() { return KernelCache::openAt(root + "/cache"); }
  std::string keyOf(const KernelSource &s, const Target &t, const CompileOptions &o = {}) {
    llvm::Expected<CacheKey> k = KernelCache::computeKey(s, t, o);
    EXPECT_TRUE(bool(k)) << llvm::toString(k.takeError());
    return k ? k->hex : "";
  }

  // One kernel compiled into the cache, for the tests that damage its entry file.
  struct CachedEntry {
    KernelSource src;
    Target t;
    CompiledKernel fresh; // as compiled on the first (missing) lookup
    std::string path;     // its entry file
    std::string bytes;    // the entry file as first written
  };
  CachedEntry compileOneEntry(KernelCache &c) {
    CachedEntry e{scaleKernel("scale_x3"), target("sm_89"), {}, "", ""};
    bool hit = true;
    e.fresh = get(c, e.src, e.t, &hit);
    EXPECT_FALSE(hit);
    e.path = c.entryPath(keyOf(e.src, e.t));
    e.bytes = test::readFile(e.path);
    return e;
  }
  // Overwrites the entry with `damaged`: lookup must refuse it, and getOrCompile must miss, compile the
  // same kernel again and write the entry anew.
  void expectDamageRebuilt(KernelCache &c, const CachedEntry &e, const std::string &damaged) {
    test::writeFile(e.path, damaged);
    EXPECT_FALSE(c.lookup(keyOf(e.src, e.t), e.t).has_value());
    bool hit = true;
    CompiledKernel rebuilt = get(c, e.src, e.t, &hit);
    EXPECT_FALSE(hit);
    expectSameKernel(rebuilt, e.fresh);
    EXPECT_EQ(test::readFile(e.path), e.bytes) << "the rebuilt entry replaces the bad one";
  }

  std::string root;
  ScopedEnv noBypass{"MINFER_NO_CACHE", std::nullopt};
  ScopedEnv noDebug{"MINFER_CACHE_DEBUG", std::nullopt};
};

} // namespace

TEST_F(KernelCacheTest, SecondCompileIsAHitWithoutNvrtc) {
  KernelCache c = cache();
  Target t = target("sm_80");
  bool hit = true;
  CompiledKernel first = get(c, scaleKernel("scale_x3"), t, &hit);
  EXPECT_FALSE(hit);
  EXPECT_TRUE(llvm::sys::fs::exists(c.entryPath(keyOf(scaleKernel("scale_x3"), t))));

  uint64_t compiles = nvrtcCompileCount();
  KernelCache reopened = KernelCache::openAt(root + "/cache"); // as a later process would
  CompiledKernel second = get(reopened, scaleKernel("scale_x3"), t, &hit);
  EXPECT_TRUE(hit);
  EXPECT_EQ(nvrtcCompileCount(), compiles) << "a hit must not run NVRTC";
  expectSameKernel(first, second);
}

TEST_F(KernelCacheTest, AnyKeyChangeIsAMiss) {
  KernelCache c = cache();
  Target t = target("sm_80");
  KernelSource base = scaleKernel("scale_x3");
  bool hit = false;
  get(c, base, t, &hit);

  KernelSource otherText = base;
  otherText.text = "// one more comment\n" + base.text;
  KernelSource otherEntry = scaleKernel("scale_x3", 4);
  KernelSource otherName = scaleKernel("scale_x3_renamed");
  CompileOptions lineInfo;
  lineInfo.lineInfo = true;
  std::string k0 = keyOf(base, t);
  for (const std::string &k : {keyOf(otherText, t), keyOf(otherEntry, t), keyOf(otherName, t),
                               keyOf(base, target("sm_89")), keyOf(base, target("sm_90a")), keyOf(base, t, lineInfo)})
    EXPECT_NE(k, k0);

  uint64_t before = nvrtcCompileCount();
  get(c, otherText, t, &hit);
  EXPECT_FALSE(hit) << "source change";
  get(c, base, target("sm_89"), &hit);
  EXPECT_FALSE(hit) << "target change";
  get(c, base, t, &hit, lineInfo);
  EXPECT_FALSE(hit) << "option change";
  EXPECT_EQ(nvrtcCompileCount(), before + 3);
  get(c, base, t, &hit);
  EXPECT_TRUE(hit) << "the original is still cached";
}

TEST_F(KernelCacheTest, TruncatedEntryIsRebuiltNeverUsed) {
  KernelCache c = cache();
  CachedEntry e = compileOneEntry(c);
  ASSERT_GT(e.bytes.size(), e.fresh.cubin.size());

  for (size_t keep : {e.bytes.size() - 1, e.bytes.size() / 2, size_t(10), size_t(0)}) {
    SCOPED_TRACE("kept " + std::to_string(keep) + " bytes");
    expectDamageRebuilt(c, e, e.bytes.substr(0, keep));
  }
}

TEST_F(KernelCacheTest, FlippedByteIsRebuiltNeverUsed) {
  KernelCache c = cache();
  CachedEntry e = compileOneEntry(c);

  // In the cubin's middle (payload), in the header's key, and in the trailing digest.
  for (size_t at : {e.bytes.size() / 2, size_t(20), e.bytes.size() - 1}) {
    SCOPED_TRACE("flipped byte " + std::to_string(at));
    std::string bad = e.bytes;
    bad[at] ^= 0x01;
    expectDamageRebuilt(c, e, bad);
  }
}

TEST_F(KernelCacheTest, EntryUnderAnotherKeyIsNotUsed) {
  KernelCache c = cache();
  KernelSource a = scaleKernel("scale_x3"), b = scaleKernel("scale_x5", 5);
  Target t = target("sm_80");
  bool hit = false;
  get(c, a, t, &hit);
  // A valid entry copied under b's key (as a careless sync tool might): its key field gives it away.
  ASSERT_FALSE(llvm::sys::fs::create_directories(c.kernelsDir()));
  test::writeFile(c.entryPath(keyOf(b, t)), test::readFile(c.entryPath(keyOf(a, t))));
  EXPECT_FALSE(c.lookup(keyOf(b, t), t).has_value());
  CompiledKernel kb = get(c, b, t, &hit);
  EXPECT_FALSE(hit);
  EXPECT_EQ(kb.loweredName, "_Z5scaleILi5EEvPf");
  // And an entry for sm_80 is never returned for sm_89 even under the right key.
  EXPECT_FALSE(c.lookup(keyOf(a, t), target("sm_89")).has_value());
}

TEST_F(KernelCacheTest, TwoProcessesRacingOnOneKeyAgree) {
  KernelCache c = cache();
  Target t = target("sm_90");
  KernelSource src = scaleKernel("scale_race");
  int gate[2];
  ASSERT_EQ(pipe(gate), 0);
  pid_t pids[2];
  for (int i = 0; i < 2; ++i) {
    pids[i] = fork();
    ASSERT_GE(pids[i], 0);
    if (pids[i] == 0) {
      ::close(gate[1]);
      char x;
      while (::read(gate[0], &x, 1) < 0 && errno == EINTR) {} // released together when the parent closes
      bool hit = false;
      llvm::Expected<CompiledKernel> k = c.getOrCompile(src, t, {}, &hit);
      if (!k) {
        llvm::consumeError(k.takeError());
        ::_exit(2);
      }
      std::string out = root + "/out" + std::to_string(i);
      test::writeFile(out + ".cubin", std::string(k->cubin.begin(), k->cubin.end()));
      test::writeFile(out + ".hit", hit ? "1" : "0");
      ::_exit(0);
    }
  }
  ::close(gate[0]);
  ::close(gate[1]);
  int compiled = 0;
  for (int i = 0; i < 2; ++i) {
    int status = 0;
    ASSERT_EQ(waitpid(pids[i], &status, 0), pids[i]);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child " << i << " status " << status;
    compiled += test::readFile(root + "/out" + std::to_string(i) + ".hit") == "0";
  }
  EXPECT_EQ(compiled, 1) << "the lock lets exactly one process compile";
  std::string a = test::readFile(root + "/out0.cubin");
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, test::readFile(root + "/out1.cubin"));
  ASSERT_TRUE(c.lookup(keyOf(src, t), t).has_value());
}

TEST_F(KernelCacheTest, KilledLockHolderDoesNotBlock) {
  KernelCache c = cache();
  Target t = target("sm_80");
  KernelSource src = scaleKernel("scale_orphan");
  std::string lock = c.lockPath(keyOf(src, t));
  ASSERT_FALSE(llvm::sys::fs::create_directories(c.kernelsDir()));
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int fd = ::open(lock.c_str(), O_RDWR | O_CREAT, 0666);
    if (fd < 0 || ::flock(fd, LOCK_EX) != 0) ::_exit(2);
    (void)!::write(ready[1], "x", 1);
    for (;;) pause(); // holds the lock until killed
  }
  ::close(ready[1]);
  char x;
  ASSERT_EQ(::read(ready[0], &x, 1), 1);
  ::close(ready[0]);

  int probe = ::open(lock.c_str(), O_RDWR);
  ASSERT_GE(probe, 0);
  EXPECT_NE(::flock(probe, LOCK_EX | LOCK_NB), 0) << "the child should hold the lock";
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  // Checked without blocking first, so a regression fails here instead of hanging the suite.
  EXPECT_EQ(::flock(probe, LOCK_EX | LOCK_NB), 0) << "the kernel releases a dead holder's flock";
  ::flock(probe, LOCK_UN);
  ::close(probe);
  EXPECT_TRUE(llvm::sys::fs::exists(lock)) << "the stale lock file is still there, and harmless";

  bool hit = true;
  get(c, src, t, &hit);
  EXPECT_FALSE(hit);
  get(c, src, t, &hit);
  EXPECT_TRUE(hit);
}

TEST_F(KernelCacheTest, ForkedWorkerDoesNotKeepParentLocks) {
  // A thread of the parent holds key K's lock while a worker is forked. The worker shares that open file
  // (and so its flock) until it closes it: without releaseInheritedLocks it would wait on itself for K.
  KernelCache c = cache();
  ASSERT_FALSE(llvm::sys::fs::create_directories(c.kernelsDir()));
  std::string key = keyOf(scaleKernel("scale_x3"), target("sm_80"));
  std::optional<CacheLock> held;
  {
    llvm::Expected<CacheLock> l = c.lockKey(key);
    ASSERT_TRUE(bool(l)) << llvm::toString(l.takeError());
    held.emplace(std::move(*l));
  }
  int released[2];
  ASSERT_EQ(pipe(released), 0);
  pid_t pid = forkOutsideNvrtc();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    KernelCache::releaseInheritedLocks();
    ::close(released[1]);
    char x;
    while (::read(released[0], &x, 1) < 0 && errno == EINTR) {} // EOF: the parent dropped its lock
    int fd = ::open(c.lockPath(key).c_str(), O_RDWR);
    // Polled, so a regression fails after 10 s instead of hanging the suite.
    for (int i = 0; i < 1000; ++i, usleep(10000)) // 1000 x 10 ms
      if (::flock(fd, LOCK_EX | LOCK_NB) == 0) ::_exit(0);
    ::_exit(1);
  }
  ::close(released[0]);
  held.reset();
  ::close(released[1]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the worker could not take the released lock";
}

TEST_F(KernelCacheTest, UnwritableCacheWarnsOnceAndCompiles) {
  test::writeFile(root + "/file", "a regular file where a directory should be");
  KernelCache c = KernelCache::openAt(root + "/file/cache");
  KernelCache::resetWarningForTesting();
  testing::internal::CaptureStderr();
  bool hit = true;
  CompiledKernel a = get(c, scaleKernel("scale_x3"), target("sm_80"), &hit);
  EXPECT_FALSE(hit);
  get(c, scaleKernel("scale_x5", 5), target("sm_80"), &hit);
  KernelCache again = KernelCache::openAt(root + "/file/other");
  get(again, scaleKernel("scale_x3"), target("sm_80"), &hit);
  EXPECT_FALSE(hit);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(a.cubin.empty());
  size_t first = err.find("warning");
  ASSERT_NE(first, std::string::npos) << err;
  EXPECT_EQ(err.find("warning", first + 1), std::string::npos) << "warned more than once:\n" << err;
  EXPECT_NE(err.find(root + "/file"), std::string::npos) << "the warning names the path:\n" << err;
  EXPECT_FALSE(c.usable());
}

TEST_F(KernelCacheTest, NoCacheEnvBypasses) {
  ScopedEnv off("MINFER_NO_CACHE", "1");
  KernelCache c = cache();
  bool hit = true;
  uint64_t before = nvrtcCompileCount();
  get(c, scaleKernel("scale_x3"), target("sm_80"), &hit);
  get(c, scaleKernel("scale_x3"), target("sm_80"), &hit);
  EXPECT_FALSE(hit);
  EXPECT_EQ(nvrtcCompileCount(), before + 2);
  EXPECT_FALSE(llvm::sys::fs::exists(c.kernelsDir()));
}

TEST_F(KernelCacheTest, DebugPrintsKeyComponentsOnMissOnly) {
  ScopedEnv debug("MINFER_CACHE_DEBUG", "1");
  KernelCache c = cache();
  bool hit = false;
  testing::internal::CaptureStderr();
  get(c, scaleKernel("scale_x3"), target("sm_86"), &hit);
  std::string miss = testing::internal::GetCapturedStderr();
  for (const std::string &want : {std::string("scale_x3"), std::string("minfer: "), "nvrtc: " + nvrtcVersion(),
                                  std::string("target: sm_86"), std::string("options: --gpu-architecture=sm_86"),
                                  std::string("templates: sha256:"), std::string("source: sha256:"),
                                  std::string("entry: scale<3>")})
    EXPECT_NE(miss.find(want), std::string::npos) << "missing '" << want << "' in:\n" << miss;
  testing::internal::CaptureStderr();
  get(c, scaleKernel("scale_x3"), target("sm_86"), &hit);
  EXPECT_TRUE(hit);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

TEST(KernelCacheLocation, EnvironmentResolution) {
  {
    ScopedEnv dir("MINFER_CACHE_DIR", "/somewhere/minfer-cache");
    ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(KernelCache::defaultDir(), "/somewhere/minfer-cache");
    EXPECT_EQ(KernelCache::openDefault().kernelsDir(), "/somewhere/minfer-cache/kernels");
  }
  {
    ScopedEnv dir("MINFER_CACHE_DIR", std::nullopt);
    ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(KernelCache::defaultDir(), "/xdg/minfer");
  }
  {
    ScopedEnv dir("MINFER_CACHE_DIR", std::nullopt);
    ScopedEnv xdg("XDG_CACHE_HOME", std::nullopt);
    ScopedEnv home("HOME", "/home/someone");
    EXPECT_EQ(KernelCache::defaultDir(), "/home/someone/.cache/minfer");
  }
}

TEST_F(KernelCacheTest, ListVerifyClear) {
  KernelCache c = cache();
  EXPECT_TRUE(listed(c).empty()) << "an absent cache lists nothing";
  Target t = target("sm_80");
  KernelSource a = scaleKernel("scale_a"), b = scaleKernel("scale_b", 5);
  bool hit = false;
  get(c, a, t, &hit);
  get(c, b, t, &hit);
  std::string bEntry = c.entryPath(keyOf(b, t));
  std::string bytes = test::readFile(bEntry);
  bytes[bytes.size() / 2] ^= 0x40;
  test::writeFile(bEntry, bytes);

  std::vector<CacheEntryInfo> entries = listed(c);
  ASSERT_EQ(entries.size(), 2u) << "lock files are not entries";
  const CacheEntryInfo &good = entries[0].valid ? entries[0] : entries[1];
  const CacheEntryInfo &broken = entries[0].valid ? entries[1] : entries[0];
  EXPECT_TRUE(good.valid);
  EXPECT_EQ(good.kernel, "scale_a");
  EXPECT_EQ(good.target, "sm_80");
  EXPECT_EQ(good.key, keyOf(a, t));
  EXPECT_GT(good.bytes, 0u);
  EXPECT_FALSE(broken.valid);
  EXPECT_EQ(broken.key, keyOf(b, t));
  EXPECT_NE(broken.problem.find("checksum"), std::string::npos) << broken.problem;

  llvm::Expected<VerifyReport> report = c.verify();
  ASSERT_TRUE(bool(report)) << llvm::toString(report.takeError());
  EXPECT_EQ(report->valid, 1u);
  ASSERT_EQ(report->bad.size(), 1u);
  EXPECT_EQ(report->removed, 0u);
  EXPECT_TRUE(llvm::sys::fs::exists(bEntry));
  report = c.verify(/*removeBad=*/true);
  ASSERT_TRUE(bool(report)) << llvm::toString(report.takeError());
  EXPECT_EQ(report->removed, 1u);
  EXPECT_EQ(report->notRemoved, 0u);
  ASSERT_EQ(report->bad.size(), 1u);
  EXPECT_TRUE(report->bad[0].removed);
  EXPECT_FALSE(llvm::sys::fs::exists(bEntry));
  EXPECT_EQ(listed(c).size(), 1u);

  llvm::Error cleared = c.clear();
  ASSERT_FALSE(bool(cleared)) << llvm::toString(std::move(cleared));
  EXPECT_TRUE(listed(c).empty());
  std::error_code ec;
  EXPECT_EQ(llvm::sys::fs::directory_iterator(c.kernelsDir(), ec), llvm::sys::fs::directory_iterator())
      << "clear leaves no locks or temporaries";
}

// Something other than a file where an entry should be: listed as bad (never read: a FIFO would block),
// removed by verify when named like an entry, a directory with everything in it.
TEST_F(KernelCacheTest, VerifyRemovesADirectoryOrFifoInAnEntrysPlace) {
  KernelCache c = cache();
  Target t = target("sm_80");
  KernelSource a = scaleKernel("scale_a"), b = scaleKernel("scale_b", 5);
  bool hit = false;
  get(c, a, t, &hit);
  std::string dirEntry = c.entryPath(keyOf(b, t));
  ASSERT_FALSE(llvm::sys::fs::create_directories(dirEntry + "/sub"));
  test::writeFile(dirEntry + "/sub/file", "x");
  std::string fifoEntry = c.entryPath(std::string(64, 'f'));
  ASSERT_EQ(::mkfifo(fifoEntry.c_str(), 0600), 0);

  std::vector<CacheEntryInfo> entries = listed(c);
  ASSERT_EQ(entries.size(), 3u);
  for (const CacheEntryInfo &e : entries) {
    if (e.valid) continue;
    EXPECT_NE(e.problem.find(e.key == keyOf(b, t) ? "a directory where an entry file should be"
                                                  : "a FIFO where an entry file should be"),
              std::string::npos)
        << e.problem;
  }
  llvm::Expected<VerifyReport> report = c.verify();
  ASSERT_TRUE(bool(report)) << llvm::toString(report.takeError());
  EXPECT_EQ(report->bad.size(), 2u);
  EXPECT_EQ(report->removed, 0u) << "nothing removed unless asked";
  EXPECT_TRUE(llvm::sys::fs::exists(dirEntry));

  report = c.verify(/*removeBad=*/true);
  ASSERT_TRUE(bool(report)) << llvm::toString(report.takeError());
  EXPECT_EQ(report->valid, 1u);
  EXPECT_EQ(report->removed, 2u);
  EXPECT_EQ(report->notRemoved, 0u);
  for (const BadEntry &e : report->bad) EXPECT_TRUE(e.removed && e.notRemoved.empty()) << e.notRemoved;
  EXPECT_FALSE(llvm::sys::fs::exists(dirEntry));
  EXPECT_FALSE(llvm::sys::fs::exists(fifoEntry));
  EXPECT_EQ(listed(c).size(), 1u);
  llvm::Error cleared = c.clear();
  EXPECT_FALSE(bool(cleared)) << llvm::toString(std::move(cleared));
}

// A directory whose name is no key is not the cache's to delete: verify and clear leave it, say so and
// fail; everything else is still cleared.
TEST_F(KernelCacheTest, ADirectoryNotNamedLikeAnEntryIsReportedNotRemoved) {
  KernelCache c = cache();
  Target t = target("sm_80");
  bool hit = false;
  get(c, scaleKernel("scale_a"), t, &hit);
  std::string foreign = c.kernelsDir() + "/mine.mkc";
  ASSERT_FALSE(llvm::sys::fs::create_directories(foreign));
  test::writeFile(foreign + "/keep", "x");

  llvm::Expected<VerifyReport> report = c.verify(/*removeBad=*/true);
  ASSERT_TRUE(bool(report)) << llvm::toString(report.takeError());
  EXPECT_EQ(report->valid, 1u);
  EXPECT_EQ(report->removed, 0u);
  EXPECT_EQ(report->notRemoved, 1u);
  ASSERT_EQ(report->bad.size(), 1u);
  EXPECT_FALSE(report->bad[0].removed);
  EXPECT_NE(report->bad[0].notRemoved.find("not named like a cache entry"), std::string::npos)
      << report->bad[0].notRemoved;
  EXPECT_EQ(test::readFile(foreign + "/keep"), "x");

  llvm::Error cleared = c.clear();
  ASSERT_TRUE(bool(cleared));
  std::string err = llvm::toString(std::move(cleared));
  EXPECT_NE(err.find("cannot clear " + c.kernelsDir()), std::string::npos) << err;
  EXPECT_NE(err.find(foreign + ": a directory not named like a cache entry"), std::string::npos) << err;
  EXPECT_EQ(test::readFile(foreign + "/keep"), "x");
  EXPECT_TRUE(listed(c).size() == 1 && !listed(c)[0].valid) << "the good entry and the locks are gone";

  ASSERT_FALSE(llvm::sys::fs::remove_directories(foreign));
  cleared = c.clear();
  EXPECT_FALSE(bool(cleared)) << llvm::toString(std::move(cleared));
}

// clear removes directories in the places of locks, entries and temporaries, with their contents.
TEST_F(KernelCacheTest, ClearRemovesDirectoriesNamedLikeItsOwnFiles) {
  KernelCache c = cache();
  std::string key(64, 'a');
  for (std::string name : {key + ".mkc", key + ".lock", key + ".mkc.tmp-12345678"}) {
    ASSERT_FALSE(llvm::sys::fs::create_directories(c.kernelsDir() + "/" + name + "/d"));
    test::writeFile(c.kernelsDir() + "/" + name + "/d/f", "x");
  }
  llvm::Error cleared = c.clear();
  ASSERT_FALSE(bool(cleared)) << llvm::toString(std::move(cleared));
  std::error_code ec;
  EXPECT_EQ(llvm::sys::fs::directory_iterator(c.kernelsDir(), ec), llvm::sys::fs::directory_iterator());
}

// A compile that finds a directory in its entry's place removes it under the lock and stores the entry.
TEST_F(KernelCacheTest, GetOrCompileReplacesADirectoryInItsEntrysPlace) {
  KernelCache c = cache();
  Target t = target("sm_80");
  KernelSource a = scaleKernel("scale_a");
  std::string entry = c.entryPath(keyOf(a, t));
  ASSERT_FALSE(llvm::sys::fs::create_directories(entry + "/sub"));
  bool hit = true;
  get(c, a, t, &hit);
  EXPECT_FALSE(hit);
  EXPECT_TRUE(llvm::sys::fs::is_regular_file(entry));
  get(c, a, t, &hit);
  EXPECT_TRUE(hit);
}

TEST_F(KernelCacheTest, CompileAllInWorkersMatchesSerialAndHitsTheSecondTime) {
  KernelCache c = cache();
  Target t = target("sm_89");
  std::vector<KernelSource> srcs = {scaleKernel("k_x2", 2), scaleKernel("k_x3", 3), scaleKernel("k_x2", 2),
                                    scaleKernel("k_x5", 5)};
  CompileStats stats;
  llvm::Expected<std::vector<CompiledKernel>> par = compileAll(srcs, t, {}, c, /*jobs=*/2, &stats);
  ASSERT_TRUE(bool(par)) << llvm::toString(par.takeError());
  ASSERT_EQ(par->size(), srcs.size());
  EXPECT_EQ(stats.kernels, 3u) << "the duplicate k_x2 is compiled once";
  EXPECT_EQ(stats.misses, 3u);
  EXPECT_EQ(stats.hits, 0u);
  EXPECT_EQ(stats.workers, 2u);
  EXPECT_GT(stats.seconds, 0.0);
  for (size_t i = 0; i < srcs.size(); ++i) {
    SCOPED_TRACE(srcs[i].name);
    llvm::Expected<CompiledKernel> serial = compileKernel(srcs[i], t);
    ASSERT_TRUE(bool(serial)) << llvm::toString(serial.takeError());
    expectSameKernel((*par)[i], *serial);
  }

  uint64_t before = nvrtcCompileCount();
  llvm::Expected<std::vector<CompiledKernel>> again = compileAll(srcs, t, {}, c, 2, &stats);
  ASSERT_TRUE(bool(again)) << llvm::toString(again.takeError());
  EXPECT_EQ(stats.hits, 3u);
  EXPECT_EQ(stats.misses, 0u);
  EXPECT_EQ(stats.workers, 0u);
  EXPECT_EQ(nvrtcCompileCount(), before);
  for (size_t i = 0; i < srcs.size(); ++i) expectSameKernel((*again)[i], (*par)[i]);
}

// Workers report each kernel as it finishes (minferc's progress) with its own compile time (--time-passes).
TEST_F(KernelCacheTest, CompileAllReportsEachKernelItCompiles) {
  KernelCache c = cache();
  Target t = target("sm_89");
  std::vector<KernelSource> srcs = {scaleKernel("p_x2", 2), scaleKernel("p_x3", 3), scaleKernel("p_x5", 5)};
  for (unsigned jobs : {2u, 1u}) {
    SCOPED_TRACE(jobs == 1 ? "in-process" : "in workers");
    std::vector<CompileProgress> seen;
    CompileStats stats;
    KernelCache fresh = jobs == 1 ? KernelCache::openAt(root + "/serial") : c;
    auto r = compileAll(srcs, t, {}, fresh, jobs, &stats, [&](const CompileProgress &p) { seen.push_back(p); });
    ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
    ASSERT_EQ(seen.size(), 3u);
    std::set<std::string> names;
    for (size_t i = 0; i < seen.size(); ++i) {
      EXPECT_EQ(seen[i].done, i + 1);
      EXPECT_EQ(seen[i].total, 3u);
      EXPECT_GT(seen[i].ms, 0.0);
      EXPECT_FALSE(seen[i].hit);
      names.insert(seen[i].name);
    }
    EXPECT_EQ(names, (std::set<std::string>{"p_x2", "p_x3", "p_x5"}));
    ASSERT_EQ(stats.compiled.size(), 3u);
    for (const KernelCompileTime &k : stats.compiled) EXPECT_GT(k.ms, 0.0) << k.name;
    EXPECT_GE(stats.lookupSeconds, 0.0);
  }
  // Everything cached: nothing compiled, nothing reported.
  std::vector<CompileProgress> seen;
  CompileStats stats;
  auto r = compileAll(srcs, t, {}, c, 2, &stats, [&](const CompileProgress &p) { seen.push_back(p); });
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  EXPECT_TRUE(seen.empty());
  EXPECT_TRUE(stats.compiled.empty());
  EXPECT_EQ(stats.hits, 3u);
}

TEST_F(KernelCacheTest, CompileAllReportsWorkerErrorsAndNameClashes) {
  KernelCache c = cache();
  Target t = target("sm_80");
  KernelSource broken{"broken_in_worker", "template <int N> __global__ void b(float *p) { p[0] = nope_7; }\n",
                      "b<1>", {}};
  CompileOptions opts;
  opts.dumpDir = root + "/dumps";
  llvm::Expected<std::vector<CompiledKernel>> r = compileAll({scaleKernel("fine"), broken}, t, opts, c, 2);
  ASSERT_FALSE(bool(r));
  std::string msg = llvm::toString(r.takeError());
  EXPECT_NE(msg.find("broken_in_worker"), std::string::npos) << msg;
  EXPECT_NE(msg.find("nope_7"), std::string::npos) << msg;
  bool hit = false;
  get(c, scaleKernel("fine"), t, &hit);
  EXPECT_TRUE(hit) << "the good kernel of the batch was still published";

  KernelSource clash = scaleKernel("fine", 9);
  r = compileAll({scaleKernel("fine"), clash}, t, {}, c, 2);
  ASSERT_FALSE(bool(r));
  msg = llvm::toString(r.takeError());
  EXPECT_NE(msg.find("'fine'"), std::string::npos) << msg;
}

TEST_F(KernelCacheTest, CompileAllSerialWithoutCache) {
  test::writeFile(root + "/file", "x");
  KernelCache c = KernelCache::openAt(root + "/file/cache"); // unusable: in-process, uncached
  testing::internal::CaptureStderr();
  CompileStats stats;
  llvm::Expected<std::vector<CompiledKernel>> r =
      compileAll({scaleKernel("s_a", 2), scaleKernel("s_b", 4)}, target("sm_80"), {}, c, 4, &stats);
  testing::internal::GetCapturedStderr();
  ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
  EXPECT_EQ((*r)[0].loweredName, "_Z5scaleILi2EEvPf");
  EXPECT_EQ((*r)[1].loweredName, "_Z5scaleILi4EEvPf");
  EXPECT_EQ(stats.workers, 0u);
  EXPECT_EQ(stats.misses, 2u);
}
