// compiler/kernels/Epilogue.h — which epilogue a matmul kernel applies to its accumulators, shared by the
// gemm and gemv kernel families. The set is defined once, in Epilogue.def; templates/epilogue.cuh holds
// the matching policy types.
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace minfer {

enum class Epilogue {
#define EPILOGUE(Id, suffix, policy, bias, activation, residual) Id,
#include "compiler/kernels/Epilogue.def"
};

struct EpilogueInfo {
  Epilogue id;
  llvm::StringRef suffix;     // in spec names: gemm_..._epi_bias_gelu_tanh
  llvm::StringRef policy;     // the template argument: minfer::EpiBiasGeluTanh
  bool bias;                  // reads EpiParams::bias [N]
  llvm::StringRef activation; // "none" or the IR mnemonic of the pointwise op applied after the bias
  bool residual;              // adds EpiParams::residual [M, N] last
};

const EpilogueInfo &epilogueInfo(Epilogue e);
llvm::ArrayRef<EpilogueInfo> allEpilogues();
// The epilogue with this suffix ("bias_residual"); an error listing the valid ones otherwise.
llvm::Expected<Epilogue> parseEpilogue(llvm::StringRef suffix);
// The epilogue that adds a bias (or not), applies `activation` ("none", "gelu_tanh", ...) and adds a
// residual (or not); an error when no policy does exactly that.
llvm::Expected<Epilogue> findEpilogue(bool bias, llvm::StringRef activation, bool residual);

} // namespace minfer
