// runtime/Api.cpp — the public C++ API (include/minfer/minfer.hpp) over rt::Engine and rt::Session.
#include "minfer/minfer.hpp"

#include "runtime/Engine.h"
#include "runtime/Session.h"

namespace minfer {
namespace {

Status toStatus(llvm::Error e) { return Status::failure(llvm::toString(std::move(e))); }

} // namespace

Result<Engine> Engine::load(const std::string &model, const EngineOptions &options) {
  rt::EngineOptions o;
  o.weights = options.weights;
  o.target = options.target;
  o.plan.maxBatch = options.maxBatch;
  o.plan.maxSeq = options.maxSeq;
  o.plan.maxPrefillRows = options.maxPrefillTokens;
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
  return i;
}

int64_t Engine::vocabSize() const { return impl->vocab(); }
int64_t Engine::maxBatch() const { return impl->plan().options.maxBatch; }
int64_t Engine::maxSeq() const { return impl->plan().options.maxSeq; }

Result<Generation> Session::generate(const std::vector<std::vector<int32_t>> &prompts,
                                     const GenerationOptions &options) {
  rt::GenerateOptions o;
  o.maxNewTokens = options.maxNewTokens;
  o.temperature = options.temperature;
  o.topK = options.topK;
  o.topP = options.topP;
  o.seed = options.seed;
  o.stopTokens = options.stopTokens;
  o.graph = options.cudaGraph;
  auto g = impl->generate(prompts, o);
  if (!g) return toStatus(g.takeError());
  Generation out;
  out.tokens = std::move(g->tokens);
  out.logits = std::move(g->logits);
  out.promptTokens = g->promptTokens;
  out.decodeSteps = g->decodeSteps;
  out.prefillMs = g->prefillMs;
  out.decodeMs = g->decodeMs;
  return out;
}

uint64_t Session::deviceBytes() const { return impl->memory().total(); }

const char *version() { return MINFER_VERSION; }

} // namespace minfer
