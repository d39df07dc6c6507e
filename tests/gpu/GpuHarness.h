// tests/gpu/GpuHarness.h — what every GPU kernel test needs: skip without a GPU (visibly), compile a
// KernelSpec for the device at hand, move bf16 tensors to and from the device, poison outputs, compare
// with the interpreter's op.
//
// A kernel test draws fresh random inputs (never zeros), rounds them to bf16 (so the reference sees
// exactly what the kernel sees), runs ir::evalOp on them in fp32, poisons the kernel's output buffer with
// 0xFF bytes (bf16 NaN), launches, and checks that no element is still NaN and that the relative error
// ‖gpu − ref‖ / ‖ref‖ is within bf16 tolerance.
#pragma once

#include "jit/Nvrtc.h"
#include "io/Safetensors.h"
#include "compiler/kernels/KernelSpec.h"
#include "ir/Interpreter.h"
#include "runtime/Driver.h"
#include "runtime/KernelLoader.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

namespace minfer::gputest {

// The minferc the end-to-end tests run: the build's (MINFERC_PATH), or, where the build directory was carried
// to another place (the GPU machine's copy of it), tools/minferc beside the directory of this test binary.
inline const std::string &minfercPath() {
  static const std::string path = [] {
    if (llvm::sys::fs::exists(MINFERC_PATH)) return std::string(MINFERC_PATH);
    const std::string self = llvm::sys::fs::getMainExecutable(nullptr, nullptr);
    llvm::SmallString<256> p(llvm::sys::path::parent_path(llvm::sys::path::parent_path(self)));
    llvm::sys::path::append(p, "tools", "minferc");
    return std::string(p);
  }();
  return path;
}

// bf16 outputs: one rounding (2^-9 relative) per element plus fp32 accumulation-order differences.
constexpr double kBf16Tolerance = 1e-2;

// Skips the calling test, with the reason in the output, when there is no usable GPU.
#define MINFER_REQUIRE_GPU()                                                                                 \
  do {                                                                                                       \
    std::string minferWhy;                                                                                   \
    if (!::minfer::cuda::available(&minferWhy)) GTEST_SKIP() << "no GPU, skipping: " << minferWhy;           \
  } while (0)

#define MINFER_ASSERT_OK(expr)                                                                               \
  do {                                                                                                       \
    if (llvm::Error minferErr = (expr)) FAIL() << llvm::toString(std::move(minferErr));                      \
  } while (0)

// `GPU_TRY(x, f());` in a TEST body: x is a reference to f()'s value, or the test fails with its error.
#define GPU_TRY(var, expr)                                                                                   \
  auto var##OrErr = (expr);                                                                                  \
  if (!var##OrErr) FAIL() << #expr << ": " << llvm::toString(var##OrErr.takeError());                       \
  auto &var = *var##OrErr

// Unwraps an Expected or fails the test: `auto x = MINFER_TRY_OR_FAIL(f());` inside a TEST body.
template <typename T> T takeOrFail(llvm::Expected<T> e, const char *what) {
  if (!e) {
    ADD_FAILURE() << what << ": " << llvm::toString(e.takeError());
    return T();
  }
  return std::move(*e);
}

using minfer::deviceTarget;
using GpuKernel = LoadedKernel;

// Compiles `spec` for the device (no cache: tests compile what they test) and loads it.
inline llvm::Expected<GpuKernel> buildKernel(const KernelSpec &spec) {
  auto target = deviceTarget();
  if (!target) return target.takeError();
  return loadKernel(spec, *target, /*cache=*/nullptr);
}

// Compiles a test's own kernel source (`entry` names its instantiation) for the device and loads it.
inline llvm::Expected<GpuKernel> buildSource(llvm::StringRef name, llvm::StringRef source, llvm::StringRef entry) {
  auto target = deviceTarget();
  if (!target) return target.takeError();
  return loadKernel(KernelSource{name.str(), source.str(), entry.str(), {}}, *target, /*cache=*/nullptr);
}

// Launches `kernel` (built from `spec`) over `rows` with its Params struct (compiler/kernels) and waits.
template <typename P>
llvm::Error run(const LoadedKernel &kernel, const KernelSpec &spec, int64_t rows, const P &params) {
  if (auto e = launchKernel(kernel.fn, spec, rows, params)) return e;
  return cuda::synchronize();
}

// Normal(mean, stddev) values rounded to bf16, so host reference and kernel see the same numbers.
inline ir::Tensor randomBf16(std::vector<int64_t> shape, std::mt19937 &rng, float mean = 0, float stddev = 1) {
  ir::Tensor t(std::move(shape));
  std::normal_distribution<float> d(mean, stddev);
  for (float &x : t.data) x = bf16ToFloat(floatToBf16(d(rng)));
  return t;
}

inline std::vector<uint16_t> toBf16(const ir::Tensor &t) {
  std::vector<uint16_t> out(t.data.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = floatToBf16(t.data[i]);
  return out;
}

inline llvm::Expected<cuda::DeviceBuffer> uploadBf16(const ir::Tensor &t) {
  std::vector<uint16_t> bits = toBf16(t);
  auto buf = cuda::DeviceBuffer::alloc(bits.size() * 2);
  if (!buf) return buf.takeError();
  if (auto e = buf->upload(bits.data(), bits.size() * 2)) return e;
  return buf;
}

template <typename T> llvm::Expected<cuda::DeviceBuffer> uploadVector(const std::vector<T> &v) {
  auto buf = cuda::DeviceBuffer::alloc(std::max<size_t>(1, v.size() * sizeof(T)));
  if (!buf) return buf.takeError();
  if (!v.empty())
    if (auto e = buf->upload(v.data(), v.size() * sizeof(T))) return e;
  return buf;
}

// A device buffer for `numel` bf16 values, poisoned with 0xFF bytes (NaN) so unwritten elements show.
inline llvm::Expected<cuda::DeviceBuffer> poisonedBf16(size_t numel) {
  auto buf = cuda::DeviceBuffer::alloc(numel * 2);
  if (!buf) return buf.takeError();
  if (auto e = buf->fill(0xFF)) return e;
  return buf;
}

inline llvm::Expected<ir::Tensor> downloadBf16(const cuda::DeviceBuffer &buf, std::vector<int64_t> shape) {
  ir::Tensor t(std::move(shape));
  std::vector<uint16_t> bits(t.data.size());
  if (auto e = buf.download(bits.data(), bits.size() * 2)) return e;
  for (size_t i = 0; i < bits.size(); ++i) t.data[i] = bf16ToFloat(bits[i]);
  return t;
}

// Counts elements still NaN (never written, or computed as NaN).
inline size_t countNaN(const ir::Tensor &t) {
  size_t n = 0;
  for (float x : t.data) n += std::isnan(x);
  return n;
}

inline double relError(const ir::Tensor &got, const ir::Tensor &ref) {
  if (got.data.size() != ref.data.size()) return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < got.data.size(); ++i) {
    double d = double(got.data[i]) - ref.data[i];
    num += d * d;
    den += double(ref.data[i]) * ref.data[i];
  }
  return std::sqrt(num / (den > 0 ? den : 1));
}

// Checks a kernel output against the reference: every element written, relative error in tolerance.
inline void expectMatches(const ir::Tensor &got, const ir::Tensor &ref, double tol = kBf16Tolerance,
                          const std::string &what = "") {
  EXPECT_EQ(got.shape, ref.shape) << what;
  EXPECT_EQ(countNaN(got), 0u) << what << ": elements left unwritten (still NaN poison) or NaN";
  double err = relError(got, ref);
  EXPECT_LT(err, tol) << what << ": relative error " << err;
}

} // namespace minfer::gputest
