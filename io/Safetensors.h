// Safetensors.h — reading and writing Hugging Face safetensors checkpoints.
//
// A .safetensors file is: an 8-byte little-endian header length N, N bytes of JSON describing each
// tensor (dtype, shape, byte range within the data section) plus optional string metadata, then the
// data section. minfer maps the file read-only and hands out views into it; every number read from the
// file is validated at open so later code can index the data without further checks. A checkpoint is
// either one such file or several shards listed by a model.safetensors.index.json.
//
// Every failure is an llvm::Error naming the file (and the tensor where one is involved).
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace minfer {

/// Element types a safetensors header may name (the spelling is the header's "dtype" string).
enum class StDType { BOOL, U8, I8, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64, F8_E4M3, F8_E5M2 };

llvm::StringRef stDTypeName(StDType dtype);                // "BF16", "F32", ...
std::optional<StDType> parseStDType(llvm::StringRef name); // exact spelling, no fuzzy matching
size_t stDTypeSize(StDType dtype);                         // bytes per element

/// One tensor's entry in a safetensors header.
struct TensorInfo {
  std::string name;
  StDType dtype = StDType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0; // byte offsets within the data section, [begin, end)
  int64_t numel() const;       // product of shape; 1 for a scalar (shape [])
};

/// One memory-mapped .safetensors file whose header was fully validated at open: the tensors tile the
/// data section exactly, in offset order, and each byte range matches its shape and dtype.
class SafetensorsFile {
public:
  static llvm::Expected<std::unique_ptr<SafetensorsFile>> open(llvm::StringRef path);

  llvm::StringRef path() const { return Path; }
  llvm::ArrayRef<TensorInfo> tensors() const { return Tensors; } // sorted by begin offset
  const TensorInfo *find(llvm::StringRef name) const;            // nullptr if absent
  /// The tensor's raw little-endian bytes, mapped from the file. `info` must come from this file
  /// (from tensors() or find()); anything else yields an empty range.
  llvm::ArrayRef<uint8_t> bytes(const TensorInfo &info) const;
  /// The whole file as mapped: a view from bytes() starts `view.data() - mapped().data()` bytes into the
  /// file, so a reader may fetch the same bytes with pread rather than through the mapping.
  llvm::ArrayRef<uint8_t> mapped() const {
    return {reinterpret_cast<const uint8_t *>(Buffer->getBufferStart()), Buffer->getBufferSize()};
  }
  /// The header's "__metadata__" map (empty when the header has none).
  const std::map<std::string, std::string> &metadata() const { return Metadata; }

private:
  SafetensorsFile() = default;
  std::string Path;
  std::unique_ptr<llvm::MemoryBuffer> Buffer;
  llvm::ArrayRef<uint8_t> Data; // the data section, after the header
  std::vector<TensorInfo> Tensors;
  llvm::StringMap<size_t> ByName; // name -> index into Tensors
  std::map<std::string, std::string> Metadata;
};

/// A model checkpoint: one .safetensors file, or the shards listed by a model.safetensors.index.json.
/// open() accepts either file, or a directory holding one of them; in a directory the index is preferred
/// when both exist. Each shard is opened once; every tensor the index maps is checked to exist in its
/// shard. Shard names must be plain file names in the index's directory.
class Checkpoint {
public:
  static llvm::Expected<Checkpoint> open(llvm::StringRef path);

  struct Ref {
    const SafetensorsFile *file;
    const TensorInfo *info;
  };
  std::optional<Ref> find(llvm::StringRef name) const;
  std::vector<std::string> names() const; // sorted
  llvm::StringRef path() const { return Path; }
  /// The opened files (one, or one per shard in first-use order).
  std::vector<const SafetensorsFile *> files() const;

private:
  std::string Path;
  std::vector<std::unique_ptr<SafetensorsFile>> Files;
  llvm::StringMap<Ref> ByName;
};

/// Converts a BF16, F16 or F32 tensor to float32 (exactly: both half formats are subsets of float).
/// Any other dtype is an error naming the file, the tensor and the dtype.
llvm::Expected<std::vector<float>> readAsFloat32(const SafetensorsFile &file, const TensorInfo &info);
/// Reads an I32 or I64 tensor (e.g. token ids in reference fixtures) as int64; other dtypes are an error.
llvm::Expected<std::vector<int64_t>> readAsInt64(const SafetensorsFile &file, const TensorInfo &info);

// Scalar conversions. bf16 is the top half of a float32; f16 is IEEE binary16 (5-bit exponent, 10-bit
// mantissa, subnormals down to 2^-24). float -> half rounds to nearest, ties to even, overflows to inf,
// and keeps NaN a NaN with its sign. The bf16 ones are inline: loaders call them once an element.
inline float bf16ToFloat(uint16_t bits) { return std::bit_cast<float>(uint32_t(bits) << 16); }
inline uint16_t floatToBf16(float value) {
  uint32_t u = std::bit_cast<uint32_t>(value);
  if (std::isnan(value)) return uint16_t((u >> 16) | 0x0040); // set the quiet bit so a low-payload NaN stays a NaN
  // Round to nearest even: add just under half an ulp, plus one more when the kept lsb is odd.
  return uint16_t((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
float f16ToFloat(uint16_t bits);
uint16_t floatToF16(float value);

/// A tensor to write: `data` is the raw little-endian bytes, numel × dtype size of them.
struct OwnedTensor {
  std::string name;
  StDType dtype = StDType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

/// Writes a .safetensors file's bytes to `os`, the tensors in the given order (header padded to 8 bytes).
/// Validates the tensors first (unique non-empty names, non-negative dims, data size): an invalid one is an
/// error naming `path` (the file `os` goes to; only named) and nothing is written. Files are written through
/// writeAtomically (jit/AtomicFile.h), so a failure never leaves a partial file.
llvm::Error writeSafetensors(llvm::raw_ostream &os, llvm::StringRef path, llvm::ArrayRef<OwnedTensor> tensors,
                             const std::map<std::string, std::string> &metadata = {});

} // namespace minfer
