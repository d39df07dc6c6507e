// runtime/Api.cpp — the public C++ API (include/minfer/minfer.hpp) over rt::Engine and rt::Session.
#include "minfer/minfer.hpp"

#include "compiler/kernels/Persistent.h"
#include "io/Tokenizer.h"
#include "ir/Diagnostics.h"
#include "runtime/Engine.h"
#include "runtime/Session.h"

namespace minfer {
namespace {

Status toStatus(llvm::Error e) { return Status::failure(ir::clipMessage(llvm::toString(std::move(e)))); }

} // namespace

Result<Engine> Engine::load(const std::string &model, const EngineOptions &options) {
  rt::EngineOptions o;
  o.weights = options.weights;
  o.target = options.target;
  o.plan.maxBatch = options.maxBatch;
  o.plan.maxSeq = options.maxSeq;
  o.plan.maxPrefillRows = options.maxPrefillTokens;
  o.plan.weightRing = options.persistentWeightRing;
  o.jobs = options.compileJobs;
  o.cache = options.useCache;
  o.fuse = options.fuse;
  auto e = rt::Engine::load(model, o);
  if (!e) return toStatus(e.takeError());
  return Engine(std::shared_ptr<rt::Engine>(std::move(*e)));
}

Result<Session> Engine::createSession(const SessionOptions &options) const {
  rt::SessionOptions o;
  o.keepLogits = options.keepLogits;
  auto s = rt::Session::create(*impl, o);
  if (!s) return toStatus(s.takeError());
  return Session(impl, std::shared_ptr<rt::Session>(std::move(*s)));
}

LoadInfo Engine::loadInfo() const {
  const rt::LoadStats &s = impl->stats();
  LoadInfo i;
  i.source = s.source;
  i.device = impl->device().name;
  i.target = impl->plan().target.name;
  i.parseMs = s.parseMs;
  i.compileMs = s.compileMs;
  i.modulesMs = s.modulesMs;
  i.weightsMs = s.weightsMs;
  i.kernels = static_cast<unsigned>(impl->plan().kernels.size());
  i.cacheHits = s.compile.hits;
  i.compiled = s.compile.misses;
  i.weightBytes = s.weightBytes;
  const PersistentDecode &pd = impl->plan().persistent;
  i.persistentDecode = pd.built();
  if (pd.built()) i.weightRingBytes = static_cast<const PersistentDecodeSpec &>(*impl->plan().kernels[pd.kernel]).ringBytes;
  return i;
}

int64_t Engine::vocabSize() const { return impl->vocab(); }
int64_t Engine::maxBatch() const { return impl->plan().options.maxBatch; }
int64_t Engine::maxSeq() const { return impl->plan().options.maxSeq; }

Result<Tokenizer> Tokenizer::load(const std::string &dir) {
  auto t = tok::loadTokenizer(dir);
  if (!t) return toStatus(t.takeError());
  return Tokenizer(std::shared_ptr<const tok::Tokenizer>(std::move(*t)));
}

Result<std::vector<int32_t>> Tokenizer::encode(const std::string &text, bool addBos) const {
  auto ids = addBos ? impl->encodePrompt(text) : impl->encode(text);
  if (!ids) return toStatus(ids.takeError());
  return std::move(*ids);
}

Result<std::string> Tokenizer::decode(const std::vector<int32_t> &ids) const {
  auto text = impl->decode(ids);
  if (!text) return toStatus(text.takeError());
  return std::move(*text);
}

int64_t Tokenizer::vocabSize() const { return impl->vocabSize(); }
std::vector<int32_t> Tokenizer::eosTokens() const { return impl->special.eos; }

Result<Generation> Session::generate(const std::vector<std::vector<int32_t>> &prompts,
                                     const GenerationOptions &options) {
  const tok::Tokenizer *tokenizer = options.tokenizer ? options.tokenizer->impl.get() : nullptr;
  if (tokenizer && tokenizer->vocabSize() > engine->vocab())
    return Status::failure("generate: the tokenizer (" + tokenizer->describe() + ") has " +
                           std::to_string(tokenizer->vocabSize()) + " tokens but the model's vocabulary has " +
                           std::to_string(engine->vocab()));
  rt::GenerateOptions o;
  o.maxNewTokens = options.maxNewTokens;
  o.temperature = options.temperature;
  o.topK = options.topK;
  o.topP = options.topP;
  o.seed = options.seed;
  o.stopTokens = options.stopTokens;
  o.forcedTokens = options.forcedTokens;
  o.graph = options.cudaGraph;
  o.decode = options.decode == DecodePath::Persistent ? rt::DecodePath::Persistent : rt::DecodePath::Launches;
  std::vector<tok::TextStream> streams;
  if (tokenizer) {
    for (int32_t eos : tokenizer->special.eos)
      if (!llvm::is_contained(o.stopTokens, eos)) o.stopTokens.push_back(eos);
    for (size_t i = 0; i < prompts.size(); ++i) streams.emplace_back(*tokenizer);
  }
  llvm::Error callbackError = llvm::Error::success();
  if (options.onToken)
    o.onToken = [&](int64_t sequence, int32_t token) {
      TokenEvent ev{static_cast<size_t>(sequence), token, {}};
      if (tokenizer && !tokenizer->special.isEos(token)) {
        auto piece = streams[static_cast<size_t>(sequence)].push(token);
        if (!piece) {
          callbackError = llvm::joinErrors(std::move(callbackError), piece.takeError());
          return false;
        }
        ev.text = std::move(*piece);
      }
      return options.onToken(ev);
    };
  auto g = impl->generate(prompts, o);
  if (!g) {
    llvm::consumeError(std::move(callbackError));
    return toStatus(g.takeError());
  }
  if (callbackError) return toStatus(std::move(callbackError));
  if (options.onToken && tokenizer)
    for (size_t b = 0; b < streams.size(); ++b) {
      auto rest = streams[b].finish();
      if (!rest) return toStatus(rest.takeError());
      options.onToken(TokenEvent{b, -1, std::move(*rest), /*end=*/true});
    }
  Generation out;
  out.tokens = std::move(g->tokens);
  out.logits = std::move(g->logits);
  out.promptTokens = g->promptTokens;
  out.decodeSteps = g->decodeSteps;
  out.prefillMs = g->prefillMs;
  out.decodeMs = g->decodeMs;
  if (tokenizer)
    for (const std::vector<int32_t> &seq : out.tokens) {
      llvm::ArrayRef<int32_t> ids(seq);
      if (!ids.empty() && tokenizer->special.isEos(ids.back())) ids = ids.drop_back();
      auto text = tokenizer->decode(ids);
      if (!text) return toStatus(text.takeError());
      out.text.push_back(std::move(*text));
    }
  return out;
}

uint64_t Session::deviceBytes() const { return impl->memory().total(); }

const char *version() { return MINFER_VERSION; }

} // namespace minfer
