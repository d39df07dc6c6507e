// ir/Diagnostics.cpp — formatting of located errors.
#include "ir/Diagnostics.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/ConvertUTF.h"
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

std::string renderError(llvm::Error err, llvm::StringRef tool) {
  std::string out, prefix = tool.empty() ? "error: " : tool.str() + ": error: ";
  auto separate = [&] {
    if (!out.empty() && out.back() != '\n') out += '\n';
  };
  llvm::handleAllErrors(
      std::move(err),
      [&](const DiagnosticError &d) {
        separate();
        out += d.formatted();
      },
      [&](const llvm::ErrorInfoBase &e) {
        separate();
        out += prefix + e.message();
      });
  out = clipMessage(out);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out + "\n";
}

namespace {

// One line with its unprintable bytes escaped, cut after kMaxLineBytes bytes of output.
std::string clipLine(llvm::StringRef line) {
  std::string out;
  size_t i = 0;
  while (i < line.size() && out.size() < kMaxLineBytes) {
    unsigned char c = line[i];
    if (c >= 0x80) {
      unsigned len = llvm::getNumBytesForUTF8(c);
      auto *begin = reinterpret_cast<const llvm::UTF8 *>(line.data() + i);
      if (i + len <= line.size() && llvm::isLegalUTF8Sequence(begin, begin + len)) {
        out.append(line.data() + i, len);
        i += len;
        continue;
      }
    }
    if ((c < 0x20 && c != '\t') || c == 0x7f || c >= 0x80) {
      out += "\\x";
      out += llvm::hexdigit(c >> 4, /*LowerCase=*/true);
      out += llvm::hexdigit(c & 15, /*LowerCase=*/true);
    } else {
      out += char(c);
    }
    ++i;
  }
  if (i < line.size()) out += " ... [" + std::to_string(line.size() - i) + " more bytes]";
  return out;
}

} // namespace

std::string clipMessage(llvm::StringRef text) {
  std::string out;
  size_t lines = 0;
  while (!text.empty()) {
    auto [line, rest] = text.split('\n');
    if (lines == kMaxMessageLines) {
      out += "... [" + std::to_string(text.size()) + " more bytes]\n";
      break;
    }
    out += clipLine(line);
    if (line.size() < text.size()) out += '\n';
    text = rest;
    ++lines;
  }
  return out;
}

llvm::Error makeError(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

} // namespace minfer::ir
