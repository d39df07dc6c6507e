// io/WeightLoader.h — binds a module's weight declarations to a safetensors checkpoint.
//
// Every declared weight (each layer of a per-layer one) must be in the checkpoint with the declared
// dtype and shape (the reversed shape for a `transpose` weight); anything else is an error naming the
// tensor, the weight, what was expected and what was found.
#pragma once

#include "io/Safetensors.h"
#include "ir/Interpreter.h"
#include "ir/Module.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"

#include <vector>

namespace minfer {

llvm::Error checkWeights(const ir::Module &, const Checkpoint &);

// checkWeights, then every tensor converted to fp32 in the IR's logical layout, for the interpreter.
llvm::Expected<ir::WeightSet> loadWeightsF32(const ir::Module &, const Checkpoint &);
// Layer `layer` of one unpacked weight converted to fp32 in the IR's logical layout (an RMS norm's gamma that
// the engine multiplies into a matmul weight; each tensor of loadWeightsF32).
llvm::Expected<std::vector<float>> loadWeightF32(const ir::Module &, const Checkpoint &, int weight, int64_t layer);

// Layer `layer` of weight `weight` (an index into Module::weights) as the kernels read it: element type
// `dtype` (bf16, f16 or f32) in the IR's logical layout ([out, in] for a `transpose` weight stored [in, out]).
// The bytes go to `sink(bytes, offset)` in order, at most about `chunkBytes` at a time, so a caller streaming
// them to the GPU never holds a whole tensor: a tensor stored as it is read is handed out as views of the
// mapped file; a converted or transposed one through one chunk-sized buffer (whole output rows per chunk).
// A packed weight streams its parts' rows stacked. `rowOrder`, when given, lists for each output row the
// logical row stored there (a fused epilogue's layout, Plan.h rowOrder); rows of a vector are its elements.
// `scratch`, when given, is the chunk buffer, kept between calls: a loader streaming many weights then
// touches fresh memory once rather than once a weight (page faults that held loading to ~2 GB/s).
// `columnGains`, when given (one per column), multiplies each column, in fp32, before the one rounding to
// `dtype`: an RMS norm's gamma carried into the matmul weight that reads the norm (compiler/Plan.h
// PlanBuffer::gains).
llvm::Error streamWeight(const ir::Module &, const Checkpoint &, int weight, int64_t layer, ir::DType dtype,
                         size_t chunkBytes,
                         llvm::function_ref<llvm::Error(llvm::ArrayRef<uint8_t> bytes, size_t offset)> sink,
                         llvm::ArrayRef<int64_t> rowOrder = {}, std::vector<uint8_t> *scratch = nullptr,
                         llvm::ArrayRef<float> columnGains = {});

// The checkpoint tensors behind layer `layer` of weight `weight`, as stored: the weight itself, or a packed
// weight's parts in the order they stack. A loader that can lay the rows out and convert the dtype itself
// (the GPU engine) streams these views rather than streamWeight's converted rows.
struct StoredPart {
  llvm::ArrayRef<uint8_t> bytes; // a view of the mapped file
  ir::DType dtype;
  bool transposed;
};
llvm::Expected<std::vector<StoredPart>> storedParts(const ir::Module &, const Checkpoint &, int weight, int64_t layer);

// `n` f16 values at `src` to bf16 at `dst` (unaligned, little-endian; `dst` may be `src`, converting in
// place), rounded to nearest even, NaNs kept NaNs: what floatToBf16(f16ToFloat(x)) gives, vectorised where
// the CPU allows.
void convertF16ToBf16(const uint8_t *src, uint8_t *dst, size_t n);

} // namespace minfer
