// compiler/WeightLoader.h — binds a module's weight declarations to a safetensors checkpoint.
//
// Every declared weight (each layer of a per-layer one) must be in the checkpoint with the declared
// dtype and shape (the reversed shape for a `transpose` weight); anything else is an error naming the
// tensor, the weight, what was expected and what was found.
#pragma once

#include "compiler/Safetensors.h"
#include "ir/Interpreter.h"
#include "ir/Module.h"

#include "llvm/Support/Error.h"

namespace minfer {

llvm::Error checkWeights(const ir::Module &, const Checkpoint &);

// checkWeights, then every tensor converted to fp32 in the IR's logical layout, for the interpreter.
llvm::Expected<ir::WeightSet> loadWeightsF32(const ir::Module &, const Checkpoint &);

} // namespace minfer
