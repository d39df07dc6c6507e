// tests/common/TestFiles.h — scratch files for tests: a unique temporary directory removed at the end of
// its scope, whole-file reads and writes, an environment variable set for one scope, and a tiny NVRTC
// kernel for the compile and cache tests.
#pragma once

#include "jit/Nvrtc.h"
#include "jit/Target.h"

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
inline testing::AssertionResult failsMentioning(llvm::Error e, std::initializer_list<llvm::StringRef> parts) {
  if (!e) return testing::AssertionFailure() << "expected an error, got success";
  std::string msg = llvm::toString(std::move(e));
  for (llvm::StringRef p : parts)
    if (!llvm::StringRef(msg).contains(p))
      return testing::AssertionFailure() << "error message\n    " << msg << "\ndoes not mention '" << p.str() << "'";
  return testing::AssertionSuccess() << msg;
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
