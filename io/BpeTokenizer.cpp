// io/BpeTokenizer.cpp — tokenizer.json with a byte-level BPE model (GPT-2, Llama 3, Qwen2 styles), giving
// the ids of HF `tokenizers`:
//   1. added tokens are cut out of the text first (leftmost, then longest match) and become their ids;
//   2. the rest is normalized (none, or NFC: io/Nfc.h), pre-tokenized (ByteLevel with or without its
//      regex, Split with an explicit regex, a Sequence of them; regexes through PCRE2 with Unicode
//      properties), and each piece is encoded by BPE over its bytes: the piece itself when `ignore_merges`
//      and it is in the vocabulary, else its bytes merged pair by pair, lowest merge rank first and
//      leftmost among equals.
// Byte-level tokens are stored as the bytes they stand for (GPT-2's printable alphabet decoded once at
// load), so BPE and decode work on bytes.
#include "io/TokenizerFormats.h"

#include "io/Files.h"
#include "io/Nfc.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <functional>
#include <queue>

namespace minfer::tok {
namespace {

namespace json = llvm::json;

// GPT-2's byte-level alphabet: bytes that are printable stand for themselves, the others for code points
// from U+0100 on, in byte order (so no token holds a space or a control character).
const std::array<uint32_t, 256> &byteToCodePoint() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[b] = printable ? b : next++;
    }
    return t;
  }();
  return table;
}

// The bytes a byte-level token string stands for; none when a character is outside the alphabet (HF then
// uses the token's own UTF-8, as its ByteLevel decoder does).
std::optional<std::string> byteLevelBytes(llvm::StringRef token) {
  static const llvm::DenseMap<uint32_t, uint8_t> inverse = [] {
    llvm::DenseMap<uint32_t, uint8_t> m;
    for (uint32_t b = 0; b < 256; ++b) m[byteToCodePoint()[b]] = static_cast<uint8_t>(b);
    return m;
  }();
  std::string out;
  for (size_t i = 0; i < token.size();) {
    uint32_t cp = 0;
    size_t len = utf8::decodeOne(token, i, cp);
    if (len == 0) return std::nullopt;
    auto it = inverse.find(cp);
    if (it == inverse.end()) return std::nullopt;
    out.push_back(static_cast<char>(it->second));
    i += len;
  }
  return out;
}

// A compiled PCRE2 pattern with HF's Unicode semantics (UTF-8 subject, \s \d \w and case folding by
// Unicode properties).
class Regex {
public:
  static llvm::Expected<std::shared_ptr<Regex>> compile(llvm::StringRef pattern) {
    int code = 0;
    PCRE2_SIZE at = 0;
    pcre2_code *re = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &code, &at, nullptr);
    if (!re) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(code, msg, sizeof(msg));
      return llvm::createStringError(llvm::inconvertibleErrorCode(), "regex at offset %zu: %s", size_t(at),
                                     reinterpret_cast<const char *>(msg));
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); // an interpreter fallback when JIT is unavailable
    return std::shared_ptr<Regex>(new Regex(re));
  }
  ~Regex() { pcre2_code_free(re); }

  // Calls fn(begin, end) for each non-overlapping match in `s` (valid UTF-8), left to right.
  template <typename Fn> void forEachMatch(llvm::StringRef s, Fn fn) const {
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, nullptr);
    PCRE2_SIZE offset = 0;
    while (offset <= s.size()) {
      int rc = pcre2_match(re, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), offset, PCRE2_NO_UTF_CHECK, md,
                           nullptr);
      if (rc < 0) break;
      PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
      size_t begin = ov[0], end = ov[1];
      if (end == begin) { // an empty match: step over one character, as onig's find_iter does
        if (begin >= s.size()) break;
        offset = begin + utf8::sequenceLength(static_cast<uint8_t>(s[begin]));
        continue;
      }
      fn(begin, end);
      offset = end;
    }
    pcre2_match_data_free(md);
  }

private:
  explicit Regex(pcre2_code *re) : re(re) {}
  pcre2_code *re;
};

// GPT-2's pattern, the ByteLevel pre-tokenizer's when use_regex is true.
constexpr llvm::StringLiteral kByteLevelPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// One pre-tokenizer step: pieces in, pieces out (each a run of the normalized text's bytes).
struct PreStep {
  enum class Kind { ByteLevel, Split } kind;
  std::shared_ptr<Regex> regex; // ByteLevel with use_regex, Split
  bool addPrefixSpace = false;  // ByteLevel
  bool keepMatches = true;      // Split: Isolated (matches and gaps) or Removed (gaps only)
};

struct AddedToken {
  std::string content;
  int32_t id;
};

// llvm::json's optional fields, read with a default: "" for an absent string, `fallback` for a flag.
llvm::StringRef text(const json::Object *o, llvm::StringRef key) {
  if (!o) return "";
  auto s = o->getString(key);
  return s ? *s : llvm::StringRef();
}
bool flag(const json::Object &o, llvm::StringRef key, bool fallback) {
  auto b = o.getBoolean(key);
  return b ? *b : fallback;
}
bool isNull(const json::Value *v) { return !v || v->kind() == json::Value::Null; }

// Errors in tokenizer.json name the file and the field.
struct JsonReader {
  llvm::StringRef path;
  llvm::Error fail(const llvm::Twine &field, const llvm::Twine &msg) const {
    return fileError(path, "field '{0}': {1}", field.str(), msg.str());
  }
};

class BpeTokenizer : public Tokenizer {
public:
  llvm::Expected<std::vector<int32_t>> encode(llvm::StringRef text) const override;
  llvm::Expected<std::string> decode(llvm::ArrayRef<int32_t> ids) const override;
  int64_t vocabSize() const override { return static_cast<int64_t>(tokenBytes.size()); }
  std::string describe() const override {
    return llvm::formatv("tokenizer.json (byte-level BPE, {0} tokens)", tokenBytes.size()).str();
  }

  llvm::Error load(const json::Object &root, llvm::StringRef path);

private:
  llvm::Error readPostProcessor(const json::Object &root, const JsonReader &r);
  void encodeSegment(llvm::StringRef text, std::vector<int32_t> &out) const;
  void encodePiece(llvm::StringRef bytes, std::vector<int32_t> &out) const;
  static uint64_t pairKey(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }

  std::vector<std::string> tokenBytes;      // by id: the bytes a token decodes to ("" for unused ids)
  llvm::StringMap<int32_t> idOfBytes;       // BPE vocabulary by bytes
  std::array<int32_t, 256> byteId{};        // the single-byte tokens
  llvm::DenseMap<uint64_t, std::pair<int32_t, int32_t>> merges; // (left, right) -> (rank, merged id)
  bool ignoreMerges = false;
  bool normalizeNfc = false;
  std::vector<PreStep> steps;
  std::vector<AddedToken> added; // longest first
  std::array<std::vector<size_t>, 256> addedByFirstByte; // indices into `added`, longest first
};

// ---- loading ------------------------------------------------------------------------------------------

llvm::Error BpeTokenizer::load(const json::Object &root, llvm::StringRef path) {
  JsonReader r{path};
  const json::Object *model = root.getObject("model");
  if (!model) return r.fail("model", "missing (an object)");
  llvm::StringRef type = text(model, "type");
  if (!type.empty() && type != "BPE") return r.fail("model.type", "'" + type + "' is not supported; expected BPE");
  for (llvm::StringRef f : {"continuing_subword_prefix", "end_of_word_suffix", "dropout"})
    if (const json::Value *v = model->get(f); !isNull(v) && !(v->getAsString() && v->getAsString()->empty()))
      return r.fail("model." + f, "is not supported by minfer's byte-level BPE");
  if (flag(*model, "byte_fallback", false))
    return r.fail("model.byte_fallback", "true is not supported in tokenizer.json; minfer reads such (SentencePiece) "
                                         "tokenizers from tokenizer.model");
  ignoreMerges = flag(*model, "ignore_merges", false);

  // Normalizer: none or NFC.
  if (const json::Value *n = root.get("normalizer"); !isNull(n)) {
    llvm::StringRef t = text(n->getAsObject(), "type");
    if (t != "NFC") return r.fail("normalizer.type", "'" + t + "' is not supported; expected NFC or null");
    normalizeNfc = true;
  }

  // Pre-tokenizers: ByteLevel, Split, or a Sequence of them.
  bool byteLevel = false;
  std::function<llvm::Error(const json::Value &, const std::string &)> addStep =
      [&](const json::Value &v, const std::string &field) -> llvm::Error {
    const json::Object *o = v.getAsObject();
    llvm::StringRef t = text(o, "type");
    if (t == "Sequence") {
      const json::Array *list = o->getArray("pretokenizers");
      if (!list) return r.fail(field + ".pretokenizers", "missing (a list)");
      for (size_t i = 0; i < list->size(); ++i)
        if (auto e = addStep((*list)[i], field + ".pretokenizers[" + std::to_string(i) + "]")) return e;
      return llvm::Error::success();
    }
    PreStep s;
    if (t == "ByteLevel") {
      byteLevel = true;
      s.kind = PreStep::Kind::ByteLevel;
      s.addPrefixSpace = flag(*o, "add_prefix_space", true);
      if (flag(*o, "use_regex", true)) {
        auto re = Regex::compile(kByteLevelPattern);
        if (!re) return re.takeError();
        s.regex = *re;
      }
    } else if (t == "Split") {
      s.kind = PreStep::Kind::Split;
      const json::Object *pattern = o->getObject("pattern");
      auto regex = pattern ? pattern->getString("Regex") : llvm::None;
      auto literal = pattern ? pattern->getString("String") : llvm::None;
      if (!regex && !literal) return r.fail(field + ".pattern", "expected {\"Regex\": ...} or {\"String\": ...}");
      std::string p = regex ? regex->str() : "\\Q" + literal->str() + "\\E";
      auto re = Regex::compile(p);
      if (!re) return r.fail(field + ".pattern", llvm::toString(re.takeError()));
      s.regex = *re;
      llvm::StringRef behavior = text(o, "behavior");
      if (behavior == "Removed") s.keepMatches = false;
      else if (behavior != "Isolated")
        return r.fail(field + ".behavior", "'" + behavior + "' is not supported; expected Isolated or Removed");
      if (flag(*o, "invert", false)) return r.fail(field + ".invert", "true is not supported");
    } else {
      return r.fail(field + ".type", "'" + t + "' is not supported; expected ByteLevel, Split or Sequence");
    }
    steps.push_back(std::move(s));
    return llvm::Error::success();
  };
  if (const json::Value *p = root.get("pre_tokenizer"); !isNull(p))
    if (auto e = addStep(*p, "pre_tokenizer")) return e;
  if (const json::Value *d = root.get("decoder"); !isNull(d)) {
    llvm::StringRef t = text(d->getAsObject(), "type");
    if (t != "ByteLevel") return r.fail("decoder.type", "'" + t + "' is not supported; expected ByteLevel");
  }
  if (!byteLevel) return r.fail("pre_tokenizer", "has no ByteLevel step; minfer reads byte-level BPE tokenizers only");

  // Vocabulary: token string -> id, tokens stored as the bytes they stand for.
  const json::Object *vocab = model->getObject("vocab");
  if (!vocab) return r.fail("model.vocab", "missing (an object of token: id)");
  auto place = [&](int64_t id, std::string bytes) -> llvm::Error {
    if (id < 0 || id >= (int64_t(1) << 24)) return r.fail("model.vocab", "id " + std::to_string(id) + " is out of range");
    if (tokenBytes.size() <= size_t(id)) tokenBytes.resize(size_t(id) + 1);
    tokenBytes[size_t(id)] = std::move(bytes);
    return llvm::Error::success();
  };
  for (const auto &[key, value] : *vocab) {
    auto id = value.getAsInteger();
    if (!id) return r.fail("model.vocab", "the id of '" + key.str() + "' is not an integer");
    std::string bytes = byteLevelBytes(key).value_or(key.str());
    if (auto e = place(*id, bytes)) return e;
    idOfBytes[bytes] = int32_t(*id);
  }
  for (int b = 0; b < 256; ++b) {
    auto it = idOfBytes.find(llvm::StringRef(std::string(1, char(b))));
    if (it == idOfBytes.end())
      return r.fail("model.vocab", llvm::formatv("has no token for byte {0:x2}; a byte-level vocabulary has all 256", b).str());
    byteId[size_t(b)] = it->second;
  }

  // Merges: "a b" strings or [a, b] pairs, in rank order.
  const json::Array *list = model->getArray("merges");
  if (!list) return r.fail("model.merges", "missing (a list)");
  for (size_t rank = 0; rank < list->size(); ++rank) {
    const json::Value &m = (*list)[rank];
    std::string a, b;
    if (auto s = m.getAsString()) {
      auto [l, rr] = s->split(' ');
      a = l.str();
      b = rr.str();
    } else if (const json::Array *pair = m.getAsArray(); pair && pair->size() == 2 && (*pair)[0].getAsString() &&
                                                          (*pair)[1].getAsString()) {
      a = (*pair)[0].getAsString()->str();
      b = (*pair)[1].getAsString()->str();
    } else {
      return r.fail("model.merges[" + std::to_string(rank) + "]", "expected \"a b\" or [\"a\", \"b\"]");
    }
    std::string ab = byteLevelBytes(a).value_or(a), bb = byteLevelBytes(b).value_or(b);
    auto ia = idOfBytes.find(ab), ib = idOfBytes.find(bb), im = idOfBytes.find(ab + bb);
    if (ia == idOfBytes.end() || ib == idOfBytes.end() || im == idOfBytes.end())
      return r.fail("model.merges[" + std::to_string(rank) + "]", "'" + a + " " + b + "' merges tokens not in the vocabulary");
    merges.try_emplace(pairKey(ia->second, ib->second), int32_t(rank), im->second);
  }

  // Added tokens: matched in the text before anything else.
  if (const json::Array *list = root.getArray("added_tokens")) {
    for (size_t i = 0; i < list->size(); ++i) {
      std::string field = "added_tokens[" + std::to_string(i) + "]";
      const json::Object *o = (*list)[i].getAsObject();
      auto id = o ? o->getInteger("id") : llvm::None;
      auto content = o ? o->getString("content") : llvm::None;
      if (!id || !content || content->empty()) return r.fail(field, "expected an object with an id and a non-empty content");
      for (llvm::StringRef f : {"single_word", "lstrip", "rstrip"})
        if (flag(*o, f, false)) return r.fail(field + "." + f, "true is not supported");
      if (auto e = place(*id, byteLevelBytes(*content).value_or(content->str()))) return e;
      added.push_back({content->str(), int32_t(*id)});
    }
  }
  llvm::stable_sort(added, [](const AddedToken &a, const AddedToken &b) { return a.content.size() > b.content.size(); });
  for (size_t i = 0; i < added.size(); ++i) addedByFirstByte[static_cast<uint8_t>(added[i].content[0])].push_back(i);
  if (tokenBytes.empty()) return r.fail("model.vocab", "is empty");
  return readPostProcessor(root, r);
}

// A TemplateProcessing post-processor (alone or in a Sequence) whose single-sequence template starts with a
// special token adds that token as BOS (Llama 3's <|begin_of_text|>); tokenizer_config.json may override.
llvm::Error BpeTokenizer::readPostProcessor(const json::Object &root, const JsonReader &r) {
  const json::Object *p = root.getObject("post_processor");
  if (!p) return llvm::Error::success();
  std::vector<const json::Object *> processors{p};
  if (text(p, "type") == "Sequence")
    if (const json::Array *list = p->getArray("processors")) {
      processors.clear();
      for (const json::Value &v : *list)
        if (const json::Object *o = v.getAsObject()) processors.push_back(o);
    }
  for (const json::Object *o : processors) {
    if (text(o, "type") != "TemplateProcessing") continue;
    const json::Array *single = o->getArray("single");
    const json::Object *first = single && !single->empty() ? (*single)[0].getAsObject() : nullptr;
    const json::Object *tok = first ? first->getObject("SpecialToken") : nullptr;
    llvm::StringRef content = text(tok, "id");
    if (content.empty()) continue;
    auto a = llvm::find_if(added, [&](const AddedToken &a) { return a.content == content; });
    if (a == added.end()) return r.fail("post_processor.single", "'" + content + "' is not an added token");
    special.bos = a->id;
    special.addBos = true;
  }
  return llvm::Error::success();
}

// ---- encoding -----------------------------------------------------------------------------------------

llvm::Expected<std::vector<int32_t>> BpeTokenizer::encode(llvm::StringRef text) const {
  if (size_t bad = utf8::firstInvalid(text); bad != llvm::StringRef::npos)
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "text is not valid UTF-8 at byte %zu", bad);
  std::vector<int32_t> out;
  size_t segment = 0; // start of the text not yet encoded
  for (size_t i = 0; i < text.size();) {
    const AddedToken *hit = nullptr;
    for (size_t k : addedByFirstByte[static_cast<uint8_t>(text[i])]) // longest first
      if (text.substr(i).startswith(added[k].content)) {
        hit = &added[k];
        break;
      }
    if (!hit) {
      ++i;
      continue;
    }
    encodeSegment(text.slice(segment, i), out);
    out.push_back(hit->id);
    i += hit->content.size();
    segment = i;
  }
  encodeSegment(text.substr(segment), out);
  return out;
}

void BpeTokenizer::encodeSegment(llvm::StringRef text, std::vector<int32_t> &out) const {
  if (text.empty()) return;
  std::string normalized;
  if (normalizeNfc) {
    normalized = tok::nfc(text);
    text = normalized;
  }
  std::vector<std::string> pieces{text.str()};
  for (const PreStep &s : steps) {
    std::vector<std::string> next;
    for (std::string &p : pieces) {
      if (s.kind == PreStep::Kind::ByteLevel && s.addPrefixSpace && !llvm::StringRef(p).startswith(" "))
        p.insert(p.begin(), ' ');
      if (!s.regex) {
        next.push_back(std::move(p));
        continue;
      }
      size_t last = 0;
      // ByteLevel keeps only what its regex matches (its pattern matches everything); Split keeps the gaps.
      s.regex->forEachMatch(p, [&](size_t begin, size_t end) {
        if (s.kind == PreStep::Kind::Split && begin > last) next.push_back(p.substr(last, begin - last));
        if (s.keepMatches) next.push_back(p.substr(begin, end - begin));
        last = end;
      });
      if (s.kind == PreStep::Kind::Split && last < p.size()) next.push_back(p.substr(last));
    }
    pieces = std::move(next);
  }
  for (const std::string &p : pieces) encodePiece(p, out);
}

void BpeTokenizer::encodePiece(llvm::StringRef bytes, std::vector<int32_t> &out) const {
  if (bytes.empty()) return;
  if (ignoreMerges) {
    auto it = idOfBytes.find(bytes);
    if (it != idOfBytes.end()) {
      out.push_back(it->second);
      return;
    }
  }
  // Symbols as a linked list over the bytes; a queue of candidate merges ordered by (rank, position).
  struct Symbol {
    int32_t id;
    int prev, next;
    int len; // bytes covered; 0 once merged into its left neighbour
  };
  std::vector<Symbol> sym(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i)
    sym[i] = {byteId[static_cast<uint8_t>(bytes[i])], int(i) - 1, i + 1 < bytes.size() ? int(i) + 1 : -1, 1};
  using Candidate = std::tuple<int32_t, int, int32_t, int32_t>; // rank, left position, left id, right id
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto consider = [&](int left) {
    if (left < 0 || sym[size_t(left)].next < 0) return;
    const Symbol &l = sym[size_t(left)], &r = sym[size_t(l.next)];
    auto it = merges.find(pairKey(l.id, r.id));
    if (it != merges.end()) queue.emplace(it->second.first, left, l.id, r.id);
  };
  for (size_t i = 0; i + 1 < bytes.size(); ++i) consider(int(i));
  while (!queue.empty()) {
    auto [rank, left, leftId, rightId] = queue.top();
    queue.pop();
    Symbol &l = sym[size_t(left)];
    // Stale when either side has changed since this pair was queued.
    if (l.len == 0 || l.id != leftId || l.next < 0 || sym[size_t(l.next)].id != rightId) continue;
    Symbol &r = sym[size_t(l.next)];
    l.id = merges.find(pairKey(leftId, rightId))->second.second;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[size_t(r.next)].prev = left;
    consider(l.prev);
    consider(left);
  }
  for (int i = 0; i >= 0; i = sym[size_t(i)].next) out.push_back(sym[size_t(i)].id);
}

llvm::Expected<std::string> BpeTokenizer::decode(llvm::ArrayRef<int32_t> ids) const {
  std::string bytes;
  for (int32_t id : ids) {
    if (id < 0 || size_t(id) >= tokenBytes.size())
      return llvm::createStringError(llvm::inconvertibleErrorCode(), "token id %d is outside the vocabulary (0 to %zu)",
                                     id, tokenBytes.size() - 1);
    bytes += tokenBytes[size_t(id)];
  }
  return utf8::lossy(bytes);
}

} // namespace

llvm::Expected<std::unique_ptr<Tokenizer>> loadBpeTokenizer(llvm::StringRef path, const json::Object &root) {
  auto t = std::make_unique<BpeTokenizer>();
  if (auto e = t->load(root, path)) return e;
  return std::unique_ptr<Tokenizer>(std::move(t));
}

} // namespace minfer::tok
