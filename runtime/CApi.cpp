// runtime/CApi.cpp — the C API (include/minfer/minfer.h) over the C++ API.
#include "minfer/minfer.h"
#include "minfer/minfer.hpp"

#include <string>
#include <vector>

struct minfer_error {
  std::string message;
};
struct minfer_engine {
  minfer::Engine engine;
};
struct minfer_session {
  minfer::Session session;
};
struct minfer_tokenizer {
  minfer::Tokenizer tokenizer;
};

namespace {

minfer_error *error(std::string message) { return new minfer_error{std::move(message)}; }

// Both generate entry points, once their pointers are checked; `who` names the one called in errors.
minfer_error *generate(const std::string &who, minfer_session *session, const int32_t *const *prompts,
                       const size_t *promptLens, size_t batch, const minfer_generation_options *options,
                       int32_t *tokens, size_t capacity, size_t *counts) {
  minfer_generation_options defaults;
  minfer_generation_options_init(&defaults);
  const minfer_generation_options &o = options ? *options : defaults;
  if (o.max_new_tokens < 0 || capacity < static_cast<size_t>(o.max_new_tokens))
    return error(who + ": room for " + std::to_string(capacity) + " tokens, but max_new_tokens is " +
                 std::to_string(o.max_new_tokens));
  minfer::GenerationOptions go;
  go.maxNewTokens = o.max_new_tokens;
  go.temperature = o.temperature;
  go.topK = o.top_k;
  go.topP = o.top_p;
  go.seed = o.seed;
  if (o.stop_tokens) go.stopTokens.assign(o.stop_tokens, o.stop_tokens + o.num_stop_tokens);
  go.cudaGraph = o.cuda_graph != 0;
  switch (o.decode_path) {
  case MINFER_DECODE_LAUNCHES: go.decode = minfer::DecodePath::Launches; break;
  case MINFER_DECODE_PERSISTENT: go.decode = minfer::DecodePath::Persistent; break;
  default:
    return error(who + ": decode_path is " + std::to_string(o.decode_path) +
                 "; expected MINFER_DECODE_LAUNCHES (0) or MINFER_DECODE_PERSISTENT (1)");
  }
  if (o.tokenizer) go.tokenizer = &o.tokenizer->tokenizer;
  if (o.on_token)
    go.onToken = [&o](const minfer::TokenEvent &t) {
      return o.on_token(o.user_data, t.sequence, t.token, t.text.data(), t.text.size()) != 0;
    };
  std::vector<std::vector<int32_t>> ps;
  for (size_t i = 0; i < batch; ++i) ps.emplace_back(prompts[i], prompts[i] + promptLens[i]);
  auto g = session->session.generate(ps, go);
  if (!g) return error(g.error());
  for (size_t i = 0; i < batch; ++i) {
    const std::vector<int32_t> &t = g->tokens[i];
    std::copy(t.begin(), t.end(), tokens + i * capacity);
    counts[i] = t.size();
  }
  return nullptr;
}

} // namespace

extern "C" {

const char *minfer_error_message(const minfer_error *e) { return e ? e->message.c_str() : ""; }
void minfer_error_free(minfer_error *e) { delete e; }

void minfer_engine_options_init(minfer_engine_options *o) {
  if (!o) return;
  *o = minfer_engine_options{};
  o->max_batch = 1;
}

minfer_error *minfer_engine_load(const char *model, const minfer_engine_options *options, minfer_engine **out) {
  if (!model || !out) return error("minfer_engine_load: model and engine must not be NULL");
  minfer::EngineOptions o;
  if (options) {
    o.weights = options->weights ? options->weights : "";
    o.target = options->target ? options->target : "";
    o.maxBatch = options->max_batch;
    o.maxSeq = options->max_seq;
    o.maxPrefillTokens = options->max_prefill_tokens;
  }
  auto e = minfer::Engine::load(model, o);
  if (!e) return error(e.error());
  *out = new minfer_engine{std::move(*e)};
  return nullptr;
}

void minfer_engine_free(minfer_engine *e) { delete e; }

int64_t minfer_engine_vocab_size(const minfer_engine *e) { return e ? e->engine.vocabSize() : 0; }

minfer_error *minfer_session_create(minfer_engine *engine, minfer_session **out) {
  if (!engine || !out) return error("minfer_session_create: engine and session must not be NULL");
  auto s = engine->engine.createSession();
  if (!s) return error(s.error());
  *out = new minfer_session{std::move(*s)};
  return nullptr;
}

void minfer_session_free(minfer_session *s) { delete s; }

void minfer_generation_options_init(minfer_generation_options *o) {
  if (!o) return;
  *o = minfer_generation_options{};
  o->max_new_tokens = 16;
  o->top_p = 1.f;
  o->cuda_graph = 1;
}

minfer_error *minfer_generate(minfer_session *session, const int32_t *prompt, size_t promptLen,
                              const minfer_generation_options *options, int32_t *tokens, size_t capacity,
                              size_t *count) {
  if (!session || !prompt || !tokens || !count)
    return error("minfer_generate: session, prompt, tokens and count must not be NULL");
  return generate("minfer_generate", session, &prompt, &promptLen, 1, options, tokens, capacity, count);
}

minfer_error *minfer_generate_batch(minfer_session *session, const int32_t *const *prompts, const size_t *promptLens,
                                    size_t batch, const minfer_generation_options *options, int32_t *tokens,
                                    size_t capacity, size_t *counts) {
  const std::string who = "minfer_generate_batch";
  if (!session || !prompts || !promptLens || !tokens || !counts)
    return error(who + ": session, prompts, prompt_lens, tokens and counts must not be NULL");
  if (batch < 1) return error(who + ": a batch of 0 prompts; expected 1 or more");
  for (size_t i = 0; i < batch; ++i)
    if (!prompts[i] && promptLens[i])
      return error(who + ": prompt " + std::to_string(i) + " is NULL with " + std::to_string(promptLens[i]) + " tokens");
  return generate(who, session, prompts, promptLens, batch, options, tokens, capacity, counts);
}

minfer_error *minfer_tokenizer_load(const char *dir, minfer_tokenizer **out) {
  if (!dir || !out) return error("minfer_tokenizer_load: dir and tokenizer must not be NULL");
  auto t = minfer::Tokenizer::load(dir);
  if (!t) return error(t.error());
  *out = new minfer_tokenizer{std::move(*t)};
  return nullptr;
}

void minfer_tokenizer_free(minfer_tokenizer *t) { delete t; }

int64_t minfer_tokenizer_vocab_size(const minfer_tokenizer *t) { return t ? t->tokenizer.vocabSize() : 0; }

minfer_error *minfer_tokenize(const minfer_tokenizer *t, const char *text, size_t textLen, int addBos, int32_t *ids,
                              size_t capacity, size_t *count) {
  if (!t || (!text && textLen) || !ids || !count)
    return error("minfer_tokenize: tokenizer, text, ids and count must not be NULL");
  auto r = t->tokenizer.encode(std::string(text ? text : "", textLen), addBos != 0);
  if (!r) return error(r.error());
  if (r->size() > capacity)
    return error("minfer_tokenize: the text is " + std::to_string(r->size()) + " tokens, room for " +
                 std::to_string(capacity));
  std::copy(r->begin(), r->end(), ids);
  *count = r->size();
  return nullptr;
}

minfer_error *minfer_detokenize(const minfer_tokenizer *t, const int32_t *ids, size_t count, char *text,
                                size_t capacity, size_t *len) {
  if (!t || (!ids && count) || !text || !len)
    return error("minfer_detokenize: tokenizer, ids, text and len must not be NULL");
  auto r = t->tokenizer.decode(std::vector<int32_t>(ids, ids + count));
  if (!r) return error(r.error());
  if (r->size() >= capacity)
    return error("minfer_detokenize: the text needs " + std::to_string(r->size() + 1) + " bytes with its NUL, room for " +
                 std::to_string(capacity));
  std::copy(r->begin(), r->end(), text);
  text[r->size()] = '\0';
  *len = r->size();
  return nullptr;
}

const char *minfer_version(void) { return minfer::version(); }

} // extern "C"
