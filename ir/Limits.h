// ir/Limits.h — the largest sizes minfer accepts wherever a size enters: IR text, config.json, plan and
// session options. Each is far above what one GPU can hold, and small enough that size arithmetic on
// them (elements, bytes, products of two dims) never overflows int64. A value above its limit is an error
// naming the field and the limit, before any work.
#pragma once

#include <cstdint>

namespace minfer::ir::limits {

constexpr int64_t kMaxInt = (int64_t(1) << 31) - 1;   // any integer literal in IR text
constexpr int64_t kMaxDim = int64_t(1) << 24;         // a dim: hidden, ffn, vocab, positions (16.7M)
constexpr int64_t kMaxLayers = 1024;                  // a repeat count (decoder layers)
constexpr int64_t kMaxHeads = 4096;                   // attention heads, kv heads
constexpr int64_t kMaxHeadDim = 1024;                 // head_dim (the GPU kernels take at most 128)
constexpr int64_t kMaxWeightElements = int64_t(1) << 36; // one weight (64 Gi elements: 128 GB in bf16)
constexpr int64_t kMaxSeq = int64_t(1) << 20;         // cache positions per sequence (max_seq)
constexpr int64_t kMaxNewTokens = int64_t(1) << 20;   // tokens generated in one call

} // namespace minfer::ir::limits
