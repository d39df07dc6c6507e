// io/TokenizerFormats.h — inside io: the tokenizer file formats loadTokenizer (io/Tokenizer.cpp) chooses
// between. Each returns a Tokenizer whose `special` holds the format's own defaults; loadTokenizer then
// applies tokenizer_config.json and generation_config.json.
#pragma once

#include "io/Tokenizer.h"

#include "llvm/Support/JSON.h"

namespace minfer::tok {

// tokenizer.model at `modelPath`; `config` is the parsed tokenizer_config.json of the same directory (null
// when absent): its added_tokens_decoder / special tokens and `legacy` flag.
llvm::Expected<std::unique_ptr<Tokenizer>> loadSentencePieceTokenizer(llvm::StringRef modelPath,
                                                                      const llvm::json::Object *config);

// tokenizer.json (parsed, `root`) at `path`: a byte-level BPE.
llvm::Expected<std::unique_ptr<Tokenizer>> loadBpeTokenizer(llvm::StringRef path, const llvm::json::Object &root);

} // namespace minfer::tok
