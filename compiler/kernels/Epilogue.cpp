// compiler/kernels/Epilogue.cpp — the epilogue table (Epilogue.def) as data.
#include "compiler/kernels/Epilogue.h"

#include "llvm/ADT/StringExtras.h"

#include <string>
#include <vector>

namespace minfer {

llvm::ArrayRef<EpilogueInfo> allEpilogues() {
  static const EpilogueInfo table[] = {
#define EPILOGUE(Id, suffix, policy, bias, activation, residual)                                             \
  {Epilogue::Id, suffix, policy, bias, activation, residual},
#include "compiler/kernels/Epilogue.def"
  };
  return table;
}

const EpilogueInfo &epilogueInfo(Epilogue e) { return allEpilogues()[static_cast<size_t>(e)]; }

llvm::Expected<Epilogue> parseEpilogue(llvm::StringRef suffix) {
  std::vector<std::string> names;
  for (const EpilogueInfo &info : allEpilogues()) {
    if (info.suffix == suffix) return info.id;
    names.push_back(info.suffix.str());
  }
  return llvm::createStringError(llvm::inconvertibleErrorCode(), "unknown epilogue '%s'; expected one of %s",
                                 suffix.str().c_str(), llvm::join(names, ", ").c_str());
}

llvm::Expected<Epilogue> findEpilogue(bool bias, llvm::StringRef activation, bool residual) {
  for (const EpilogueInfo &info : allEpilogues())
    if (info.bias == bias && info.activation == activation && info.residual == residual) return info.id;
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "no matmul epilogue does bias=%s, activation=%s, residual=%s",
                                 bias ? "yes" : "no", activation.str().c_str(), residual ? "yes" : "no");
}

} // namespace minfer
