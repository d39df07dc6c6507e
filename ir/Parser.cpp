// ir/Parser.cpp — lexer and recursive-descent parser for minfer IR text (grammar in Parser.h).
// (Over 650 lines: one lexer and one recursive-descent parser over a single grammar, read top to bottom.)
#include "ir/Parser.h"

#include "ir/Diagnostics.h"
#include "ir/Limits.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

#include <cctype>
#include <charconv>

namespace minfer::ir {
namespace {

struct Token {
  enum Kind { Eof, Ident, ValueName, WeightName, Int, Float, String, Punct, Error } kind = Eof;
  llvm::StringRef text; // the whole token as written
  llvm::SMLoc loc() const { return llvm::SMLoc::getFromPointer(text.data()); }
  bool is(llvm::StringRef p) const { return (kind == Punct || kind == Ident) && text == p; }
  // For %name / @name / "string": the text without its sigil or quotes.
  llvm::StringRef body() const {
    if (kind == ValueName || kind == WeightName) return text.drop_front();
    if (kind == String) return text.drop_front().drop_back();
    return text;
  }
};

bool isIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }

class Lexer {
public:
  explicit Lexer(llvm::StringRef buf) : buf(buf), pos(0) {}

  Token next() {
    skipSpaceAndComments();
    Token t;
    if (pos >= buf.size()) {
      t.kind = Token::Eof;
      t.text = buf.substr(buf.size());
      return t;
    }
    size_t start = pos;
    char c = buf[pos];
    if (c == '%' || c == '@') {
      ++pos;
      while (pos < buf.size() && isIdentChar(buf[pos])) ++pos;
      t.kind = pos - start > 1 ? (c == '%' ? Token::ValueName : Token::WeightName) : Token::Error;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      while (pos < buf.size() && isIdentChar(buf[pos])) ++pos;
      t.kind = Token::Ident;
    } else if (std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '+') {
      t.kind = lexNumber();
    } else if (c == '"') {
      ++pos;
      while (pos < buf.size() && buf[pos] != '"' && buf[pos] != '\n') ++pos;
      if (pos < buf.size() && buf[pos] == '"') {
        ++pos;
        t.kind = Token::String;
      } else {
        t.kind = Token::Error; // unterminated string
      }
    } else if (llvm::StringRef("()[]{},:=").contains(c)) {
      ++pos;
      t.kind = Token::Punct;
    } else {
      ++pos;
      t.kind = Token::Error;
    }
    t.text = buf.slice(start, pos);
    return t;
  }

private:
  void skipSpaceAndComments() {
    while (pos < buf.size()) {
      if (std::isspace(static_cast<unsigned char>(buf[pos]))) {
        ++pos;
      } else if (buf.substr(pos).startswith("//")) {
        while (pos < buf.size() && buf[pos] != '\n') ++pos;
      } else {
        break;
      }
    }
  }

  Token::Kind lexNumber() {
    size_t start = pos;
    if (buf[pos] == '-' || buf[pos] == '+') ++pos;
    bool isFloat = false;
    auto digits = [&] {
      size_t b = pos;
      while (pos < buf.size() && std::isdigit(static_cast<unsigned char>(buf[pos]))) ++pos;
      return pos > b;
    };
    bool any = digits();
    if (pos < buf.size() && buf[pos] == '.') {
      ++pos;
      isFloat = true;
      any |= digits();
    }
    if (any && pos < buf.size() && (buf[pos] == 'e' || buf[pos] == 'E')) {
      ++pos;
      if (pos < buf.size() && (buf[pos] == '-' || buf[pos] == '+')) ++pos;
      if (!digits()) return Token::Error;
      isFloat = true;
    }
    if (!any) {
      pos = start + 1;
      return Token::Error;
    }
    if (pos < buf.size() && isIdentChar(buf[pos])) { // `12abc`
      while (pos < buf.size() && isIdentChar(buf[pos])) ++pos;
      return Token::Error;
    }
    return isFloat ? Token::Float : Token::Int;
  }

  llvm::StringRef buf;
  size_t pos;
};

class Parser {
public:
  Parser(std::shared_ptr<llvm::SourceMgr> sm, unsigned bufferId)
      : sm(std::move(sm)), lex(this->sm->getMemoryBuffer(bufferId)->getBuffer()) {
    tok = lex.next();
  }

  llvm::Expected<std::unique_ptr<Module>> parse();

private:
  // ----- tokens
  llvm::Error errorAt(llvm::SMLoc loc, const llvm::Twine &msg, llvm::SMLoc noteLoc = {},
                      const llvm::Twine &note = "") {
    return diagnosticAt(*sm, loc, msg, noteLoc, note);
  }
  llvm::Error errorHere(const llvm::Twine &msg) {
    if (tok.kind == Token::Error) return errorAt(tok.loc(), "invalid token '" + tok.text + "'");
    return errorAt(tok.loc(), msg);
  }
  std::string describe(const Token &t) {
    return t.kind == Token::Eof ? std::string("end of file") : ("'" + t.text + "'").str();
  }
  llvm::Error expected(const llvm::Twine &what) {
    return errorHere("expected " + what + ", found " + describe(tok));
  }
  void advance() { tok = lex.next(); }
  bool consumeIf(llvm::StringRef p) {
    if (!tok.is(p)) return false;
    advance();
    return true;
  }
  llvm::Error expect(llvm::StringRef p, llvm::StringRef context = "") {
    if (consumeIf(p)) return llvm::Error::success();
    return expected(("'" + p + "'" + (context.empty() ? "" : " " + context)).str());
  }
  // `[item, item, ...]`, possibly empty, each item read by `item()` (an llvm::Error); `opening` and `closing`
  // say where a missing bracket was expected.
  template <typename Item> llvm::Error parseList(llvm::StringRef opening, llvm::StringRef closing, Item item) {
    if (auto e = expect("[", opening)) return e;
    if (!tok.is("]")) {
      do {
        if (auto e = item()) return e;
      } while (consumeIf(","));
    }
    return expect("]", closing);
  }
  llvm::Expected<Token> expectKind(Token::Kind k, llvm::StringRef what) {
    if (tok.kind != k) return expected(what);
    Token t = tok;
    advance();
    return t;
  }

  // ----- grammar
  llvm::Error parseDim();
  llvm::Error parseWeight();
  llvm::Error parsePackedWeight(std::string name, Type type, llvm::SMLoc loc);
  llvm::Error parseGraph();
  llvm::Expected<Type> parseType();
  llvm::Expected<Dim> parseShapeDim();
  llvm::Expected<int64_t> parseInt(const Token &t);
  llvm::Expected<IntRef> parseIntRef();
  llvm::Error parseItem(std::vector<Item> *items, std::vector<Op> *body);
  llvm::Error parseOp(const std::vector<Token> &resultToks, std::vector<Op> &out);
  llvm::Error parseRepeat(const std::vector<Token> &resultToks, std::vector<Item> &out);
  llvm::Error parseAttr(const OpInfo &info, Op &op);
  llvm::Expected<ValueId> useValue();
  llvm::Expected<ValueId> defineValue(const Token &t, Type type);

  std::shared_ptr<llvm::SourceMgr> sm;
  Lexer lex;
  Token tok;
  std::unique_ptr<Module> m;
  llvm::StringMap<ValueId> scope;       // values visible here
  llvm::StringMap<llvm::SMLoc> defined; // every value name ever defined, for redefinition errors
};

llvm::Expected<int64_t> Parser::parseInt(const Token &t) {
  int64_t v = 0;
  llvm::StringRef s = t.text;
  bool neg = s.consume_front("-");
  s.consume_front("+");
  if (s.getAsInteger(10, v) || v > limits::kMaxInt)
    return errorAt(t.loc(), "integer '" + t.text + "' is out of range (at most " + std::to_string(limits::kMaxInt) +
                                " in magnitude)");
  return neg ? -v : v;
}

llvm::Expected<IntRef> Parser::parseIntRef() {
  if (tok.kind == Token::Int) {
    Token t = tok;
    advance();
    auto v = parseInt(t);
    if (!v) return v.takeError();
    return IntRef{*v, {}};
  }
  if (tok.kind == Token::Ident) {
    const DimDecl *d = m->findDim(tok.text);
    if (!d) return errorHere("unknown dim '" + tok.text + "'");
    IntRef r{d->value, d->name};
    advance();
    return r;
  }
  return expected("an integer or a dim name");
}

llvm::Expected<Dim> Parser::parseShapeDim() {
  if (tok.is("T")) {
    advance();
    return Dim::tokens();
  }
  if (tok.is("S")) {
    advance();
    return Dim::context();
  }
  auto r = parseIntRef();
  if (!r) return r.takeError();
  if (r->value < 0) return errorAt(tok.loc(), "a dim must not be negative");
  return r->dim.empty() ? Dim::constant(r->value) : Dim::named(r->dim, r->value);
}

llvm::Expected<Type> Parser::parseType() {
  if (tok.kind != Token::Ident) return expected("a type such as bf16[T, hidden]");
  auto dt = parseDType(tok.text);
  if (!dt) return errorHere("unknown element type '" + tok.text + "'; expected bf16, f16, f32 or i32");
  advance();
  Type type{*dt, {}};
  if (auto e = parseList("after the element type", "to close the shape", [&]() -> llvm::Error {
        auto d = parseShapeDim();
        if (!d) return d.takeError();
        type.shape.push_back(*d);
        return llvm::Error::success();
      }))
    return e;
  return type;
}

llvm::Error Parser::parseDim() {
  advance(); // 'dim'
  auto name = expectKind(Token::Ident, "a dim name");
  if (!name) return name.takeError();
  if (name->text == "T" || name->text == "S")
    return errorAt(name->loc(), "'" + name->text + "' is reserved: T is the tokens of a step, S the context");
  if (const DimDecl *prev = m->findDim(name->text))
    return errorAt(name->loc(), "redefinition of dim '" + name->text + "'", prev->loc, "previous definition is here");
  if (auto e = expect("=")) return e;
  auto valTok = expectKind(Token::Int, "an integer value");
  if (!valTok) return valTok.takeError();
  auto v = parseInt(*valTok);
  if (!v) return v.takeError();
  if (*v <= 0) return errorAt(valTok->loc(), "dim '" + name->text + "' must be positive, got " + valTok->text);
  m->dims.push_back(DimDecl{name->text.str(), *v, name->loc()});
  return llvm::Error::success();
}

llvm::Error Parser::parseWeight() {
  advance(); // 'weight'
  auto name = expectKind(Token::WeightName, "a weight name such as @wq");
  if (!name) return name.takeError();
  int prev = m->findWeight(name->body());
  if (prev >= 0)
    return errorAt(name->loc(), "redefinition of weight '" + name->text + "'", m->weights[prev].loc,
                   "previous definition is here");
  if (auto e = expect(":", "after the weight name")) return e;
  auto type = parseType();
  if (!type) return type.takeError();
  if (auto e = expect("=", "before the tensor name")) return e;
  if (tok.is("concat")) return parsePackedWeight(name->body().str(), *type, name->loc());
  bool transposed = false;
  if (tok.is("transpose")) {
    transposed = true;
    advance();
  }
  auto tensor = expectKind(Token::String, "a quoted safetensors tensor name");
  if (!tensor) return tensor.takeError();
  if (tensor->body().empty()) return errorAt(tensor->loc(), "empty tensor name");
  WeightDecl w;
  w.name = name->body().str();
  w.type = *type;
  w.tensor = tensor->body().str();
  w.transposed = transposed;
  w.loc = name->loc();
  m->weights.push_back(std::move(w));
  return llvm::Error::success();
}

// `concat(@a, @b, ...)`: the rows of earlier weights stacked; they must agree in dtype, columns and being
// per-layer, and the declared type must be the stack.
llvm::Error Parser::parsePackedWeight(std::string name, Type type, llvm::SMLoc loc) {
  advance(); // 'concat'
  if (auto e = expect("(", "after concat")) return e;
  std::vector<int> parts;
  int64_t rows = 0;
  do {
    auto part = expectKind(Token::WeightName, "a weight name such as @wq");
    if (!part) return part.takeError();
    int w = m->findWeight(part->body());
    if (w < 0) return errorAt(part->loc(), "use of undeclared weight '" + part->text + "'");
    const WeightDecl &d = m->weights[w];
    if (d.packed()) return errorAt(part->loc(), "'" + part->text + "' is packed itself; list its parts instead");
    if (!parts.empty()) {
      const WeightDecl &first = m->weights[parts[0]];
      if (d.type.dtype != first.type.dtype || d.type.rank() != first.type.rank() ||
          (d.type.rank() == 2 && d.type.shape[1].value != first.type.shape[1].value) || d.perLayer() != first.perLayer())
        return errorAt(part->loc(), "'" + part->text + "' " + d.type.str() + " cannot be stacked under @" +
                                        first.name + " " + first.type.str() +
                                        ": packed parts need the same dtype, columns and per-layer binding");
    }
    rows += d.type.shape.empty() ? 0 : d.type.shape[0].value;
    parts.push_back(w);
  } while (consumeIf(","));
  if (auto e = expect(")", "to close concat")) return e;
  const WeightDecl &first = m->weights[parts[0]];
  Type want = first.type;
  if (!want.shape.empty()) want.shape[0] = Dim::constant(rows);
  if (type.dtype != want.dtype || type.rank() != want.rank() || type.shape[0].value != rows ||
      (type.rank() == 2 && type.shape[1].value != want.shape[1].value))
    return errorAt(loc, "packed weight '@" + name + "' is declared " + type.str() + " but its parts stack to " + want.str());
  WeightDecl w;
  w.name = std::move(name);
  w.type = type;
  w.loc = loc;
  w.parts = std::move(parts);
  w.packedPerLayer = first.perLayer();
  m->weights.push_back(std::move(w));
  return llvm::Error::success();
}

llvm::Expected<ValueId> Parser::useValue() {
  if (tok.kind != Token::ValueName) return expected("a value such as %x");
  auto it = scope.find(tok.body());
  if (it == scope.end()) {
    if (defined.count(tok.body()))
      return errorHere("value '" + tok.text + "' is not visible here (defined inside a repeat body)");
    return errorHere("use of undefined value '" + tok.text + "'");
  }
  advance();
  return it->second;
}

llvm::Expected<ValueId> Parser::defineValue(const Token &t, Type type) {
  auto prev = defined.find(t.body());
  if (prev != defined.end())
    return errorAt(t.loc(), "redefinition of value '" + t.text + "'", prev->second, "previous definition is here");
  ValueId id = m->addValue(t.body().str(), std::move(type), t.loc());
  defined[t.body()] = t.loc();
  scope[t.body()] = id;
  return id;
}

llvm::Error Parser::parseAttr(const OpInfo &info, Op &op) {
  auto name = expectKind(Token::Ident, "an attribute name");
  if (!name) return name.takeError();
  int idx = info.attrIndex(name->text);
  if (idx < 0) {
    std::string known = llvm::join(llvm::map_range(info.attrs, [](const AttrSpec &a) { return a.name; }), ", ");
    return errorAt(name->loc(), "op '" + info.mnemonic + "' has no attribute '" + name->text + "'" +
                                    (known.empty() ? std::string(" (it takes none)") : "; expected one of: " + known));
  }
  if (op.attrs[idx]) return errorAt(name->loc(), "attribute '" + name->text + "' given twice");
  if (auto e = expect("=", "after the attribute name")) return e;
  const AttrSpec &spec = info.attrs[idx];
  AttrValue v;
  v.kind = spec.kind;
  switch (spec.kind) {
  case AttrKind::Int: {
    auto r = parseIntRef();
    if (!r) return r.takeError();
    v.i = *r;
    break;
  }
  case AttrKind::Float: {
    if (tok.kind != Token::Float && tok.kind != Token::Int)
      return expected("a number for attribute '" + spec.name + "'");
    double d = 0;
    llvm::StringRef s = tok.text;
    s.consume_front("+");
    auto [ptr, ec] = std::from_chars(s.begin(), s.end(), d);
    if (ec != std::errc() || ptr != s.end()) return errorHere("number '" + tok.text + "' is out of range");
    v.f = d;
    advance();
    break;
  }
  case AttrKind::Enum: {
    auto choices = spec.choices();
    if (tok.kind != Token::Ident || !llvm::is_contained(choices, tok.text))
      return expected("one of " + llvm::join(choices, ", ") + " for attribute '" + spec.name + "'");
    v.choice = static_cast<int>(llvm::find(spec.texts, tok.text) - spec.texts.begin());
    advance();
    break;
  }
  case AttrKind::Ints: {
    if (auto e = parseList("to open the list", "to close the list", [&]() -> llvm::Error {
          auto r = parseIntRef();
          if (!r) return r.takeError();
          v.ints.push_back(*r);
          return llvm::Error::success();
        }))
      return e;
    break;
  }
  }
  op.attrs[idx] = std::move(v);
  return llvm::Error::success();
}

llvm::Error Parser::parseOp(const std::vector<Token> &resultToks, std::vector<Op> &out) {
  Token mn = tok;
  const OpInfo *info = lookupOp(tok.text);
  if (!info) return errorHere("unknown op '" + tok.text + "'");
  advance();
  Op op{info->kind, {}, {}, {}, mn.loc()};
  op.attrs.resize(info->attrs.size());

  // Operands, checked against the table's signature.
  while (tok.kind == Token::ValueName || tok.kind == Token::WeightName) {
    size_t i = op.operands.size();
    if (i >= info->operands.size())
      return errorHere("too many operands for '" + info->mnemonic + "': it takes " +
                       std::to_string(info->operands.size()));
    const OperandSpec &spec = info->operands[i];
    if (spec.isWeight != (tok.kind == Token::WeightName))
      return errorHere("operand " + std::to_string(i + 1) + " ('" + spec.name + "') of '" + info->mnemonic +
                       "' must be " + (spec.isWeight ? "a weight (@name)" : "a value (%name)"));
    if (spec.isWeight) {
      int w = m->findWeight(tok.body());
      if (w < 0) return errorHere("use of undeclared weight '" + tok.text + "'");
      op.operands.push_back(Operand{true, w});
      advance();
    } else {
      auto v = useValue();
      if (!v) return v.takeError();
      op.operands.push_back(Operand{false, *v});
    }
    if (!consumeIf(",")) break;
  }
  if (op.operands.size() < info->minOperands()) {
    std::string sig;
    for (const OperandSpec &s : info->operands)
      sig += (sig.empty() ? "" : ", ") + std::string(s.isWeight ? "@" : "%") + s.name + (s.optional ? "?" : "");
    return errorAt(mn.loc(), "'" + info->mnemonic + "' takes " + sig + "; got " +
                                 std::to_string(op.operands.size()) + " operand(s)");
  }

  if (consumeIf("{")) {
    if (!tok.is("}")) {
      do {
        if (auto e = parseAttr(*info, op)) return e;
      } while (consumeIf(","));
    }
    if (auto e = expect("}", "to close the attributes")) return e;
  }
  for (size_t i = 0; i < info->attrs.size(); ++i)
    if (!info->attrs[i].optional && !op.attrs[i])
      return errorAt(mn.loc(), "'" + info->mnemonic + "' needs attribute '" + info->attrs[i].name + "' (" +
                                   info->attrs[i].kindStr() + ")");

  // Result types: one per result name.
  if (auto e = expect(":", "before the result type")) return e;
  std::vector<Type> types;
  do {
    auto t = parseType();
    if (!t) return t.takeError();
    types.push_back(*t);
  } while (consumeIf(","));
  if (types.size() != resultToks.size())
    return errorAt(mn.loc(), std::to_string(resultToks.size()) + " result name(s) but " +
                                 std::to_string(types.size()) + " result type(s)");
  if (info->results > 0 && resultToks.size() != static_cast<size_t>(info->results))
    return errorAt(resultToks[0].loc(), "'" + info->mnemonic + "' has exactly " + std::to_string(info->results) +
                                            " result(s), got " + std::to_string(resultToks.size()));
  for (size_t i = 0; i < resultToks.size(); ++i) {
    auto id = defineValue(resultToks[i], types[i]);
    if (!id) return id.takeError();
    op.results.push_back(*id);
  }
  out.push_back(std::move(op));
  return llvm::Error::success();
}

llvm::Error Parser::parseRepeat(const std::vector<Token> &resultToks, std::vector<Item> &out) {
  Token kw = tok;
  advance(); // 'repeat'
  Repeat r;
  r.loc = kw.loc();
  auto count = parseIntRef();
  if (!count) return count.takeError();
  r.count = *count;
  if (auto e = expect("(", "before the carried values")) return e;
  std::vector<Token> carriedToks;
  do {
    if (tok.kind != Token::ValueName) return expected("a carried value such as %x");
    carriedToks.push_back(tok);
    advance();
    if (auto e = expect("=", "after the carried value")) return e;
    auto init = useValue();
    if (!init) return init.takeError();
    r.inits.push_back(*init);
  } while (consumeIf(","));
  if (auto e = expect(")")) return e;
  if (resultToks.size() != carriedToks.size())
    return errorAt(kw.loc(), "repeat carries " + std::to_string(carriedToks.size()) + " value(s) but defines " +
                                 std::to_string(resultToks.size()) + " result(s)");

  // The body sees everything visible here plus the carried values; its own values stay inside.
  llvm::StringMap<ValueId> outer = scope;
  for (size_t i = 0; i < carriedToks.size(); ++i) {
    auto id = defineValue(carriedToks[i], m->value(r.inits[i]).type);
    if (!id) return id.takeError();
    r.carried.push_back(*id);
  }
  if (auto e = expect("{", "to open the repeat body")) return e;
  while (!tok.is("yield")) {
    if (tok.kind == Token::Eof || tok.is("}")) return expected("'yield' at the end of the repeat body");
    if (tok.is("repeat")) return errorHere("repeat blocks do not nest");
    if (auto e = parseItem(nullptr, &r.body)) return e;
  }
  Token yieldTok = tok;
  advance();
  do {
    auto v = useValue();
    if (!v) return v.takeError();
    r.yields.push_back(*v);
  } while (consumeIf(","));
  if (r.yields.size() != r.carried.size())
    return errorAt(yieldTok.loc(), "yield gives " + std::to_string(r.yields.size()) + " value(s) but the repeat carries " +
                                       std::to_string(r.carried.size()));
  if (auto e = expect("}", "to close the repeat body")) return e;
  scope = std::move(outer);

  for (size_t i = 0; i < resultToks.size(); ++i) {
    auto id = defineValue(resultToks[i], m->value(r.inits[i]).type);
    if (!id) return id.takeError();
    r.results.push_back(*id);
  }
  out.push_back(std::move(r));
  return llvm::Error::success();
}

// item := %a[, %b] = (op | repeat)
llvm::Error Parser::parseItem(std::vector<Item> *items, std::vector<Op> *body) {
  std::vector<Token> results;
  do {
    if (tok.kind != Token::ValueName) return expected("a result name such as %x, 'repeat', or 'return'");
    results.push_back(tok);
    advance();
  } while (consumeIf(","));
  if (auto e = expect("=", "after the result name")) return e;
  if (tok.kind != Token::Ident) return expected("an op name");
  if (tok.is("repeat")) {
    if (!items) return errorHere("repeat blocks do not nest");
    return parseRepeat(results, *items);
  }
  if (body) return parseOp(results, *body);
  std::vector<Op> ops;
  if (auto e = parseOp(results, ops)) return e;
  items->push_back(std::move(ops.front()));
  return llvm::Error::success();
}

llvm::Error Parser::parseGraph() {
  m->loc = tok.loc();
  advance(); // 'graph'
  if (auto e = expect("(", "before the graph inputs")) return e;
  if (!tok.is(")")) {
    do {
      if (tok.kind != Token::ValueName) return expected("a graph input such as %tokens");
      Token name = tok;
      advance();
      if (auto e = expect(":", "after the input name")) return e;
      auto type = parseType();
      if (!type) return type.takeError();
      auto id = defineValue(name, *type);
      if (!id) return id.takeError();
      m->inputs.push_back(*id);
    } while (consumeIf(","));
  }
  if (auto e = expect(")", "after the graph inputs")) return e;
  if (auto e = expect("{", "to open the graph")) return e;
  while (!tok.is("return")) {
    if (tok.kind == Token::Eof || tok.is("}")) return expected("'return' at the end of the graph");
    if (auto e = parseItem(&m->items, nullptr)) return e;
  }
  m->returnLoc = tok.loc();
  advance();
  do {
    auto v = useValue();
    if (!v) return v.takeError();
    m->outputs.push_back(*v);
  } while (consumeIf(","));
  if (auto e = expect("}", "to close the graph")) return e;
  if (tok.kind != Token::Eof) return expected("end of file after the graph");
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<Module>> Parser::parse() {
  m = std::make_unique<Module>();
  m->source = sm;
  if (auto e = expect("model", "at the start of the module")) return e;
  auto name = expectKind(Token::String, "the model name as a quoted string");
  if (!name) return name.takeError();
  m->name = name->body().str();
  while (!tok.is("graph")) {
    if (tok.is("dim")) {
      if (auto e = parseDim()) return e;
    } else if (tok.is("weight")) {
      if (auto e = parseWeight()) return e;
    } else {
      return expected("'dim', 'weight' or 'graph'");
    }
  }
  if (auto e = parseGraph()) return e;
  return std::move(m);
}

} // namespace

llvm::Expected<std::unique_ptr<Module>> parseModule(std::unique_ptr<llvm::MemoryBuffer> buffer) {
  auto sm = std::make_shared<llvm::SourceMgr>();
  unsigned id = sm->AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());
  return Parser(sm, id).parse();
}

llvm::Expected<std::unique_ptr<Module>> parseModuleString(llvm::StringRef text, llvm::StringRef bufferName) {
  return parseModule(llvm::MemoryBuffer::getMemBufferCopy(text, bufferName));
}

llvm::Expected<std::unique_ptr<Module>> parseModuleFile(llvm::StringRef path) {
  auto buf = llvm::MemoryBuffer::getFileOrSTDIN(path, /*IsText=*/true);
  if (!buf)
    return llvm::createStringError(buf.getError(), "cannot read '" + path + "': " + buf.getError().message());
  return parseModule(std::move(*buf));
}

} // namespace minfer::ir
