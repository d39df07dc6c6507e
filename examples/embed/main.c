/* examples/embed/main.c — the same as main.cpp through minfer's C API:
 *   minfer_embed_c MODEL PROMPT_IDS [MAX_NEW_TOKENS]             (MODEL: a checkpoint directory, weights inside)
 *   minfer_embed_c MODEL --tokenizer DIR --text PROMPT [MAX_NEW_TOKENS] */
#include <minfer/minfer.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Prints each piece of generated text as it arrives. */
static int print_text(void *user_data, size_t sequence, int32_t token, const char *text, size_t text_len) {
  (void)user_data;
  (void)sequence;
  (void)token;
  fwrite(text, 1, text_len, stdout);
  fflush(stdout);
  return 1; /* go on */
}

static int fail(minfer_error *err) {
  fprintf(stderr, "minfer_embed_c: %s\n", minfer_error_message(err));
  minfer_error_free(err);
  return 1;
}

int main(int argc, char **argv) {
  int text_mode = argc >= 6 && strcmp(argv[2], "--tokenizer") == 0 && strcmp(argv[4], "--text") == 0;
  int max_arg = text_mode ? 6 : 3;
  if (!(text_mode ? argc <= 7 : argc >= 3 && argc <= 4)) {
    fprintf(stderr, "usage: minfer_embed_c MODEL PROMPT_IDS [MAX_NEW_TOKENS]\n"
                    "       minfer_embed_c MODEL --tokenizer DIR --text PROMPT [MAX_NEW_TOKENS]\n");
    return 1;
  }
  int32_t prompt[4096];
  size_t n = 0;
  minfer_tokenizer *tokenizer = NULL;
  minfer_error *err = NULL;
  if (text_mode) {
    err = minfer_tokenizer_load(argv[3], &tokenizer);
    if (err) return fail(err);
    err = minfer_tokenize(tokenizer, argv[5], strlen(argv[5]), /*add_bos=*/1, prompt, 4096, &n);
    if (err) {
      minfer_tokenizer_free(tokenizer);
      return fail(err);
    }
    fprintf(stderr, "minfer_embed_c: prompt ids");
    for (size_t i = 0; i < n; ++i) fprintf(stderr, i ? ",%d" : " %d", prompt[i]);
    fprintf(stderr, "\n");
  } else {
    for (char *tok = strtok(argv[2], ","); tok && n < 4096; tok = strtok(NULL, ",")) prompt[n++] = atoi(tok);
  }

  minfer_engine_options eo;
  minfer_engine_options_init(&eo);
  minfer_engine *engine = NULL;
  err = minfer_engine_load(argv[1], &eo, &engine);
  if (err) {
    minfer_tokenizer_free(tokenizer);
    return fail(err);
  }
  minfer_session *session = NULL;
  err = minfer_session_create(engine, &session);
  if (!err) {
    minfer_generation_options go;
    minfer_generation_options_init(&go);
    go.max_new_tokens = argc > max_arg ? atoi(argv[max_arg]) : 16;
    if (tokenizer) {
      go.tokenizer = tokenizer;
      go.on_token = print_text;
    }
    int32_t *out = malloc(sizeof(int32_t) * (size_t)(go.max_new_tokens > 0 ? go.max_new_tokens : 1));
    size_t count = 0;
    err = minfer_generate(session, prompt, n, &go, out, (size_t)go.max_new_tokens, &count);
    if (!err && tokenizer) {
      printf("\n");
    } else if (!err) {
      for (size_t i = 0; i < count; ++i) printf(i ? ",%d" : "%d", out[i]);
      printf("\n");
    }
    free(out);
  }
  minfer_session_free(session);
  minfer_engine_free(engine);
  minfer_tokenizer_free(tokenizer);
  if (err) return fail(err);
  return 0;
}
