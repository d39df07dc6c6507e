// io/Nfc.h — Unicode Normalization Form C (UAX #15), for tokenizers whose normalizer is NFC (Qwen2), from
// the Unicode Character Database tables in io/UnicodeNfc.inc (scripts/gen_unicode_nfc.py).
#pragma once

#include "llvm/ADT/StringRef.h"

#include <string>

namespace minfer::tok {

// `text` (valid UTF-8) in NFC: canonically decomposed, reordered, and recomposed.
std::string nfc(llvm::StringRef text);

} // namespace minfer::tok
