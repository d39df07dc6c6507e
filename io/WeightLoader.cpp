// io/WeightLoader.cpp — checks and reads the tensors behind a module's weights.
#include "io/WeightLoader.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/ThreadPool.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#ifdef __linux__
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace minfer {
namespace {

StDType storedDType(ir::DType t) {
  switch (t) {
  case ir::DType::BF16: return StDType::BF16;
  case ir::DType::F16: return StDType::F16;
  case ir::DType::F32: return StDType::F32;
  case ir::DType::I32: return StDType::I32;
  }
  return StDType::F32;
}

std::string shapeList(llvm::ArrayRef<int64_t> s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// The tensor behind layer `layer` of weight `w`, checked.
llvm::Expected<Checkpoint::Ref> lookup(const ir::WeightDecl &w, int64_t layer, const Checkpoint &ckpt) {
  std::string name = w.tensorName(layer);
  std::string what = "tensor '" + name + "' (weight @" + w.name + (w.perLayer() ? ", layer " + std::to_string(layer) : "") + ")";
  auto fail = [&](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), ckpt.path() + ": " + what + " " + msg);
  };
  auto ref = ckpt.find(name);
  if (!ref) return fail("is missing");
  StDType want = storedDType(w.type.dtype);
  if (ref->info->dtype != want)
    return fail("has dtype " + stDTypeName(ref->info->dtype) + ", expected " + stDTypeName(want));
  std::vector<int64_t> expect;
  for (const ir::Dim &d : w.type.shape) expect.push_back(d.value);
  if (w.transposed) std::reverse(expect.begin(), expect.end());
  if (ref->info->shape != expect)
    return fail("has shape " + shapeList(ref->info->shape) + ", expected " + shapeList(expect) +
                (w.transposed ? " (stored [in, out], transposed at load)" : ""));
  return *ref;
}

} // namespace

llvm::Error checkWeights(const ir::Module &m, const Checkpoint &ckpt) {
  std::vector<int64_t> counts = m.weightLayerCounts();
  for (size_t i = 0; i < m.weights.size(); ++i)
    for (int64_t l = 0; l < counts[i] && !m.weights[i].packed(); ++l)
      if (auto ref = lookup(m.weights[i], l, ckpt); !ref) return ref.takeError();
  return llvm::Error::success();
}

llvm::Expected<ir::WeightSet> loadWeightsF32(const ir::Module &m, const Checkpoint &ckpt) {
  if (auto e = checkWeights(m, ckpt)) return e;
  std::vector<int64_t> counts = m.weightLayerCounts();
  ir::WeightSet set;
  set.byDecl.resize(m.weights.size());
  for (size_t i = 0; i < m.weights.size(); ++i) {
    const ir::WeightDecl &w = m.weights[i];
    for (int64_t l = 0; l < counts[i] && !w.packed(); ++l) { // packed: the interpreter stacks the parts
      auto data = loadWeightF32(m, ckpt, static_cast<int>(i), l);
      if (!data) return data.takeError();
      ir::Tensor t;
      for (const ir::Dim &d : w.type.shape) t.shape.push_back(d.value);
      t.data = std::move(*data);
      set.byDecl[i].push_back(std::move(t));
    }
  }
  return set;
}

llvm::Expected<std::vector<float>> loadWeightF32(const ir::Module &m, const Checkpoint &ckpt, int weight,
                                                 int64_t layer) {
  const ir::WeightDecl &w = m.weights[static_cast<size_t>(weight)];
  if (w.packed())
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "weight @" + w.name + ": a packed weight is its parts, read each");
  auto ref = lookup(w, layer, ckpt);
  if (!ref) return ref.takeError();
  auto data = readAsFloat32(*ref->file, *ref->info);
  if (!data) return data.takeError();
  if (!w.transposed) return data;
  // Stored [in, out]; the IR wants [out, in].
  const int64_t rows = w.type.shape[0].value, cols = w.type.shape[1].value;
  std::vector<float> t(data->size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t[r * cols + c] = (*data)[c * rows + r];
  return t;
}

namespace {

float loadElement(const uint8_t *p, ir::DType t) {
  uint16_t h;
  float f;
  switch (t) {
  case ir::DType::BF16: std::memcpy(&h, p, 2); return bf16ToFloat(h);
  case ir::DType::F16: std::memcpy(&h, p, 2); return f16ToFloat(h);
  default: std::memcpy(&f, p, 4); return f;
  }
}

void storeElement(uint8_t *p, ir::DType t, float v) {
  uint16_t h;
  switch (t) {
  case ir::DType::BF16: h = floatToBf16(v); std::memcpy(p, &h, 2); return;
  case ir::DType::F16: h = floatToF16(v); std::memcpy(p, &h, 2); return;
  default: std::memcpy(p, &v, 4); return;
  }
}

// Maps a slice of a mapped checkpoint's pages in one call (MADV_POPULATE_READ, Linux 5.14+) instead of one
// page fault at a time as a reordered weight's rows (a fused epilogue's row order) are read out of order.
// Where the kernel does not know the advice, MADV_WILLNEED starts reading ahead instead. Advice only:
// failures are ignored.
constexpr size_t kPrefaultSlice = 16u << 20;
void prefault(llvm::ArrayRef<uint8_t> bytes) {
#ifdef __linux__
  if (bytes.empty()) return;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  uintptr_t begin = reinterpret_cast<uintptr_t>(bytes.data()) & ~(page - 1);
  uintptr_t end = reinterpret_cast<uintptr_t>(bytes.data() + bytes.size());
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
  if (madvise(reinterpret_cast<void *>(begin), end - begin, MADV_POPULATE_READ) != 0)
    (void)madvise(reinterpret_cast<void *>(begin), end - begin, MADV_WILLNEED);
#else
  (void)bytes;
#endif
}

} // namespace

// f16 -> bf16, 8 at a time with F16C/AVX2 where the CPU has them (the checkpoints of Llama-2 and others are
// f16; the kernels read bf16): the scalar path converts ~80 M elements a second a thread, which held
// Llama-2-7B's loading to 2.5 GB/s. Rounding and NaNs as floatToBf16.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("avx2,f16c"))) static void f16ToBf16Avx2(const uint8_t *src, uint8_t *dst, size_t n) {
  size_t i = 0;
  const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7FFF), quiet = _mm256_set1_epi32(0x0040);
  for (; i + 8 <= n; i += 8) {
    __m256 f = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(src + 2 * i)));
    __m256i u = _mm256_castps_si256(f);
    __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(bias, _mm256_and_si256(_mm256_srli_epi32(u, 16), one))), 16);
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q));
    __m256i quieted = _mm256_or_si256(_mm256_srli_epi32(u, 16), quiet);
    __m256i r = _mm256_blendv_epi8(rounded, quieted, nan);
    // 8 x 32-bit -> 8 x 16-bit (the values fit: pack without saturation surprises by masking first).
    r = _mm256_and_si256(r, _mm256_set1_epi32(0xFFFF));
    __m128i lo = _mm256_castsi256_si128(r), hi = _mm256_extracti128_si256(r, 1);
    _mm_storeu_si128(reinterpret_cast<__m128i *>(dst + 2 * i), _mm_packus_epi32(lo, hi));
  }
  for (; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    uint16_t b = floatToBf16(f16ToFloat(h));
    std::memcpy(dst + 2 * i, &b, 2);
  }
}
#endif

void convertF16ToBf16(const uint8_t *src, uint8_t *dst, size_t n) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static const bool fast = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  if (fast) return f16ToBf16Avx2(src, dst, n);
#endif
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    uint16_t b = floatToBf16(f16ToFloat(h));
    std::memcpy(dst + 2 * i, &b, 2);
  }
}

llvm::Expected<std::vector<StoredPart>> storedParts(const ir::Module &m, const Checkpoint &ckpt, int weight,
                                                    int64_t layer) {
  const ir::WeightDecl &w = m.weights[static_cast<size_t>(weight)];
  std::vector<StoredPart> parts;
  for (int p : w.packed() ? w.parts : std::vector<int>{weight}) {
    const ir::WeightDecl &d = m.weights[static_cast<size_t>(p)];
    auto ref = lookup(d, layer, ckpt);
    if (!ref) return ref.takeError();
    if (d.type.dtype == ir::DType::I32) // as streamWeight: the kernels read floating-point weights only
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "weight @" + d.name + ": only bf16, f16 and f32 weights can be loaded");
    parts.push_back(StoredPart{ref->file->bytes(*ref->info), d.type.dtype, d.transposed});
  }
  return parts;
}

llvm::Error streamWeight(const ir::Module &m, const Checkpoint &ckpt, int weight, int64_t layer, ir::DType dtype,
                         size_t chunkBytes,
                         llvm::function_ref<llvm::Error(llvm::ArrayRef<uint8_t> bytes, size_t offset)> sink,
                         llvm::ArrayRef<int64_t> rowOrder, std::vector<uint8_t> *scratch,
                         llvm::ArrayRef<float> columnGains) {
  const ir::WeightDecl &w = m.weights[weight];
  // The checkpoint tensors behind it: itself, or a packed weight's parts, stacked.
  struct Part {
    const ir::WeightDecl *decl;
    llvm::ArrayRef<uint8_t> src;
    int64_t firstRow, rows;
  };
  if (dtype == ir::DType::I32)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "weight @" + w.name + ": only bf16, f16 and f32 weights can be loaded");
  auto stored = storedParts(m, ckpt, weight, layer);
  if (!stored) return stored.takeError();
  std::vector<Part> parts;
  int64_t totalRows = 0;
  size_t next = 0;
  for (int p : w.packed() ? w.parts : std::vector<int>{weight}) {
    const ir::WeightDecl &d = m.weights[static_cast<size_t>(p)];
    int64_t rows = d.type.shape[0].value;
    parts.push_back(Part{&d, (*stored)[next++].bytes, totalRows, rows});
    totalRows += rows;
  }
  chunkBytes = std::max<size_t>(chunkBytes, 1);
  int64_t cols = w.type.rank() == 2 ? w.type.shape[1].value : 1;
  if (!columnGains.empty() && static_cast<int64_t>(columnGains.size()) != cols)
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "weight @" + w.name + ": " +
                                       llvm::Twine(columnGains.size()) + " column gains for " + llvm::Twine(cols) +
                                       " columns");
  bool asStored = rowOrder.empty() && columnGains.empty() && llvm::all_of(parts, [&](const Part &p) {
                    return p.decl->type.dtype == dtype && !p.decl->transposed;
                  });
  if (asStored) { // views of the mapped files, part after part
    size_t base = 0;
    for (const Part &p : parts) {
      for (size_t off = 0; off < p.src.size(); off += chunkBytes)
        if (auto e = sink(p.src.slice(off, std::min(chunkBytes, p.src.size() - off)), base + off)) return e;
      base += p.src.size();
    }
    return llvm::Error::success();
  }
  // Row by row: logical [rows, cols] (a vector is rows of one element), each output row converted from its
  // part's row (stored [cols, rows] when transposed), in the order rowOrder gives.
  if (!rowOrder.empty() && static_cast<int64_t>(rowOrder.size()) != totalRows)
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "weight @" + w.name + ": row order of " +
                                       llvm::Twine(rowOrder.size()) + " rows for " + llvm::Twine(totalRows));
  size_t outSize = ir::dtypeSize(dtype);
  int64_t rowsPerChunk = std::max<int64_t>(1, static_cast<int64_t>(chunkBytes / (cols * outSize)));
  std::vector<uint8_t> own;
  std::vector<uint8_t> &buf = scratch ? *scratch : own;
  size_t need = static_cast<size_t>(std::min(totalRows, rowsPerChunk) * cols) * outSize;
  if (buf.size() < need) buf.resize(need);
  auto convertRow = [&](int64_t r, int64_t r0) {
    int64_t logical = rowOrder.empty() ? r : rowOrder[static_cast<size_t>(r)];
    const Part *p = &parts[0];
    for (const Part &q : parts)
      if (logical >= q.firstRow) p = &q;
    int64_t src = logical - p->firstRow;
    const ir::WeightDecl &d = *p->decl;
    size_t inSize = ir::dtypeSize(d.type.dtype);
    uint8_t *out = &buf[static_cast<size_t>((r - r0) * cols) * outSize];
    if (!columnGains.empty()) {
      if (d.type.dtype == ir::DType::BF16 && dtype == ir::DType::BF16 && !d.transposed) { // the usual case, inlined
        const uint8_t *in = &p->src[static_cast<size_t>(src * cols) * 2];
        for (int64_t c = 0; c < cols; ++c) {
          uint16_t h;
          std::memcpy(&h, in + 2 * c, 2);
          const uint16_t b = floatToBf16(bf16ToFloat(h) * columnGains[static_cast<size_t>(c)]);
          std::memcpy(out + 2 * c, &b, 2);
        }
        return;
      }
      for (int64_t c = 0; c < cols; ++c) {
        int64_t from = d.transposed ? c * p->rows + src : src * cols + c;
        float v = loadElement(&p->src[static_cast<size_t>(from) * inSize], d.type.dtype);
        storeElement(out + static_cast<size_t>(c) * outSize, dtype, v * columnGains[static_cast<size_t>(c)]);
      }
      return;
    }
    if (d.type.dtype == dtype && !d.transposed) {
      std::memcpy(out, &p->src[static_cast<size_t>(src * cols) * inSize], static_cast<size_t>(cols) * inSize);
      return;
    }
    if (d.type.dtype == ir::DType::F16 && dtype == ir::DType::BF16 && !d.transposed) {
      convertF16ToBf16(&p->src[static_cast<size_t>(src * cols) * inSize], out, static_cast<size_t>(cols));
      return;
    }
    for (int64_t c = 0; c < cols; ++c) {
      int64_t from = d.transposed ? c * p->rows + src : src * cols + c;
      storeElement(out + static_cast<size_t>(c) * outSize, dtype, loadElement(&p->src[static_cast<size_t>(from) * inSize], d.type.dtype));
    }
  };
  // Conversion runs at ~200 M elements a second a core (Llama-2-7B's f16 matmul weights took 34 s on one),
  // so a chunk's rows are split over up to 16 threads (the pool starts them on first use).
  llvm::ThreadPoolStrategy upTo16 = llvm::hardware_concurrency(16);
  upTo16.Limit = true; // fewer on a machine with fewer hardware threads
  llvm::ThreadPool pool(upTo16);
  const unsigned threads = pool.getThreadCount();
  // The rows are read out of order: map the parts' pages first, a slice a thread.
  for (const Part &p : parts)
    for (size_t off = 0; off < p.src.size(); off += kPrefaultSlice)
      pool.async([src = p.src, off] { prefault(src.slice(off, std::min(kPrefaultSlice, src.size() - off))); });
  pool.wait();
  for (int64_t r0 = 0; r0 < totalRows; r0 += rowsPerChunk) {
    int64_t n = std::min(rowsPerChunk, totalRows - r0);
    auto convertRows = [&](int64_t first, int64_t last) {
      for (int64_t r = first; r < last; ++r) convertRow(r, r0);
    };
    if (threads == 1 || n < 2 || n * cols < (int64_t(1) << 20)) {
      convertRows(r0, r0 + n);
    } else {
      int64_t per = llvm::divideCeil(n, threads);
      for (int64_t first = r0; first < r0 + n; first += per)
        pool.async(convertRows, first, std::min(first + per, r0 + n));
      pool.wait();
    }
    size_t bytes = static_cast<size_t>(n * cols) * outSize;
    if (auto e = sink(llvm::ArrayRef<uint8_t>(buf.data(), bytes), static_cast<size_t>(r0 * cols) * outSize)) return e;
  }
  return llvm::Error::success();
}

} // namespace minfer
