/* examples/embed/main.c — the same as main.cpp through minfer's C API:
 *   minfer_embed_c MODEL PROMPT_IDS [MAX_NEW_TOKENS]   (MODEL: a checkpoint directory, weights inside) */
#include <minfer/minfer.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  if (argc < 3 || argc > 4) {
    fprintf(stderr, "usage: minfer_embed_c MODEL PROMPT_IDS [MAX_NEW_TOKENS]\n");
    return 1;
  }
  int32_t prompt[4096];
  size_t n = 0;
  for (char *tok = strtok(argv[2], ","); tok && n < 4096; tok = strtok(NULL, ",")) prompt[n++] = atoi(tok);

  minfer_engine_options eo;
  minfer_engine_options_init(&eo);
  minfer_engine *engine = NULL;
  minfer_error *err = minfer_engine_load(argv[1], &eo, &engine);
  if (err) {
    fprintf(stderr, "minfer_embed_c: %s\n", minfer_error_message(err));
    minfer_error_free(err);
    return 1;
  }
  minfer_session *session = NULL;
  err = minfer_session_create(engine, &session);
  if (!err) {
    minfer_generation_options go;
    minfer_generation_options_init(&go);
    go.max_new_tokens = argc > 3 ? atoi(argv[3]) : 16;
    int32_t *out = malloc(sizeof(int32_t) * (size_t)(go.max_new_tokens > 0 ? go.max_new_tokens : 1));
    size_t count = 0;
    err = minfer_generate(session, prompt, n, &go, out, (size_t)go.max_new_tokens, &count);
    if (!err) {
      for (size_t i = 0; i < count; ++i) printf(i ? ",%d" : "%d", out[i]);
      printf("\n");
    }
    free(out);
  }
  minfer_session_free(session);
  minfer_engine_free(engine);
  if (err) {
    fprintf(stderr, "minfer_embed_c: %s\n", minfer_error_message(err));
    minfer_error_free(err);
    return 1;
  }
  return 0;
}
