// templates/decode_step.cuh — the bookkeeping at the end of a decode step, on the device: the chosen tokens
// become the next step's input, positions and context lengths advance, and history records the tokens.
#pragma once

#include "argmax_key.cuh"
#include "common.cuh"

namespace minfer {

// The kernel's one argument; its host mirror (same field names and offsets, checked in every generated
// source) is in compiler/kernels/RowOps.h.
struct AdvanceParams {
  const int *next;        // [rows] this step's tokens
  int *tokens;            // [rows] the next step's input
  int *positions;         // [rows]
  int *context_len;       // [rows]
  int *history;           // [history_steps, rows]
  int *step;              // [1] steps recorded so far
  int rows;
  int history_steps;
  unsigned long long *keys; // nullable: the lm_head's argmax keys (EpiArgmax), read instead of next
};

// Feeds a decode step's chosen tokens back: one block of THREADS >= rows threads. Row b's token becomes the
// next step's input, its position and context length advance by one, and the token is recorded in
// history[step][b]; then the step counter advances. Everything is read from and written to device memory,
// so a captured decode step replays with no host work between steps.
template <int THREADS>
__global__ void __launch_bounds__(THREADS) advance_tokens(const AdvanceParams p) {
  const auto &[next, tokens, positions, context_len, history, step, rows, history_steps, keys] = p;
  gridDependencyWait();
  const int s = *step;
  const int b = threadIdx.x;
  if (b < rows) {
    // With `keys` (greedy decode whose lm_head folded the argmax, epilogue.cuh EpiArgmax), the token is in
    // the low word of the row's key; the key goes back to zero for the next step's atomicMax.
    int t;
    if (keys) {
      t = argmaxKeyIndex(keys[b]);
      keys[b] = 0;
    } else {
      t = next[b];
    }
    tokens[b] = t;
    positions[b] += 1;
    context_len[b] += 1;
    if (s < history_steps) history[static_cast<long long>(s) * rows + b] = t;
  }
  __syncthreads(); // every thread has read *step
  if (threadIdx.x == 0) *step = s + 1;
}

} // namespace minfer
