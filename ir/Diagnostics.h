// ir/Diagnostics.h — errors that carry a source location, already formatted for a terminal.
//
// A DiagnosticError's message is the full `file:line:col: error: ...` text with the offending line and a
// caret (llvm::SourceMgr). Tools print it as it is; other errors they prefix with `<tool>: error: `.
#pragma once

#include "llvm/Support/Error.h"
#include "llvm/Support/SourceMgr.h"

#include <string>

namespace minfer::ir {

class DiagnosticError : public llvm::ErrorInfo<DiagnosticError> {
public:
  static char ID;
  explicit DiagnosticError(std::string formatted) : text(std::move(formatted)) {}
  void log(llvm::raw_ostream &os) const override { os << text; }
  std::error_code convertToErrorCode() const override { return llvm::inconvertibleErrorCode(); }
  const std::string &formatted() const { return text; }

private:
  std::string text;
};

// `msg` at `loc` in `sm`, formatted as a compiler diagnostic (no colours), optionally followed by a note.
llvm::Error diagnosticAt(const llvm::SourceMgr &sm, llvm::SMLoc loc, const llvm::Twine &msg,
                         llvm::SMLoc noteLoc = {}, const llvm::Twine &note = "");

// A plain error carrying `msg`: the one helper for errors without a source location (what the rooms above
// used to define locally as `fail`).
llvm::Error makeError(const llvm::Twine &msg);

// Renders any error for a terminal: a DiagnosticError as it is, anything else as `<tool>: error: msg`
// (`error: msg` without a tool), one line each when several are joined, with exactly one trailing newline,
// passed through clipMessage. Consumes the error.
std::string renderError(llvm::Error err, llvm::StringRef tool = "");

// Bounds on a rendered message: whatever the input, an error is at most kMaxMessageLines lines of at most
// kMaxLineBytes bytes each (a 1 MB token or a binary file read as IR must not flood the terminal).
inline constexpr size_t kMaxLineBytes = 512;
inline constexpr size_t kMaxMessageLines = 40;

// `text` made safe and short for a terminal or a log: bytes that are not printable ASCII, tab, newline or
// part of a valid UTF-8 sequence are written as \xNN; a line longer than kMaxLineBytes keeps its head and
// says how many bytes were cut; past kMaxMessageLines lines the rest is summarised in one line.
std::string clipMessage(llvm::StringRef text);

} // namespace minfer::ir
