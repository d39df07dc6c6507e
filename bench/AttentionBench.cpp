// bench/AttentionBench.cpp — suite "attention": decode (split-K, the chunks merged in the same launch) and
// causal prefill.
//
// Decode at context 4096, batch 1 and 16, with TinyLlama (32 heads / 4 kv heads / head dim 64) and
// Llama-2-7B (32 / 32 / 128) heads: bytes are the KV cache read, 2 * B * ctx * kv_heads * head_dim * 2, and
// the time is the one launch (attention_decode; until session 17 a second launch merged the chunks).
// Target: >= 70% of the device-to-device copy bandwidth. At batch 1 TinyLlama reads only 4 MiB (~1.5 us of
// HBM time), so there the launch latency dominates and the fraction is necessarily low.
// Prefill at 512 and 2048 tokens (a fresh prompt, start_pos 0), same heads: flops are the causal half of
// QK^T and PV, 4 * T^2 / 2 * heads * head_dim.
//
// Shapes use the names bench/torch_baseline.py reads ("batch=1 heads=32 kv_heads=4 head_dim=64
// context=4096"); prefill adds tokens=T and asks for the baseline kind "attention_prefill" (torch's
// scaled_dot_product_attention with is_causal=True). Beside each default spec, the alternatives the
// autotuner would weigh (other split lengths, other prefill tiles) are timed with baseline "attention_tuning",
// which has no PyTorch counterpart: they are there to choose defaults from.
#include "bench/Bench.h"
#include "runtime/KernelLoader.h"
#include "jit/KernelCache.h"
#include "compiler/kernels/Attention.h"
#include "ir/Diagnostics.h"

#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <sstream>

namespace minfer::bench {
namespace {

std::string shape(int batch, int heads, int kvHeads, int headDim, int context, int tokens = 0) {
  std::ostringstream s;
  s << "batch=" << batch << " heads=" << heads << " kv_heads=" << kvHeads << " head_dim=" << headDim;
  if (tokens) s << " tokens=" << tokens;
  s << " context=" << context;
  return s.str();
}

struct Heads {
  const char *model;
  int heads, kvHeads, headDim;
};
const Heads kModels[] = {{"TinyLlama", 32, 4, 64}, {"Llama-2-7B", 32, 32, 128}};

// One decode step of `batch` sequences, all at `context`, with `splitTokens` (0: the session default); none
// when --filter leaves the kernel out (bench::selected on its name and shape).
llvm::Expected<std::optional<Result>> benchDecode(const Heads &h, int batch, int context, int splitTokens, int smCount) {
  AttentionDecodeSpec dec = AttentionDecodeSpec::forSession(h.heads, h.kvHeads, h.headDim, context, batch, smCount);
  if (splitTokens) dec.splitTokens = splitTokens;
  const std::string shapeText = shape(batch, h.heads, h.kvHeads, h.headDim, context);
  if (!selected(dec.name() + " " + shapeText)) return std::nullopt;
  if (auto e = dec.validate()) return e;
  auto dk = loadKernel(dec);
  if (!dk) return dk.takeError();

  const size_t kvDim = size_t(h.kvHeads) * h.headDim, qDim = size_t(h.heads) * h.headDim;
  const size_t cacheBytes = size_t(batch) * context * kvDim * 2; // one of K, V
  const int copies = copiesFor(2.0 * cacheBytes);
  std::vector<cuda::DeviceBuffer> ks, vs;
  for (int i = 0; i < copies; ++i) {
    auto k = filled(cacheBytes);
    if (!k) return k.takeError();
    auto v = filled(cacheBytes);
    if (!v) return v.takeError();
    ks.push_back(std::move(*k));
    vs.push_back(std::move(*v));
  }
  auto q = filled(batch * qDim * 2);
  if (!q) return q.takeError();
  auto out = cuda::DeviceBuffer::alloc(batch * qDim * 2);
  if (!out) return out.takeError();
  auto ws = cuda::DeviceBuffer::alloc(dec.workspaceBytes(batch, context));
  if (!ws) return ws.takeError();
  auto arrivals = cuda::DeviceBuffer::alloc(dec.arrivalsBytes(batch));
  if (!arrivals) return arrivals.takeError();
  if (auto e = arrivals->fill(0)) return e; // the kernel leaves them zero for the next launch
  std::vector<int> lens(batch, context);
  auto ctx = cuda::DeviceBuffer::alloc(lens.size() * sizeof(int));
  if (!ctx) return ctx.takeError();
  if (auto e = ctx->upload(lens.data(), lens.size() * sizeof(int))) return e;

  cuda::DevicePtr partialOut = ws->ptr(), partialLse = ws->ptr() + dec.partialLseOffset(batch, context);
  AttentionDecodeParams dp{.q = q->ptr(), .out = out->ptr(), .partial_out = partialOut, .partial_lse = partialLse,
                           .arrivals = arrivals->ptr(), .context_len = ctx->ptr(), .max_seq = int(context),
                           .scale = 1.0f / std::sqrt(float(h.headDim))};
  auto ms = timeMedian([&](int i) -> llvm::Error {
    dp.k_cache = ks[i % copies].ptr();
    dp.v_cache = vs[i % copies].ptr();
    return launchKernel(dk->fn, dec, batch, dp);
  });
  if (!ms) return ms.takeError();
  if (auto e = cuda::synchronize()) return e;

  Result r;
  r.kernel = dec.name() + " splits=" + std::to_string(dec.numSplits());
  r.shape = shapeText;
  r.ms = *ms;
  r.bytes = 2.0 * cacheBytes;
  r.flops = 4.0 * batch * h.heads * double(context) * h.headDim; // QK^T and PV, 2 FLOPs a multiply-add
  r.baseline = splitTokens ? "attention_tuning" : "attention_decode";
  return r;
}

// A fresh prompt of `tokens` rows (start_pos 0) with `spec`'s tile; none when --filter leaves it out.
llvm::Expected<std::optional<Result>> benchPrefill(const Heads &h, int tokens, const AttentionPrefillSpec &spec,
                                                   bool isDefault) {
  const std::string shapeText = shape(1, h.heads, h.kvHeads, h.headDim, tokens, tokens);
  if (!selected(spec.name() + " " + shapeText)) return std::nullopt;
  auto k = loadKernel(spec);
  if (!k) return k.takeError();
  const size_t kvDim = size_t(h.kvHeads) * h.headDim, qDim = size_t(h.heads) * h.headDim;
  const size_t qBytes = tokens * qDim * 2, cacheBytes = tokens * kvDim * 2;
  const int copies = copiesFor(2.0 * qBytes + 2.0 * cacheBytes);
  std::vector<cuda::DeviceBuffer> qs, ks, vs;
  for (int i = 0; i < copies; ++i) {
    auto q = filled(qBytes), kc = filled(cacheBytes), vc = filled(cacheBytes);
    if (!q) return q.takeError();
    if (!kc) return kc.takeError();
    if (!vc) return vc.takeError();
    qs.push_back(std::move(*q));
    ks.push_back(std::move(*kc));
    vs.push_back(std::move(*vc));
  }
  auto out = cuda::DeviceBuffer::alloc(qBytes);
  if (!out) return out.takeError();
  AttentionPrefillParams p{.out = out->ptr(), .rows = tokens, .scale = 1.0f / std::sqrt(float(h.headDim))};
  auto ms = timeMedian([&](int i) -> llvm::Error {
    p.q = qs[i % copies].ptr();
    p.k_cache = ks[i % copies].ptr();
    p.v_cache = vs[i % copies].ptr();
    return launchKernel(k->fn, spec, tokens, p);
  });
  if (!ms) return ms.takeError();
  if (auto e = cuda::synchronize()) return e;

  Result r;
  r.kernel = spec.name();
  r.shape = shapeText;
  r.ms = *ms;
  r.bytes = 2.0 * qBytes + 2.0 * cacheBytes;                         // q and out, K and V
  r.flops = 4.0 * double(tokens) * tokens / 2 * h.heads * h.headDim; // causal: half of QK^T and PV
  r.baseline = isDefault ? "attention_prefill" : "attention_tuning";
  return r;
}

llvm::Expected<std::vector<Result>> runAttention(const Ceilings &) {
  auto info = cuda::deviceInfo();
  if (!info) return info.takeError();
  std::vector<Result> results;
  auto add = [&](llvm::Expected<std::optional<Result>> r, const std::string &what) -> llvm::Error {
    if (!r) return ir::makeError(what + ": " + llvm::toString(r.takeError()));
    if (*r) results.push_back(std::move(**r)); // none: --filter left it out
    return llvm::Error::success();
  };

  constexpr int kContext = 4096;
  for (const Heads &h : kModels) {
    for (int batch : {1, 16}) {
      std::string what = std::string("decode ") + h.model + " batch " + std::to_string(batch);
      if (auto e = add(benchDecode(h, batch, kContext, 0, info->smCount), what)) return e;
      // Other split lengths, for tuning chooseSplitTokens.
      int chosen = AttentionDecodeSpec::chooseSplitTokens(h.kvHeads, h.headDim, kContext, batch, info->smCount);
      for (int split : {chosen / 4, chosen / 2, chosen * 2, chosen * 4})
        if (split >= 16 && split % 16 == 0 && llvm::divideCeil(kContext, split) <= AttentionDecodeSpec::kMaxSplits)
          if (auto e = add(benchDecode(h, batch, kContext, split, info->smCount), what + " split " + std::to_string(split)))
            return e;
    }
  }
  auto target = deviceTarget(); // sm_90a on Hopper: the wgmma tiles too, the default first
  if (!target) return target.takeError();
  for (const Heads &h : kModels) {
    for (int tokens : {512, 2048}) {
      std::vector<AttentionPrefillSpec> tiles = AttentionPrefillSpec::candidates(h.heads, h.kvHeads, h.headDim, &*target);
      for (size_t i = 0; i < tiles.size(); ++i) {
        if (int(tiles[i].sharedBytes()) > info->maxSharedPerBlockOptin) continue; // does not fit this GPU
        std::string what = std::string("prefill ") + h.model + " tokens " + std::to_string(tokens) + " " + tiles[i].name();
        if (auto e = add(benchPrefill(h, tokens, tiles[i], i == 0), what)) return e;
      }
    }
  }
  return results;
}

Registration reg("attention", runAttention);

} // namespace
} // namespace minfer::bench
