/* minfer/minfer.h — the C API of minfer's runtime, a thin layer over minfer.hpp.
 *
 *   minfer_engine_options eo;
 *   minfer_engine_options_init(&eo);
 *   eo.weights = "model.safetensors";
 *   minfer_engine *engine = NULL;
 *   minfer_error *err = minfer_engine_load("model.mfb", &eo, &engine);
 *   if (err) { fprintf(stderr, "%s\n", minfer_error_message(err)); minfer_error_free(err); return 1; }
 *   minfer_session *session = NULL;
 *   err = minfer_session_create(engine, &session);
 *   ...
 *   minfer_generation_options go;
 *   minfer_generation_options_init(&go);
 *   go.max_new_tokens = 32;
 *   int32_t out[32]; size_t n = 0;
 *   err = minfer_generate(session, prompt, prompt_len, &go, out, 32, &n);
 *   minfer_session_free(session);
 *   minfer_engine_free(engine);
 *
 * Every function that can fail returns a minfer_error* : NULL on success, else an error the caller frees
 * with minfer_error_free, whose message says what went wrong. Output parameters are written only on
 * success. A session keeps its engine alive, so the two may be freed in either order. Freeing NULL is a
 * no-op. Without a CUDA driver, minfer_engine_load fails with a message starting "no CUDA driver".
 */
#ifndef MINFER_MINFER_H
#define MINFER_MINFER_H

#include <stddef.h>
#include <stdint.h>

#if defined(MINFER_BUILDING_LIBRARY)
#define MINFER_C_API __attribute__((visibility("default")))
#else
#define MINFER_C_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct minfer_engine minfer_engine;
typedef struct minfer_session minfer_session;
typedef struct minfer_error minfer_error;
typedef struct minfer_tokenizer minfer_tokenizer;

MINFER_C_API const char *minfer_error_message(const minfer_error *error);
MINFER_C_API void minfer_error_free(minfer_error *error);

typedef struct {
  const char *weights;         /* .safetensors, index.json or directory; NULL for a checkpoint directory */
  const char *target;          /* "sm_90"; NULL: the GPU's own */
  int64_t max_batch;           /* default 1 */
  int64_t max_seq;             /* 0: the model's max_pos */
  int64_t max_prefill_tokens;  /* 0: 2048 or what the caches hold */
} minfer_engine_options;

MINFER_C_API void minfer_engine_options_init(minfer_engine_options *options);
/* model: an .ir file, a .mfb bundle or a Hugging Face checkpoint directory. */
MINFER_C_API minfer_error *minfer_engine_load(const char *model, const minfer_engine_options *options,
                                              minfer_engine **engine);
MINFER_C_API void minfer_engine_free(minfer_engine *engine);
MINFER_C_API int64_t minfer_engine_vocab_size(const minfer_engine *engine);

MINFER_C_API minfer_error *minfer_session_create(minfer_engine *engine, minfer_session **session);
MINFER_C_API void minfer_session_free(minfer_session *session);

typedef struct {
  int64_t max_new_tokens;      /* default 16 */
  float temperature;           /* <= 0: greedy (default) */
  int top_k;                   /* <= 0: off */
  float top_p;                 /* default 1: off */
  uint64_t seed;
  const int32_t *stop_tokens;  /* may be NULL */
  size_t num_stop_tokens;
  int cuda_graph;              /* default 1 */
  /* Optional: stops at the tokenizer's EOS, and gives the callback text. */
  const minfer_tokenizer *tokenizer;
  /* Optional: called with each generated token as it is known; `text` (not NUL-terminated, `text_len`
   * bytes) is what the token completes with a tokenizer, else empty. Return 0 to end the sequence there.
   * With a tokenizer, a last call with token -1 ends each sequence, with any text held back (a character
   * the sequence ended inside, as U+FFFD). */
  int (*on_token)(void *user_data, size_t sequence, int32_t token, const char *text, size_t text_len);
  void *user_data;
  /* How decode steps run: MINFER_DECODE_LAUNCHES (default: one kernel launch per op) or
   * MINFER_DECODE_PERSISTENT (the step's ops as one persistent kernel; an error where the plan has none). */
  int decode_path;
} minfer_generation_options;
enum { MINFER_DECODE_LAUNCHES = 0, MINFER_DECODE_PERSISTENT = 1 };

MINFER_C_API void minfer_generation_options_init(minfer_generation_options *options);
/* Generates for one prompt; writes at most `capacity` tokens to `tokens` and their count to `count`
 * (capacity below max_new_tokens is an error before any work). */
MINFER_C_API minfer_error *minfer_generate(minfer_session *session, const int32_t *prompt, size_t prompt_len,
                                           const minfer_generation_options *options, int32_t *tokens,
                                           size_t capacity, size_t *count);
/* Generates for `batch` prompts together (1 to the engine's max_batch; their decode steps run as one):
 * prompt i is `prompt_lens[i]` tokens at `prompts[i]`. Sequence i's tokens go to `tokens + i * capacity`
 * (at most `capacity` each, so `tokens` holds batch * capacity) and their count to `counts[i]`. */
MINFER_C_API minfer_error *minfer_generate_batch(minfer_session *session, const int32_t *const *prompts,
                                                 const size_t *prompt_lens, size_t batch,
                                                 const minfer_generation_options *options, int32_t *tokens,
                                                 size_t capacity, size_t *counts);

/* dir: a checkpoint (or tokenizer-only) directory with tokenizer.json or tokenizer.model. */
MINFER_C_API minfer_error *minfer_tokenizer_load(const char *dir, minfer_tokenizer **tokenizer);
MINFER_C_API void minfer_tokenizer_free(minfer_tokenizer *tokenizer);
/* The ids of `text_len` bytes of UTF-8 `text` (BOS first with add_bos when the checkpoint adds one); more
 * than `capacity` ids is an error that says how many. */
MINFER_C_API minfer_error *minfer_tokenize(const minfer_tokenizer *tokenizer, const char *text, size_t text_len,
                                           int add_bos, int32_t *ids, size_t capacity, size_t *count);
/* The text of `count` ids, NUL-terminated in `text` (its length without the NUL in `len`); a text of
 * `capacity` bytes or more is an error that says how many it needs. */
MINFER_C_API minfer_error *minfer_detokenize(const minfer_tokenizer *tokenizer, const int32_t *ids, size_t count,
                                             char *text, size_t capacity, size_t *len);
MINFER_C_API int64_t minfer_tokenizer_vocab_size(const minfer_tokenizer *tokenizer);

MINFER_C_API const char *minfer_version(void);

#ifdef __cplusplus
}
#endif

#endif /* MINFER_MINFER_H */
