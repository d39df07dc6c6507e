// ir/Diagnostics.cpp — formatting of located errors.
#include "ir/Diagnostics.h"

#include "llvm/Support/raw_ostream.h"

namespace minfer::ir {

char DiagnosticError::ID = 0;

llvm::Error diagnosticAt(const llvm::SourceMgr &sm, llvm::SMLoc loc, const llvm::Twine &msg,
                         llvm::SMLoc noteLoc, const llvm::Twine &note) {
  std::string text;
  llvm::raw_string_ostream os(text);
  sm.PrintMessage(os, loc, llvm::SourceMgr::DK_Error, msg, {}, {}, /*ShowColors=*/false);
  if (noteLoc.isValid())
    sm.PrintMessage(os, noteLoc, llvm::SourceMgr::DK_Note, note, {}, {}, /*ShowColors=*/false);
  os.flush();
  return llvm::make_error<DiagnosticError>(std::move(text));
}

std::string renderError(llvm::Error err) {
  std::string out;
  llvm::handleAllErrors(
      std::move(err), [&](const DiagnosticError &d) { out += d.formatted(); },
      [&](const llvm::ErrorInfoBase &e) { out += "error: " + e.message(); });
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out + "\n";
}

llvm::Error makeError(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

} // namespace minfer::ir
