// io/SentencePieceTokenizer.cpp — tokenizer.model (SentencePiece: Llama 2, TinyLlama, Mistral) through
// Debian's libsentencepiece, giving the ids and text Hugging Face gives:
//   encode, as transformers 4's slow LlamaTokenizer.tokenize: the added tokens of tokenizer_config.json
//     (<unk> <s> </s> by default) are cut out of the raw text first (leftmost, then longest match; their
//     lstrip / rstrip / single_word flags applied to the neighbouring text), and every other piece goes
//     through SentencePiece on its own.
//       legacy=true  (the default): each piece gets the model's dummy-prefix "▁", also the one right after
//                    a special token ("<s>Hi" -> <s> ▁Hi).
//       legacy=false: the model is loaded with add_dummy_prefix off; "▁" is put once before the whole text,
//                    and a piece that starts with a space is encoded behind the text of <unk>, whose
//                    pieces are then dropped (HF's trick to keep SentencePiece from eating that space).
//   decode, as the decoder of Llama 2's tokenizer.json and transformers 5's LlamaTokenizer (Replace "▁" by
//     " ", ByteFallback, Fuse, Strip one leading " "): pieces and added tokens' texts joined, runs of
//     <0xNN> pieces turned into their bytes (a run that is not valid UTF-8 gives one U+FFFD per byte), and
//     one leading space of the whole text removed.
#include "io/TokenizerFormats.h"

#include "io/Files.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <sentencepiece_processor.h>

#include <array>
#include <map>
#include <tuple>

namespace minfer::tok {
namespace {

namespace json = llvm::json;
using llvm::StringRef;

constexpr StringRef kSpace("\xE2\x96\x81"); // U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's space
constexpr StringRef kReplacement("\xEF\xBF\xBD"); // U+FFFD

// ---- the model file's protobuf ------------------------------------------------------------------------
// libsentencepiece's API hides the ModelProto, so the two things read or changed here are done on the
// protobuf wire format (https://protobuf.dev/programming-guides/encoding/) of sentencepiece_model.proto:
//   ModelProto { TrainerSpec trainer_spec = 2; NormalizerSpec normalizer_spec = 3; }
//   TrainerSpec { ModelType model_type = 3; }        UNIGRAM = 1 (the default), BPE = 2, WORD = 3, CHAR = 4
//   NormalizerSpec { bool add_dummy_prefix = 3; }

// A cursor over one message's fields.
class WireReader {
public:
  explicit WireReader(StringRef bytes) : bytes(bytes) {}
  // The next field: its number, wire type, and (varint) value or (length-delimited) payload. False at the
  // end, or when the bytes are not a message (`broken` then says so).
  bool next(uint32_t &field, uint32_t &wireType, uint64_t &value, StringRef &payload) {
    uint64_t key = 0;
    if (pos == bytes.size() || !varint(key)) return false;
    field = uint32_t(key >> 3);
    wireType = uint32_t(key & 7);
    switch (wireType) {
    case 0: return varint(value) || fail();
    case 1: return skip(8);
    case 5: return skip(4);
    case 2: {
      uint64_t n = 0;
      if (!varint(n) || n > bytes.size() - pos) return fail();
      payload = bytes.substr(pos, n);
      pos += n;
      return true;
    }
    default: return fail(); // groups (3, 4) are not used by sentencepiece_model.proto
    }
  }
  bool broken = false;

private:
  bool varint(uint64_t &v) {
    v = 0;
    for (int shift = 0; shift < 64 && pos < bytes.size(); shift += 7) {
      uint8_t b = uint8_t(bytes[pos++]);
      v |= uint64_t(b & 0x7F) << shift;
      if (!(b & 0x80)) return true;
    }
    return fail();
  }
  bool skip(size_t n) {
    if (n > bytes.size() - pos) return fail();
    pos += n;
    return true;
  }
  bool fail() {
    broken = true;
    return false;
  }
  StringRef bytes;
  size_t pos = 0;
};

// trainer_spec.model_type's name for messages; nullopt when `proto` is not a protobuf message.
std::optional<std::string> modelTypeName(StringRef proto) {
  uint64_t type = 1;
  WireReader model(proto);
  uint32_t field, wire;
  uint64_t value;
  StringRef payload;
  while (model.next(field, wire, value, payload)) {
    if (field != 2 || wire != 2) continue;
    WireReader trainer(payload);
    while (trainer.next(field, wire, value, payload))
      if (field == 3 && wire == 0) type = value;
    if (trainer.broken) return std::nullopt;
  }
  if (model.broken) return std::nullopt;
  switch (type) {
  case 1: return std::string("Unigram");
  case 2: return std::string("BPE");
  case 3: return std::string("word");
  case 4: return std::string("char");
  default: return "model type " + std::to_string(type);
  }
}

// `proto` with normalizer_spec.add_dummy_prefix = false, as transformers' LlamaTokenizer(legacy=False)
// makes it (ModelProto.normalizer_spec.MergeFrom): a second normalizer_spec field appended to a message
// is merged into the first by every protobuf parser. Bytes: field 3 length-delimited (0x1A), 2 bytes long,
// holding field 3 varint (0x18) = 0.
std::string withoutDummyPrefix(StringRef proto) { return proto.str() + std::string("\x1A\x02\x18\x00", 4); }

// ---- text helpers -------------------------------------------------------------------------------------

// Python's str.isspace(), which str.strip() uses: the Unicode White_Space characters plus U+001C..U+001F.
bool isPythonSpace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

// Python's s.lstrip() / s.rstrip() on valid UTF-8.
std::string pyLstrip(StringRef s) {
  size_t i = 0;
  uint32_t cp = 0;
  while (i < s.size()) {
    size_t n = utf8::decodeOne(s, i, cp);
    if (n == 0 || !isPythonSpace(cp)) break;
    i += n;
  }
  return s.drop_front(i).str();
}
std::string pyRstrip(StringRef s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (uint8_t(s[start]) & 0xC0) == 0x80) --start; // back to the lead byte
    uint32_t cp = 0;
    if (utf8::decodeOne(s, start, cp) != end - start || !isPythonSpace(cp)) break;
    end = start;
  }
  return s.take_front(end).str();
}

std::string replaceAll(StringRef s, StringRef from, StringRef to) {
  std::string out;
  for (size_t i = 0;;) {
    size_t j = s.find(from, i);
    out.append(s.data() + i, (j == StringRef::npos ? s.size() : j) - i);
    if (j == StringRef::npos) return out;
    out.append(to.data(), to.size());
    i = j + from.size();
  }
}

// The byte of a byte-fallback piece "<0xE4>" (after HF's ByteFallback decoder: exactly six characters).
std::optional<uint8_t> fallbackByte(StringRef piece) {
  if (piece.size() != 6 || !piece.startswith("<0x") || !piece.endswith(">")) return std::nullopt;
  unsigned v = 0;
  if (piece.substr(3, 2).getAsInteger(16, v)) return std::nullopt;
  return uint8_t(v);
}

// ---- tokenizer_config.json ----------------------------------------------------------------------------

// One of HF's AddedTokens (tokenizer_config.json's added_tokens_decoder, or a special token).
struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool lstrip = false, rstrip = false, singleWord = false;
};

// What transformers' LlamaTokenizer reads from tokenizer_config.json, with its defaults.
struct LlamaConfig {
  bool legacy = true;         // `legacy`: absent or null means true (HF warns and keeps the old behaviour)
  bool addPrefixSpace = true; // `add_prefix_space` (null is falsy in HF's `if self.add_prefix_space`)
  bool cleanUpSpaces = false; // `clean_up_tokenization_spaces`
  bool splitSpecialTokens = false;
  std::string unkToken = "<unk>";
  // all_special_tokens_extended in HF's order: bos, eos, unk, sep, pad, cls, mask, then the additional ones.
  std::vector<AddedToken> specials;
  std::map<int32_t, AddedToken> addedTokensDecoder;
};

struct ConfigReader {
  std::string path; // for messages
  llvm::Error fail(const llvm::Twine &field, const llvm::Twine &msg) const {
    return fileError(path, "field '{0}': {1}", field.str(), msg.str());
  }
  // o[key] into `out` when present; `field` names it in messages.
  llvm::Error flag(const json::Object &o, StringRef key, bool &out, bool nullMeans, const llvm::Twine &field) const {
    const json::Value *v = o.get(key);
    if (!v) return llvm::Error::success();
    if (v->kind() == json::Value::Null) {
      out = nullMeans;
      return llvm::Error::success();
    }
    auto b = v->getAsBoolean();
    if (!b) return fail(field, "must be true, false or null");
    out = *b;
    return llvm::Error::success();
  }
  // A token: a string, or an AddedToken object {"content", "lstrip", "rstrip", "single_word", ...}.
  llvm::Expected<AddedToken> token(const json::Value &v, const llvm::Twine &field) const {
    AddedToken t;
    if (auto s = v.getAsString()) {
      t.content = s->str();
    } else if (const json::Object *o = v.getAsObject()) {
      auto content = o->getString("content");
      if (!content) return fail(field + ".content", "missing (a string)");
      t.content = content->str();
      for (auto [key, out] : {std::pair<StringRef, bool *>{"lstrip", &t.lstrip},
                              {"rstrip", &t.rstrip},
                              {"single_word", &t.singleWord}})
        if (auto e = flag(*o, key, *out, false, field + "." + key)) return e;
    } else {
      return fail(field, "must be a string or an object with \"content\"");
    }
    if (t.content.empty()) return fail(field, "is empty");
    if (utf8::firstInvalid(t.content) != StringRef::npos) return fail(field, "is not valid UTF-8");
    return t;
  }
};

llvm::Expected<LlamaConfig> readConfig(const json::Object *config, StringRef modelPath) {
  LlamaConfig c;
  llvm::SmallString<256> configPath = llvm::sys::path::parent_path(modelPath);
  llvm::sys::path::append(configPath, "tokenizer_config.json");
  ConfigReader r{configPath.str().str()};
  // LlamaTokenizer's own arguments, for the keys the config lacks (or all of them when there is none).
  std::vector<std::pair<StringRef, std::optional<std::string>>> named = {
      {"bos_token", "<s>"}, {"eos_token", "</s>"}, {"unk_token", "<unk>"}, {"sep_token", std::nullopt},
      {"pad_token", std::nullopt}, {"cls_token", std::nullopt}, {"mask_token", std::nullopt}};
  if (!config) {
    for (auto &[key, text] : named)
      if (text) c.specials.push_back(AddedToken{*text});
    return c;
  }
  const json::Object &o = *config;
  // (key, where it goes, what null means)
  for (auto [key, out, nullMeans] : {std::tuple<StringRef, bool *, bool>{"legacy", &c.legacy, true},
                                     {"add_prefix_space", &c.addPrefixSpace, false},
                                     {"clean_up_tokenization_spaces", &c.cleanUpSpaces, false},
                                     {"split_special_tokens", &c.splitSpecialTokens, false}})
    if (auto e = r.flag(o, key, *out, nullMeans, key)) return e;
  // sp_model_kwargs would change how SentencePiece encodes (sampling, nbest); minfer encodes deterministically.
  if (const json::Value *v = o.get("sp_model_kwargs"); v && v->kind() != json::Value::Null) {
    const json::Object *kw = v->getAsObject();
    if (!kw) return r.fail("sp_model_kwargs", "must be an object");
    if (!kw->empty()) return r.fail("sp_model_kwargs." + kw->begin()->first.str(), "is not supported by minfer");
  }

  for (auto &[key, text] : named) {
    const json::Value *v = o.get(key);
    if (v && v->kind() == json::Value::Null) continue;
    if (!v) {
      if (text) c.specials.push_back(AddedToken{*text});
      continue;
    }
    auto t = r.token(*v, key);
    if (!t) return t.takeError();
    if (key == "unk_token") c.unkToken = t->content;
    c.specials.push_back(std::move(*t));
  }
  if (const json::Value *v = o.get("additional_special_tokens"); v && v->kind() != json::Value::Null) {
    const json::Array *list = v->getAsArray();
    if (!list) return r.fail("additional_special_tokens", "must be a list");
    for (size_t i = 0; i < list->size(); ++i) {
      auto t = r.token((*list)[i], llvm::formatv("additional_special_tokens[{0}]", i));
      if (!t) return t.takeError();
      c.specials.push_back(std::move(*t));
    }
  }
  if (const json::Value *v = o.get("added_tokens_decoder"); v && v->kind() != json::Value::Null) {
    const json::Object *atd = v->getAsObject();
    if (!atd) return r.fail("added_tokens_decoder", "must be an object of id -> token");
    for (const auto &[key, value] : *atd) {
      std::string field = "added_tokens_decoder." + key.str();
      int32_t id = 0;
      if (StringRef(key).getAsInteger(10, id) || id < 0) return r.fail(field, "the key must be a token id");
      if (!value.getAsObject()) return r.fail(field, "must be an object with \"content\"");
      auto t = r.token(value, field);
      if (!t) return t.takeError();
      t->id = id;
      c.addedTokensDecoder[id] = std::move(*t);
    }
  }
  return c;
}

// ---- the tokenizer ------------------------------------------------------------------------------------

class SentencePieceTokenizer final : public Tokenizer {
public:
  llvm::Expected<std::vector<int32_t>> encode(StringRef text) const override;
  llvm::Expected<std::string> decode(llvm::ArrayRef<int32_t> ids) const override;
  int64_t vocabSize() const override { return vocab; }
  std::string describe() const override {
    return llvm::formatv("{0} (SentencePiece {1}, {2} pieces)", fileName, modelType, sp.GetPieceSize()).str();
  }

  llvm::Error load(StringRef path, const json::Object *config);

private:
  llvm::Error pieces(StringRef text, std::vector<std::string> &out) const;
  llvm::Error tokenizePiece(StringRef text, std::vector<std::string> &out) const;
  std::vector<std::string> splitOnAddedTokens(StringRef text) const;
  const AddedToken *added(StringRef content) const {
    auto it = addedByContent.find(content);
    return it == addedByContent.end() ? nullptr : &addedById.at(it->second);
  }

  sentencepiece::SentencePieceProcessor sp;
  std::string path, fileName, modelType;
  LlamaConfig cfg;
  size_t unkTokenLength = 0;                   // how many pieces the text of <unk> encodes to (legacy=false)
  std::map<int32_t, AddedToken> addedById;     // HF's _added_tokens_decoder
  llvm::StringMap<int32_t> addedByContent;     // HF's _added_tokens_encoder
  std::array<std::vector<const AddedToken *>, 256> addedByFirstByte; // longest first
  llvm::StringSet<> allSpecialTokens;          // HF's all_special_tokens
  int64_t vocab = 0;
};

llvm::Error SentencePieceTokenizer::load(StringRef modelPath, const json::Object *config) {
  path = modelPath.str();
  fileName = llvm::sys::path::filename(modelPath).str();
  auto buf = llvm::MemoryBuffer::getFile(modelPath, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buf) return fileError(path, "cannot read: {0}", buf.getError().message());
  StringRef proto = (*buf)->getBuffer();
  auto type = modelTypeName(proto);
  if (!type) return fileError(path, "not a SentencePiece model (not a protobuf message)");
  modelType = *type;

  auto c = readConfig(config, modelPath);
  if (!c) return c.takeError();
  cfg = std::move(*c);

  sentencepiece::util::Status st =
      cfg.legacy ? sp.LoadFromSerializedProto(proto) : sp.LoadFromSerializedProto(withoutDummyPrefix(proto));
  if (!st.ok()) return fileError(path, "not a SentencePiece model: {0}", st.ToString());
  if (sp.GetPieceSize() == 0) return fileError(path, "not a SentencePiece model: it has no pieces");

  // HF's PreTrainedTokenizer.__init__: added_tokens_decoder as saved, then every special token not yet in
  // it gets the id of its text in the vocabulary, or the next free id.
  addedById = cfg.addedTokensDecoder;
  for (auto &[id, t] : addedById) addedByContent[t.content] = id;
  int64_t distinct = sp.GetPieceSize(); // len(get_vocab()): the pieces and the added tokens, by text
  auto inPieces = [&](StringRef text) {
    int32_t id = sp.PieceToId(std::string_view(text.data(), text.size()));
    return id != sp.unk_id() || text == sp.IdToPiece(id);
  };
  for (auto &[id, t] : addedById)
    if (!inPieces(t.content)) ++distinct;
  for (AddedToken &t : cfg.specials) {
    allSpecialTokens.insert(t.content);
    if (addedByContent.count(t.content)) continue;
    int32_t id = inPieces(t.content) ? sp.PieceToId(t.content) : int32_t(distinct++);
    t.id = id;
    addedById[id] = t;
    addedByContent[t.content] = id;
  }
  for (auto &[id, t] : addedById) addedByFirstByte[uint8_t(t.content[0])].push_back(&t);
  auto longerFirst = [](const AddedToken *a, const AddedToken *b) { return a->content.size() > b->content.size(); };
  for (auto &list : addedByFirstByte) llvm::stable_sort(list, longerFirst);

  vocab = sp.GetPieceSize();
  if (!addedById.empty()) vocab = std::max<int64_t>(vocab, addedById.rbegin()->first + 1);

  if (!cfg.legacy) {
    std::vector<std::string> unk;
    if (auto e = pieces(cfg.unkToken, unk)) return e;
    unkTokenLength = unk.size();
  }

  // The format's own BOS / EOS; loadTokenizer applies the checkpoint's configs over them.
  if (sp.bos_id() >= 0) special.bos = sp.bos_id();
  if (sp.eos_id() >= 0) special.eos = {sp.eos_id()};
  special.addBos = true; // LlamaTokenizer's add_bos_token default
  return llvm::Error::success();
}

// SentencePiece's pieces of `text`, as sp.encode(text, out_type=str).
llvm::Error SentencePieceTokenizer::pieces(StringRef text, std::vector<std::string> &out) const {
  std::vector<std::string> p;
  sentencepiece::util::Status st = sp.Encode(std::string_view(text.data(), text.size()), &p);
  if (!st.ok()) return fileError(path, "SentencePiece cannot encode the text: {0}", st.ToString());
  out.insert(out.end(), std::make_move_iterator(p.begin()), std::make_move_iterator(p.end()));
  return llvm::Error::success();
}

// HF's LlamaTokenizer._tokenize: one piece of text between added tokens.
llvm::Error SentencePieceTokenizer::tokenizePiece(StringRef text, std::vector<std::string> &out) const {
  if (cfg.legacy || !(text.startswith(kSpace) || text.startswith(" "))) return pieces(text, out);
  // Without the dummy prefix SentencePiece drops a leading "▁"; behind <unk>'s text it keeps it.
  std::vector<std::string> p;
  if (auto e = pieces(cfg.unkToken + text.str(), p)) return e;
  size_t drop = p.size() >= unkTokenLength ? unkTokenLength : 0;
  out.insert(out.end(), std::make_move_iterator(p.begin() + drop), std::make_move_iterator(p.end()));
  return llvm::Error::success();
}

// HF's Trie.split: the text cut around every added token found, leftmost first and the longest there.
std::vector<std::string> SentencePieceTokenizer::splitOnAddedTokens(StringRef text) const {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t i = 0; i < text.size();) {
    const AddedToken *match = nullptr;
    for (const AddedToken *t : addedByFirstByte[uint8_t(text[i])])
      if (text.substr(i).startswith(t->content)) {
        match = t;
        break;
      }
    if (!match) {
      ++i;
      continue;
    }
    if (i > start) parts.push_back(text.slice(start, i).str());
    parts.push_back(match->content);
    i += match->content.size();
    start = i;
  }
  if (start < text.size()) parts.push_back(text.substr(start).str());
  return parts;
}

llvm::Expected<std::vector<int32_t>> SentencePieceTokenizer::encode(StringRef text) const {
  if (size_t bad = utf8::firstInvalid(text); bad != StringRef::npos)
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "text to encode is not valid UTF-8 (byte %zu)", bad);
  if (text.empty()) return std::vector<int32_t>();

  // LlamaTokenizer.tokenize with legacy=false: "▁" in the text is a space, and one "▁" goes first.
  std::string s = text.str();
  if (!cfg.legacy) {
    s = replaceAll(s, kSpace, " ");
    if (cfg.addPrefixSpace) s = kSpace.str() + s;
  }

  // PreTrainedTokenizer.tokenize: cut out the added tokens, let their flags eat the neighbouring text.
  std::vector<std::string> parts = cfg.splitSpecialTokens ? std::vector<std::string>{s} : splitOnAddedTokens(s);
  auto isAdded = [&](StringRef part) { return !cfg.splitSpecialTokens && added(part); };
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!isAdded(parts[i])) continue;
    const AddedToken &t = *added(parts[i]);
    // The neighbours as they were before stripping (HF tests single_word on those).
    std::string left = i > 0 ? parts[i - 1] : "", right = i + 1 < parts.size() ? parts[i + 1] : "";
    if (t.rstrip && !right.empty()) parts[i + 1] = pyLstrip(right); // rstrip: the token eats spaces after it
    if (t.lstrip && !left.empty()) parts[i - 1] = pyRstrip(left);
    if (t.singleWord && !left.empty() && left.back() != ' ') {
      parts[i - 1] += parts[i];
      parts[i].clear();
    } else if (t.singleWord && !right.empty() && right.front() != ' ') {
      parts[i + 1] = parts[i] + parts[i + 1];
      parts[i].clear();
    }
  }
  std::vector<std::string> tokens;
  for (const std::string &part : parts) {
    if (part.empty()) continue;
    if (isAdded(part)) tokens.push_back(part);
    else if (auto e = tokenizePiece(part, tokens)) return e;
  }
  // legacy=false: the "▁" put first is dropped again when a special token follows it.
  if (!cfg.legacy && tokens.size() > 1 && tokens[0] == kSpace && allSpecialTokens.contains(tokens[1]))
    tokens.erase(tokens.begin());

  // convert_tokens_to_ids: added tokens first, then the SentencePiece vocabulary (unknown -> <unk>).
  std::vector<int32_t> ids;
  ids.reserve(tokens.size());
  for (const std::string &t : tokens) {
    auto it = addedByContent.find(t);
    ids.push_back(it != addedByContent.end() ? it->second : sp.PieceToId(t));
  }
  return ids;
}

llvm::Expected<std::string> SentencePieceTokenizer::decode(llvm::ArrayRef<int32_t> ids) const {
  std::string out, run; // run: the bytes of consecutive byte-fallback pieces
  auto flushRun = [&] {
    // ByteFallback: a run that is valid UTF-8 is that text, otherwise every byte of it is U+FFFD.
    if (utf8::firstInvalid(run) == StringRef::npos) out += run;
    else for (size_t i = 0; i < run.size(); ++i) out += kReplacement;
    run.clear();
  };
  for (int32_t id : ids) {
    StringRef piece;
    if (auto it = addedById.find(id); it != addedById.end()) piece = it->second.content;
    else if (id >= 0 && id < sp.GetPieceSize()) piece = sp.IdToPiece(id);
    else return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                        "token id %d is outside the vocabulary (%lld ids)", id, (long long)vocab);
    if (auto byte = fallbackByte(piece)) {
      run.push_back(char(*byte));
      continue;
    }
    flushRun();
    out += replaceAll(piece, kSpace, " ");
  }
  flushRun();
  if (StringRef(out).startswith(" ")) out.erase(0, 1); // Strip(" ", 1, 0): the dummy prefix's space
  if (cfg.cleanUpSpaces) {
    // PreTrainedTokenizerBase.clean_up_tokenization, in its order.
    for (auto [from, to] : {std::pair<StringRef, StringRef>{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","},
                            {" ' ", "'"}, {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"},
                            {" 're", "'re"}})
      out = replaceAll(out, from, to);
  }
  return out;
}

} // namespace

llvm::Expected<std::unique_ptr<Tokenizer>> loadSentencePieceTokenizer(StringRef modelPath,
                                                                      const json::Object *config) {
  auto t = std::make_unique<SentencePieceTokenizer>();
  if (auto e = t->load(modelPath, config)) return e;
  return std::unique_ptr<Tokenizer>(std::move(t));
}

} // namespace minfer::tok
