// ir/Json.h — JSON as minfer reads it from files it did not write (config.json, safetensors headers,
// tokenizer files, tuning databases): llvm::json::parse recurses once per nesting level, so a file nested
// a few hundred thousand deep would overflow the stack. parseJson refuses nesting beyond kMaxJsonDepth
// first, naming the byte where it goes too deep.
#pragma once

#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <string>

namespace minfer::ir {

// Deeper than any file minfer reads needs (tokenizer.json nests about 6 levels).
constexpr int kMaxJsonDepth = 128;

// The offset of the first '[' or '{' that opens level kMaxJsonDepth + 1 (strings skipped); npos when none.
inline size_t jsonTooDeepAt(llvm::StringRef text, int maxDepth = kMaxJsonDepth) {
  int depth = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\') ++i; // the escaped character cannot end the string
      else if (c == '"') inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > maxDepth) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return llvm::StringRef::npos;
}

// llvm::json::parse after the depth check; errors say "nested deeper than 128 levels at byte N" or
// llvm::json's message.
inline llvm::Expected<llvm::json::Value> parseJson(llvm::StringRef text) {
  if (size_t at = jsonTooDeepAt(text); at != llvm::StringRef::npos)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels at byte " +
                                       std::to_string(at));
  return llvm::json::parse(text);
}

} // namespace minfer::ir
