// ir/Printer.h — writes a Module as IR text that parses back to the same module.
#pragma once

#include "ir/Module.h"

#include "llvm/Support/raw_ostream.h"

#include <string>

namespace minfer::ir {

void printModule(const Module &, llvm::raw_ostream &);
std::string printModule(const Module &);
// A float as the shortest text that reads back to the same double, always with a '.' or an exponent.
std::string formatFloat(double);

} // namespace minfer::ir
