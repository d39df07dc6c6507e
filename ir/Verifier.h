// ir/Verifier.h — checks a Module against the op table's rules: every shape, dtype and head-count
// relation, reported at the offending op's location.
#pragma once

#include "ir/Module.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"

namespace minfer::ir {

llvm::Error verifyModule(const Module &);

// The result types an op must have given its operands and attributes (shape inference); an error when
// the operands break the op's rules. Used by the verifier and by passes that build new ops.
llvm::Expected<llvm::SmallVector<Type, 1>> inferResultTypes(const Module &, const Op &);

} // namespace minfer::ir
