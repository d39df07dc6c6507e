// io/Tokenizer.h — the tokenizer a Hugging Face checkpoint ships: text to token ids and back, giving the
// ids Hugging Face gives.
//
// loadTokenizer(dir) reads, in this order of preference:
//   tokenizer.model   SentencePiece (Llama 2, TinyLlama, Mistral), through libsentencepiece, with HF's
//                     slow-tokenizer handling of special-token literals in the text;
//   tokenizer.json    a byte-level BPE (GPT-2, Llama 3, Qwen2 styles): added tokens, an NFC normalizer,
//                     ByteLevel / Split / Sequence pre-tokenizers, the ByteLevel decoder;
// and tokenizer_config.json / generation_config.json for BOS, EOS and whether BOS is added. Anything the
// file asks for that minfer does not implement is an error naming the file and the field.
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace minfer::tok {

// What generation needs beyond the vocabulary: the checkpoint's BOS (and whether a prompt starts with it)
// and the ids that end a sequence.
struct SpecialTokens {
  std::optional<int32_t> bos;
  bool addBos = false;
  std::vector<int32_t> eos; // generation_config.json's eos_token_id (one or a list), else the tokenizer's
  bool isEos(int32_t id) const;
};

class Tokenizer {
public:
  virtual ~Tokenizer();

  // The ids of `text` without BOS or EOS (HF's add_special_tokens=False). Special-token literals in the
  // text ("<|endoftext|>") become their ids, as HF matches them by default. `text` must be UTF-8.
  virtual llvm::Expected<std::vector<int32_t>> encode(llvm::StringRef text) const = 0;
  // The text of `ids` (special tokens included, HF's skip_special_tokens=False); byte sequences that are not
  // UTF-8 become U+FFFD as in HF. Ids outside the vocabulary are an error.
  virtual llvm::Expected<std::string> decode(llvm::ArrayRef<int32_t> ids) const = 0;
  // One past the largest id: the size the model's embedding must have at least.
  virtual int64_t vocabSize() const = 0;
  // "tokenizer.json (byte-level BPE, 50257 tokens)", for messages.
  virtual std::string describe() const = 0;

  // encode, with BOS first when the checkpoint adds it (HF's add_special_tokens=True for these models).
  llvm::Expected<std::vector<int32_t>> encodePrompt(llvm::StringRef text) const;

  SpecialTokens special;
};

// The tokenizer of the checkpoint (or tokenizer-only) directory `dir`.
llvm::Expected<std::unique_ptr<Tokenizer>> loadTokenizer(llvm::StringRef dir);

// Text as tokens arrive: push() returns what can be printed now, never a broken UTF-8 sequence (bytes of
// a character split over tokens wait for the rest), and joins pieces the way decode() of the whole
// sequence would (SentencePiece's leading spaces, byte-fallback pieces).
class TextStream {
public:
  explicit TextStream(const Tokenizer &t) : tok(t) {}
  llvm::Expected<std::string> push(int32_t id);
  // What is still held back at the end of the sequence (an incomplete character, printed as U+FFFD).
  llvm::Expected<std::string> finish();

private:
  const Tokenizer &tok;
  std::vector<int32_t> ids;
  size_t prefix = 0, read = 0; // ids[prefix, read) were decoded and printed; ids[read, end) are pending
};

namespace utf8 {
// Bytes to valid UTF-8, each maximal invalid subsequence replaced by U+FFFD (Rust's from_utf8_lossy).
std::string lossy(llvm::StringRef bytes);
// The offset of the first byte that is not part of valid UTF-8; npos when `s` is valid.
size_t firstInvalid(llvm::StringRef s);
// The length of the valid sequence at s[i] with its code point in `cp`; 0 when none starts there.
size_t decodeOne(llvm::StringRef s, size_t i, uint32_t &cp);
// The length a sequence starting with `lead` claims (1 for a byte that cannot start one).
size_t sequenceLength(uint8_t lead);
} // namespace utf8

} // namespace minfer::tok
