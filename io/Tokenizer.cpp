// io/Tokenizer.cpp — choosing a checkpoint's tokenizer, its special tokens, streaming text, and the UTF-8
// rules HF applies (invalid bytes become U+FFFD, as Rust's String::from_utf8_lossy does).
#include "io/Tokenizer.h"

#include "io/Files.h"
#include "io/TokenizerFormats.h"
#include "ir/Json.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

namespace minfer::tok {

namespace json = llvm::json;

// ---- UTF-8 --------------------------------------------------------------------------------------------

namespace utf8 {

size_t sequenceLength(uint8_t lead) {
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 1;
}

namespace {
// How many bytes of a valid sequence start at s[i] (the maximal subpart when it is cut short); `complete`
// says whether they form a whole character.
size_t scan(llvm::StringRef s, size_t i, bool &complete, uint32_t &cp) {
  uint8_t b = static_cast<uint8_t>(s[i]);
  complete = true;
  cp = b;
  if (b < 0x80) return 1;
  size_t need = sequenceLength(b) - 1;
  if (need == 0) {
    complete = false;
    return 1;
  }
  // The second byte's range narrows for E0 (no overlongs), ED (no surrogates), F0 and F4 (U+10000..10FFFF).
  uint8_t lo = b == 0xE0 ? 0xA0 : b == 0xF0 ? 0x90 : 0x80;
  uint8_t hi = b == 0xED ? 0x9F : b == 0xF4 ? 0x8F : 0xBF;
  cp = b & (0x3F >> need);
  size_t j = i + 1;
  for (size_t k = 0; k < need; ++k, ++j) {
    uint8_t c = j < s.size() ? static_cast<uint8_t>(s[j]) : 0;
    if (j >= s.size() || c < (k == 0 ? lo : 0x80) || c > (k == 0 ? hi : 0xBF)) {
      complete = false;
      return j - i;
    }
    cp = (cp << 6) | (c & 0x3F);
  }
  return j - i;
}
} // namespace

size_t decodeOne(llvm::StringRef s, size_t i, uint32_t &cp) {
  bool complete = false;
  size_t n = scan(s, i, complete, cp);
  return complete ? n : 0;
}

size_t firstInvalid(llvm::StringRef s) {
  uint32_t cp = 0;
  for (size_t i = 0; i < s.size();) {
    size_t n = decodeOne(s, i, cp);
    if (n == 0) return i;
    i += n;
  }
  return llvm::StringRef::npos;
}

std::string lossy(llvm::StringRef bytes) {
  std::string out;
  out.reserve(bytes.size());
  uint32_t cp = 0;
  for (size_t i = 0; i < bytes.size();) {
    bool complete = false;
    size_t n = scan(bytes, i, complete, cp);
    if (complete) out.append(bytes.data() + i, n);
    else out += "\xEF\xBF\xBD"; // U+FFFD for the maximal invalid subpart
    i += n;
  }
  return out;
}

} // namespace utf8

// ---- Tokenizer ----------------------------------------------------------------------------------------

Tokenizer::~Tokenizer() = default;

bool SpecialTokens::isEos(int32_t id) const { return llvm::is_contained(eos, id); }

llvm::Expected<std::vector<int32_t>> Tokenizer::encodePrompt(llvm::StringRef text) const {
  auto ids = encode(text);
  if (!ids) return ids.takeError();
  if (special.addBos && special.bos) ids->insert(ids->begin(), *special.bos);
  return ids;
}

namespace {

llvm::Expected<std::optional<json::Value>> readJson(const std::string &path) {
  if (!llvm::sys::fs::exists(path)) return std::optional<json::Value>();
  auto buf = llvm::MemoryBuffer::getFile(path);
  if (!buf) return fileError(path, "cannot read: {0}", buf.getError().message());
  auto v = ir::parseJson((*buf)->getBuffer());
  if (!v) return fileError(path, "not valid JSON: {0}", llvm::toString(v.takeError()));
  return std::optional<json::Value>(std::move(*v));
}

// A token in tokenizer_config.json: a string, or an object with its "content" (HF's AddedToken).
std::optional<llvm::StringRef> tokenText(const json::Object &o, llvm::StringRef key) {
  const json::Value *v = o.get(key);
  if (!v) return std::nullopt;
  if (auto s = v->getAsString()) return *s;
  if (const json::Object *t = v->getAsObject())
    if (auto s = t->getString("content")) return *s;
  return std::nullopt;
}

// The id of a special token's text: encoding it must give exactly one id.
llvm::Expected<int32_t> idOf(const Tokenizer &t, llvm::StringRef text, llvm::StringRef path, llvm::StringRef field) {
  auto ids = t.encode(text);
  if (!ids) return ids.takeError();
  if (ids->size() != 1) return fileError(path, "field '{0}': '{1}' is not one token of the vocabulary", field, text);
  return (*ids)[0];
}

// BOS and EOS: tokenizer_config.json's tokens and add_bos_token over the format's defaults, then
// generation_config.json's ids over both.
llvm::Error readSpecialTokens(Tokenizer &t, llvm::StringRef dir, const json::Object *config) {
  std::string configPath = (dir + "/tokenizer_config.json").str();
  if (config) {
    if (auto bos = tokenText(*config, "bos_token")) {
      auto id = idOf(t, *bos, configPath, "bos_token");
      if (!id) return id.takeError();
      t.special.bos = *id;
    }
    if (auto eos = tokenText(*config, "eos_token")) {
      auto id = idOf(t, *eos, configPath, "eos_token");
      if (!id) return id.takeError();
      t.special.eos = {*id};
    }
    if (const json::Value *v = config->get("add_bos_token"); v && v->kind() != json::Value::Null) {
      auto b = v->getAsBoolean();
      if (!b) return fileError(configPath, "field 'add_bos_token' must be true or false");
      t.special.addBos = *b;
    }
  }
  std::string genPath = (dir + "/generation_config.json").str();
  auto gen = readJson(genPath);
  if (!gen) return gen.takeError();
  const json::Object *g = *gen ? (*gen)->getAsObject() : nullptr;
  if (!g) return llvm::Error::success();
  auto idField = [&](const json::Value &v, llvm::StringRef field) -> llvm::Expected<int32_t> {
    auto i = v.getAsInteger();
    if (!i || *i < 0 || *i >= t.vocabSize())
      return fileError(genPath, "field '{0}' must hold token ids below the vocabulary size {1}", field, t.vocabSize());
    return int32_t(*i);
  };
  if (const json::Value *v = g->get("bos_token_id"); v && v->kind() != json::Value::Null) {
    auto id = idField(*v, "bos_token_id");
    if (!id) return id.takeError();
    t.special.bos = *id;
  }
  if (const json::Value *v = g->get("eos_token_id"); v && v->kind() != json::Value::Null) {
    std::vector<int32_t> eos;
    if (const json::Array *list = v->getAsArray()) {
      for (const json::Value &e : *list) {
        auto id = idField(e, "eos_token_id");
        if (!id) return id.takeError();
        eos.push_back(*id);
      }
    } else {
      auto id = idField(*v, "eos_token_id");
      if (!id) return id.takeError();
      eos.push_back(*id);
    }
    t.special.eos = std::move(eos);
  }
  return llvm::Error::success();
}

} // namespace

llvm::Expected<std::unique_ptr<Tokenizer>> loadTokenizer(llvm::StringRef dir) {
  if (!llvm::sys::fs::is_directory(dir)) return fileError(dir, "not a directory (expected a checkpoint or tokenizer directory)");
  auto config = readJson((dir + "/tokenizer_config.json").str());
  if (!config) return config.takeError();
  const json::Object *configObj = *config ? (*config)->getAsObject() : nullptr;

  std::unique_ptr<Tokenizer> t;
  std::string model = (dir + "/tokenizer.model").str(), tjson = (dir + "/tokenizer.json").str();
  if (llvm::sys::fs::exists(model)) {
    auto sp = loadSentencePieceTokenizer(model, configObj);
    if (!sp) return sp.takeError();
    t = std::move(*sp);
  } else if (llvm::sys::fs::exists(tjson)) {
    auto root = readJson(tjson);
    if (!root) return root.takeError();
    const json::Object *o = (*root)->getAsObject();
    if (!o) return fileError(tjson, "expected a JSON object");
    auto bpe = loadBpeTokenizer(tjson, *o);
    if (!bpe) return bpe.takeError();
    t = std::move(*bpe);
  } else {
    return fileError(dir, "no tokenizer: expected tokenizer.model (SentencePiece) or tokenizer.json (byte-level BPE)");
  }
  if (auto e = readSpecialTokens(*t, dir, configObj)) return e;
  return t;
}

// ---- TextStream ---------------------------------------------------------------------------------------

namespace {
bool endsInReplacement(llvm::StringRef s) { return s.endswith("\xEF\xBF\xBD"); }
} // namespace

llvm::Expected<std::string> TextStream::push(int32_t id) {
  ids.push_back(id);
  // Decoding from one token before the new ones keeps what depends on the left neighbour (SentencePiece's
  // leading space) as the whole sequence's decode has it.
  llvm::ArrayRef<int32_t> all(ids);
  auto before = tok.decode(all.slice(prefix, read - prefix));
  if (!before) return before.takeError();
  auto now = tok.decode(all.drop_front(prefix));
  if (!now) return now.takeError();
  if (now->size() <= before->size() || endsInReplacement(*now)) return std::string(); // wait for more bytes
  std::string out = now->substr(before->size());
  prefix = read;
  read = ids.size();
  return out;
}

llvm::Expected<std::string> TextStream::finish() {
  llvm::ArrayRef<int32_t> all(ids);
  auto before = tok.decode(all.slice(prefix, read - prefix));
  if (!before) return before.takeError();
  auto now = tok.decode(all.drop_front(prefix));
  if (!now) return now.takeError();
  prefix = read = ids.size();
  return now->size() > before->size() ? now->substr(before->size()) : std::string();
}

} // namespace minfer::tok
