// tests/common/TestFiles.h — scratch files for tests: a unique temporary directory removed at the end of
// its scope (and a fixture holding one per test), whole-file reads and writes, an environment variable set
// for one scope, and a tiny NVRTC kernel for the compile and cache tests.
#pragma once

#include "jit/AtomicFile.h"
#include "jit/Nvrtc.h"
#include "jit/Target.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

namespace minfer::test {

// Passes when `e` is an error whose message contains every one of `parts` (the message is shown either way).
inline testing::AssertionResult failsMentioning(llvm::Error e, llvm::ArrayRef<llvm::StringRef> parts) {
  if (!e) return testing::AssertionFailure() << "expected an error, got success";
  std::string msg = llvm::toString(std::move(e));
  for (llvm::StringRef p : parts)
    if (!llvm::StringRef(msg).contains(p))
      return testing::AssertionFailure() << "error message\n    " << msg << "\ndoes not mention '" << p.str() << "'";
  return testing::AssertionSuccess() << msg;
}
// The same for a value or an error: passes when `v` holds such an error.
template <typename T>
testing::AssertionResult failsMentioning(llvm::Expected<T> v, llvm::ArrayRef<llvm::StringRef> parts) {
  if (v) return testing::AssertionFailure() << "expected an error, got a value";
  return failsMentioning(v.takeError(), parts);
}

inline std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void writeFile(const std::string &path, llvm::StringRef bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A unique directory under the system temp dir, removed with everything in it when this goes away.
class TempDir {
public:
  explicit TempDir(llvm::StringRef prefix = "minfer-test") {
    llvm::SmallString<128> p;
    EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory(prefix, p));
    dir_ = std::string(p);
  }
  ~TempDir() { llvm::sys::fs::remove_directories(dir_); }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;

  const std::string &path() const { return dir_; }
  std::string file(llvm::StringRef name) const {
    llvm::SmallString<256> p(dir_);
    llvm::sys::path::append(p, name);
    return std::string(p);
  }
  // Writes `bytes` to the file `name` in this directory; its path.
  std::string write(llvm::StringRef name, llvm::StringRef bytes) const {
    writeFile(file(name), bytes);
    return file(name);
  }
  std::string read(llvm::StringRef name) const { return readFile(file(name)); }
  std::vector<std::string> list() const {
    std::vector<std::string> names;
    std::error_code ec;
    for (llvm::sys::fs::directory_iterator it(dir_, ec), end; it != end && !ec; it.increment(ec))
      names.push_back(llvm::sys::path::filename(it->path()).str());
    std::sort(names.begin(), names.end());
    return names;
  }

private:
  std::string dir_;
};

// A fixture with a unique temporary directory for each test, removed after it, for the tests of a file
// format's reader and writer. Files are named by their names in the directory.
class TempDirTest : public testing::Test {
protected:
  explicit TempDirTest(llvm::StringRef prefix) : tmp(prefix), Dir(tmp.path()) {}

  std::string path(llvm::StringRef name) const { return tmp.file(name); }
  // Writes the file `name` as minferc does: `serialise(os, path)` through the atomic writer.
  using Serialiser = llvm::function_ref<llvm::Error(llvm::raw_ostream &, llvm::StringRef path)>;
  llvm::Error saveWith(llvm::StringRef name, Serialiser serialise) const {
    std::string p = path(name);
    return writeAtomically(p, [&](llvm::raw_ostream &os) { return serialise(os, p); });
  }
  // Writes `bytes` as they are (a hand-made file); its path.
  std::string writeRaw(llvm::StringRef name, llvm::StringRef bytes) const { return tmp.write(name, bytes); }
  std::string readRaw(llvm::StringRef name) const { return tmp.read(name); }
  std::vector<std::string> listDir() const { return tmp.list(); }

  TempDir tmp;
  const std::string Dir;
};

// Sets (or, with nullopt, unsets) an environment variable for one scope.
class ScopedEnv {
public:
  ScopedEnv(const char *name, std::optional<std::string> value) : name_(name) {
    if (const char *old = std::getenv(name)) old_ = old;
    if (value) setenv(name, value->c_str(), 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv &) = delete;
  ScopedEnv &operator=(const ScopedEnv &) = delete;

private:
  const char *name_;
  std::optional<std::string> old_;
};

// A tiny template kernel; the entry instantiates it, as KernelSpec::entry() does for real templates.
inline KernelSource scaleKernel(const std::string &name, int factor = 3) {
  return {name, "template <int N> __global__ void scale(float *p) { p[threadIdx.x] *= N; }\n",
          "scale<" + std::to_string(factor) + ">", {}};
}

inline Target target(llvm::StringRef name) {
  llvm::Expected<Target> t = parseTarget(name);
  EXPECT_TRUE(bool(t)) << name.str();
  return t ? *t : Target{};
}

} // namespace minfer::test
