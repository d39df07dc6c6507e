// Npy.h — float32 arrays in NumPy's .npy format.
//
// minfer writes intermediate activations and reads reference tensors as .npy so they can be compared
// with numpy / PyTorch side by side (np.load / np.save) without any extra tooling. Only what that needs
// is supported: little-endian float32 ('<f4'), C order, any rank including 0-d.
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <vector>

namespace minfer {

struct NpyArray {
  std::vector<int64_t> shape; // [] for a 0-d array (one element)
  std::vector<float> data;    // C (row-major) order, product(shape) elements
};

/// Writes NPY format 1.0, dtype '<f4', C order, to `os`; the header is padded with spaces so the data starts
/// at a multiple of 64 bytes. `data` must hold exactly product(shape) floats: otherwise the error names
/// `path` (the file `os` goes to; only named) and nothing is written. Files are written through
/// writeAtomically (jit/AtomicFile.h), so a failure never leaves a partial file.
llvm::Error writeNpyF32(llvm::raw_ostream &os, llvm::StringRef path, llvm::ArrayRef<int64_t> shape,
                        llvm::ArrayRef<float> data);

/// Reads a '<f4', C-order .npy file (format versions 1.0, 2.0, 3.0). Validates the magic, version,
/// header dict (exactly descr, fortran_order, shape) and that the data is exactly product(shape) floats.
llvm::Expected<NpyArray> readNpyF32(llvm::StringRef path);

} // namespace minfer
