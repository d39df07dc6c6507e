// minfer/minfer.hpp — the C++ API of minfer's runtime: load a model, open a session, generate tokens.
//
//   #include <minfer/minfer.hpp>
//
//   minfer::EngineOptions eo;
//   eo.weights = "model.safetensors";               // not needed for a checkpoint directory
//   minfer::Result<minfer::Engine> engine = minfer::Engine::load("model.mfb", eo);
//   if (!engine) { std::cerr << engine.error() << "\n"; return 1; }
//   minfer::Result<minfer::Session> session = engine->createSession();
//   minfer::GenerationOptions go;
//   go.maxNewTokens = 32;
//   minfer::Result<minfer::Generation> out = session->generate({{1, 15043, 29892}}, go);
//   if (out) for (int32_t t : out->tokens[0]) std::cout << t << " ";
//
// Text in and out, with the checkpoint's tokenizer (tokenizer.json or tokenizer.model):
//
//   minfer::Result<minfer::Tokenizer> tok = minfer::Tokenizer::load("TinyLlama-1.1B/");
//   go.tokenizer = &*tok;                            // stop at its EOS; text for onToken and Generation::text
//   go.onToken = [](const minfer::TokenEvent &t) { std::cout << t.text << std::flush; return true; };
//   out = session->generate({*tok->encode("The capital of France is", /*addBos=*/true)}, go);
//
// A model is an .ir file (weights from EngineOptions::weights), a bundle written by `minferc model.ir
// --target sm_XY -o model.mfb` (no compiler involved at load), or a Hugging Face checkpoint directory.
// Kernels that are not in a bundle are compiled with NVRTC through the disk cache ($MINFER_CACHE_DIR,
// $XDG_CACHE_HOME/minfer or ~/.cache/minfer). The CUDA driver is loaded at run time: on a machine without
// one, Engine::load fails with a message starting "no CUDA driver".
//
// Errors are values: every call that can fail returns a Result (or Status) that is false on failure and
// carries the message (which file, which tensor, what was expected). Nothing throws and nothing exits.
// An Engine may be shared by several Sessions; each Session keeps the Engine alive. A Session is used by
// one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#if defined(MINFER_BUILDING_LIBRARY)
#define MINFER_API __attribute__((visibility("default")))
#else
#define MINFER_API
#endif

namespace minfer {

namespace rt {
class Engine;
class Session;
} // namespace rt
namespace tok {
class Tokenizer;
} // namespace tok

// Success, or a message saying what went wrong.
class Status {
public:
  Status() = default;
  static Status failure(std::string message) { return Status(std::move(message)); }
  bool ok() const { return !failed; }
  explicit operator bool() const { return ok(); }
  const std::string &message() const { return msg; }

private:
  explicit Status(std::string m) : msg(std::move(m)), failed(true) {}
  std::string msg;
  bool failed = false;
};

// A value, or the message of the failure that prevented it.
template <typename T> class Result {
public:
  Result(T value) : val(std::move(value)) {}
  Result(Status failure) : err(failure.message()) {}
  bool ok() const { return val.has_value(); }
  explicit operator bool() const { return ok(); }
  const std::string &error() const { return err; }
  T &value() { return *val; }
  const T &value() const { return *val; }
  T *operator->() { return &*val; }
  const T *operator->() const { return &*val; }
  T &operator*() { return *val; }
  const T &operator*() const { return *val; }

private:
  std::optional<T> val;
  std::string err;
};

struct EngineOptions {
  std::string weights;        // .safetensors, index.json or directory; empty for a checkpoint directory
  std::string target;         // e.g. "sm_90"; empty: the GPU's own. A bundle must have been built for it
  int64_t maxBatch = 1;       // sequences generated together (ignored for a bundle: fixed at build)
  int64_t maxSeq = 0;         // cache positions per sequence; 0: the model's max_pos
  int64_t maxPrefillTokens = 0; // rows of one prefill step; 0: 2048 or what the caches hold
  unsigned compileJobs = 0;   // NVRTC worker processes; 0: one per core
  bool useCache = true;       // the disk cache of compiled kernels
  bool fuse = true;           // the fusion pass; false launches one kernel per IR op (for comparison)
  // The persistent decode kernel (DecodePath::Persistent) streams its matmul weights through a ring in shared
  // memory (sm_90 and later). Experimental: slower than without today (bench/NOTES.md, session 15).
  bool persistentWeightRing = false;
};

struct SessionOptions {
  bool keepLogits = false; // return every prompt row's and every step's logits (Generation::logits)
};

// A checkpoint directory's tokenizer: text to token ids and back, giving Hugging Face's ids.
class MINFER_API Tokenizer {
public:
  static Result<Tokenizer> load(const std::string &dir);
  // The ids of `text`; with addBos, BOS first when the checkpoint adds one (HF's add_special_tokens).
  Result<std::vector<int32_t>> encode(const std::string &text, bool addBos = false) const;
  Result<std::string> decode(const std::vector<int32_t> &ids) const;
  int64_t vocabSize() const;
  std::vector<int32_t> eosTokens() const; // the ids that end a sequence (generation_config.json)

private:
  friend class Session;
  explicit Tokenizer(std::shared_ptr<const tok::Tokenizer> impl) : impl(std::move(impl)) {}
  std::shared_ptr<const tok::Tokenizer> impl;
};

// One generated token, as soon as it is known; with a tokenizer, one more event ends each sequence.
struct TokenEvent {
  size_t sequence = 0; // index of its prompt
  int32_t token = 0;   // -1 in the end event
  // With GenerationOptions::tokenizer: the text this token completes ("" while a character's bytes are
  // split over tokens, and for an EOS); never a broken UTF-8 sequence. In the end event: what was held
  // back, if the sequence ended inside a character (as U+FFFD, as the whole decode shows it).
  std::string text;
  bool end = false; // the sequence has ended (its last token came before); the callback's answer is ignored
};

// How decode steps run: Launches (the default), one kernel launch per op; Persistent, the whole step's ops as
// one persistent kernel, which the engine's plan builds for fused models at decode batches up to 8 (an error
// elsewhere, saying why). Opt-in while it is slower than the launches (bench/NOTES.md).
enum class DecodePath { Launches, Persistent };

struct GenerationOptions {
  int64_t maxNewTokens = 16;
  float temperature = 0.f; // <= 0: greedy
  int topK = 0;            // <= 0: off
  float topP = 1.f;        // (0, 1): nucleus sampling
  uint64_t seed = 0;       // with the same seed, prompts and options, sampling gives the same tokens
  std::vector<int32_t> stopTokens; // e.g. the tokenizer's EOS; kept as the sequence's last token
  bool cudaGraph = true;           // replay the decode step as one CUDA graph
  DecodePath decode = DecodePath::Launches;
  // Optional: stops each sequence at the tokenizer's EOS and gives text (TokenEvent::text,
  // Generation::text). Its vocabulary must fit the model's. Must outlive the call.
  const Tokenizer *tokenizer = nullptr;
  // Optional: called with each token as it is generated (every decode step); returning false ends that
  // sequence there.
  std::function<bool(const TokenEvent &)> onToken;
  // Optional teacher forcing, to score a given continuation: one list per prompt. Decode step k feeds
  // forcedTokens[p][k] to prompt p's sequence instead of the token it generated, while the list lasts;
  // Generation::tokens still holds what the model chose at each position and, with keepLogits, the logits
  // rows are those of the forced tokens. At most maxNewTokens - 1 tokens a list.
  std::vector<std::vector<int32_t>> forcedTokens;
};

struct Generation {
  std::vector<std::vector<int32_t>> tokens; // the generated tokens of each prompt
  // With SessionOptions::keepLogits: per prompt, float32 [rows, vocab] row-major, one row per prompt
  // position then one per generated token fed back.
  std::vector<std::vector<float>> logits;
  std::vector<std::string> text; // with GenerationOptions::tokenizer: each sequence's text, its EOS left out
  int64_t promptTokens = 0, decodeSteps = 0;
  double prefillMs = 0; // GPU time: prefill and first token
  double decodeMs = 0;  // GPU time: the decode steps
};

// What Engine::load did and how long it took.
struct LoadInfo {
  std::string source;      // "ir", "bundle" or "checkpoint"
  std::string device;      // e.g. "NVIDIA H200"
  std::string target;      // e.g. "sm_90"
  double parseMs = 0, compileMs = 0, modulesMs = 0, weightsMs = 0;
  unsigned kernels = 0, cacheHits = 0, compiled = 0;
  uint64_t weightBytes = 0;
  bool persistentDecode = false; // the plan has the persistent decode kernel (DecodePath::Persistent runs)
  unsigned weightRingBytes = 0;  // its weight ring a block (EngineOptions::persistentWeightRing where it fits); 0: none
};

class Session;

class MINFER_API Engine {
public:
  static Result<Engine> load(const std::string &model, const EngineOptions &options = {});
  Result<Session> createSession(const SessionOptions &options = {}) const;
  LoadInfo loadInfo() const;
  int64_t vocabSize() const;
  int64_t maxBatch() const;
  int64_t maxSeq() const;

private:
  explicit Engine(std::shared_ptr<rt::Engine> impl) : impl(std::move(impl)) {}
  std::shared_ptr<rt::Engine> impl;
};

class MINFER_API Session {
public:
  // 1 to maxBatch() prompts; sequence i reuses cache slot i, so each call starts afresh.
  Result<Generation> generate(const std::vector<std::vector<int32_t>> &prompts, const GenerationOptions &options);
  uint64_t deviceBytes() const; // KV cache, arenas, workspaces and I/O of this session

private:
  friend class Engine;
  Session(std::shared_ptr<rt::Engine> engine, std::shared_ptr<rt::Session> impl)
      : engine(std::move(engine)), impl(std::move(impl)) {}
  std::shared_ptr<rt::Engine> engine; // declared first: destroyed after the session
  std::shared_ptr<rt::Session> impl;
};

// "0.1.0"
MINFER_API const char *version();

} // namespace minfer
