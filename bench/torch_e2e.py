#!/usr/bin/env python3
"""bench/torch_e2e.py — PyTorch's end-to-end decode and prefill time on minfer's models, on the same GPU.

The torch baseline of DESIGN.md's "Measuring" section: a compact model in plain torch with a static KV
cache, run eager and under torch.compile (decode: mode="reduce-overhead", i.e. Inductor kernels replayed
from a CUDA graph; prefill: default mode, dynamic=False). That is the strongest stock-torch setup for
batch-1..16 decode (gpt-fast style) and so the fair reference for minfer's end-to-end numbers.

  1. Reads dims, weight names/dtypes/shapes and the eps / rope theta attributes from examples/<model>.ir.
  2. Generates seeded random weights on the GPU (matmul weights, embeddings and biases N(0, 0.02); norm
     gammas 1 + N(0, 0.02)) in the dtype the .ir declares, shaped as the checkpoint stores them
     (`transpose` weights as [in, out]), and saves them to DIR/model.safetensors under the names the .ir
     binds, so `minferc run examples/<model>.ir --weights DIR/model.safetensors` loads the same weights.
     Reused when DIR/seed.txt names the same model and seed.
  3. Builds the model in bf16 (every checkpoint dtype is cast to bf16 for compute, as minfer computes in
     bf16): HF numerics — rms_norm in fp32 then cast and scaled by gamma, rope half rotation with
     inv_freq = theta^(-2i/d) in fp32 (rescaled by the llama3 schedule where the .ir's rope says so) and
     cos/sin cast to bf16, softmax in fp32 inside SDPA, SwiGLU;
     GPT-2: learned positions, layer_norm, gelu tanh, biases, lm_head tied to wte. Same math as the .ir;
     q/k/v and gate/up are concatenated into one matmul each (as gpt-fast does: a stronger baseline).
  4. KV cache: per layer [batch, kv_heads, max_ctx, head_dim] bf16 buffers (the SDPA layout), written with
     index_copy_ at the current positions. Prefill (from position 0) attends over its own k/v with
     is_causal (flash, enable_gqa); decode (one token) attends over the whole static cache with a length
     mask, the query heads of one kv head grouped as rows so GQA needs no copy: every shape is static, so
     the decode step is CUDA-graph capturable.
  5. Decode, per batch B: a random prompt of --context tokens prefilled (not timed), then --decode-steps
     greedy steps (argmax fed back), after one untimed warm-up pass over the same positions; CUDA events
     around the whole run of steps, median of 3 runs. ms_per_step is one step of the batch (= ms per token
     of one sequence); tok_s = B / ms * 1000. Prefill, per P: one sequence of P tokens through the full
     model, logits for the last token only (the KV cache is written for all P), median of 5 after 2
     warm-ups; tok_s = P / ms * 1000. Compile time (first call) is reported apart, never timed.

Any failure of one measurement (out of memory, a compile error) is recorded as {"error": ...}.
Needs torch (2.5+), safetensors and a CUDA GPU; nothing here is needed to build or test minfer.
"""
import argparse
import gc
import json
import math
import os
import re
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import save_file

REPO = Path(__file__).resolve().parents[1]
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
# Per-model facts the .ir does not spell as dims; eps and theta are re-read from the graph when present.
MODELS = {
    "gpt2-124m": {"arch": "gpt2", "eps": 1e-5, "theta": None},
    "tinyllama-1.1b": {"arch": "llama", "eps": 1e-5, "theta": 10000.0},
    "llama-2-7b": {"arch": "llama", "eps": 1e-5, "theta": 10000.0},
    "llama-3.2-1b": {"arch": "llama", "eps": 1e-5, "theta": 500000.0},  # llama3 schedule, tied lm_head
}


# ---------------------------------------------------------------------------------------------- the .ir
def parse_ir(model):
    text = (REPO / "examples" / f"{model}.ir").read_text()
    text = "\n".join(line.split("//")[0] for line in text.splitlines())  # drop comments
    dims = {m[1]: int(m[2]) for m in re.finditer(r"^\s*dim\s+(\w+)\s*=\s*(\d+)", text, re.M)}
    weights = {}  # IR name -> (dtype, IR shape [out, in], transposed, checkpoint name with {l})
    for m in re.finditer(r'^\s*weight\s+@(\w+)\s*:\s*(\w+)\[([^\]]*)\]\s*=\s*(transpose\s+)?"([^"]+)"', text, re.M):
        shape = [dims[d.strip()] if d.strip() in dims else int(d) for d in m[3].split(",")]
        weights[m[1]] = (DTYPES[m[2]], shape, bool(m[4]), m[5])
    cfg = dict(MODELS[model], dims=dims, weights=weights)
    if (e := re.search(r"\beps\s*=\s*([0-9.eE+-]+)", text)):
        cfg["eps"] = float(e[1])
    if (t := re.search(r"\btheta\s*=\s*([0-9.eE+-]+)", text)):
        cfg["theta"] = float(t[1])
    if re.search(r"\bschedule\s*=\s*llama3\b", text):
        cfg["llama3"] = {k: float(re.search(rf"\b{k}\s*=\s*([0-9.eE+-]+)", text)[1])
                         for k in ("factor", "low_freq_factor", "high_freq_factor", "original_max_pos")}
    heads = re.findall(r"matmul\s+%\w+\s*,\s*@(\w+)\s*:\s*\w+\[\w+\s*,\s*vocab\]", text)
    cfg["lm_head"] = heads[-1] if heads else ("wte" if cfg["arch"] == "gpt2" else "lm_head")
    return cfg


def checkpoint_names(cfg, ir_name):
    name = cfg["weights"][ir_name][3]
    return [name.replace("{l}", str(l)) for l in range(cfg["dims"]["layers"])] if "{l}" in name else [name]


# ------------------------------------------------------------------------------------------- weights
def ensure_weights(cfg, model, seed, out_dir):
    out_dir = Path(out_dir)
    path, stamp = out_dir / "model.safetensors", out_dir / "seed.txt"
    tag = f"{model} seed={seed}\n"
    if path.exists() and stamp.exists() and stamp.read_text() == tag:
        print(f"torch_e2e: reusing {path}", file=sys.stderr)
        return path
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp.unlink(missing_ok=True)
    g = torch.Generator(device="cuda").manual_seed(seed)
    tensors = {}  # generated on the GPU in .ir order (layer by layer within a weight), kept on the host
    for ir_name, (dtype, shape, transposed, _) in cfg["weights"].items():
        stored = list(reversed(shape)) if transposed else shape
        for n in checkpoint_names(cfg, ir_name):
            t = torch.empty(stored, dtype=dtype, device="cuda")
            gamma = len(stored) == 1 and not n.endswith("bias")  # 1-D and not a bias: a norm's gain
            t.normal_(1.0 if gamma else 0.0, 0.02, generator=g)
            tensors[n] = t.cpu()
    t0 = time.perf_counter()
    tmp = out_dir / "model.safetensors.tmp"
    save_file(tensors, str(tmp))
    os.replace(tmp, path)
    stamp.write_text(tag)
    print(f"torch_e2e: wrote {path} ({path.stat().st_size / 1e9:.2f} GB, {time.perf_counter() - t0:.1f} s)",
          file=sys.stderr)
    return path


# ----------------------------------------------------------------------------------------------- model
def rms_norm(x, w, eps):
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return w * xf.to(x.dtype)


def llama3_inv_freq(inv_freq, factor, low_freq_factor, high_freq_factor, original_max_pos):
    """HF's llama3 rope schedule (transformers' _compute_llama3_parameters): long wavelengths slowed by
    `factor`, short ones kept, the band between interpolated smoothly."""
    low_wavelen, high_wavelen = original_max_pos / low_freq_factor, original_max_pos / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (original_max_pos / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return torch.where(medium, smoothed, scaled)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def frozen(t):
    return nn.Parameter(t, requires_grad=False)  # parameters: static addresses for CUDA graphs


class Layer(nn.Module):
    def __init__(self, w):
        super().__init__()
        for k, t in w.items():
            setattr(self, k, frozen(t) if t is not None else None)
        self.register_buffer("k_cache", None, persistent=False)
        self.register_buffer("v_cache", None, persistent=False)


class Model(nn.Module):
    def __init__(self, cfg, path):
        super().__init__()
        d = cfg["dims"]
        self.gpt2 = cfg["arch"] == "gpt2"
        self.hidden, self.heads, self.head_dim = d["hidden"], d["heads"], d["head_dim"]
        self.kv_heads = d.get("kv_heads", d["heads"])
        self.max_pos, self.eps = d["max_pos"], cfg["eps"]
        self.weight_bytes = 0
        with safe_open(str(path), framework="pt", device="cpu") as f:
            def get(ir_name, l=None):  # checkpoint tensor -> GPU bf16 [out, in]
                names = checkpoint_names(cfg, ir_name)
                t = f.get_tensor(names[l if l is not None else 0]).to("cuda").to(torch.bfloat16)
                return (t.t() if cfg["weights"][ir_name][2] else t).contiguous()

            layers = []
            for l in range(d["layers"]):
                if self.gpt2:
                    w = dict(n1w=get("ln_1_w", l), n1b=get("ln_1_b", l), wqkv=get("c_attn_w", l),
                             bqkv=get("c_attn_b", l), wo=get("attn_proj_w", l), bo=get("attn_proj_b", l),
                             n2w=get("ln_2_w", l), n2b=get("ln_2_b", l), w1=get("fc_w", l), b1=get("fc_b", l),
                             w2=get("mlp_proj_w", l), b2=get("mlp_proj_b", l))
                else:
                    w = dict(n1w=get("attn_norm", l), n1b=None, bqkv=None, bo=None, n2w=get("mlp_norm", l),
                             n2b=None, b1=None, b2=None, wo=get("wo", l), w2=get("w_down", l),
                             wqkv=torch.cat([get("wq", l), get("wk", l), get("wv", l)]),
                             w1=torch.cat([get("w_gate", l), get("w_up", l)]))
                self.weight_bytes += sum(t.numel() * 2 for t in w.values() if t is not None)
                layers.append(Layer(w))
            self.layers = nn.ModuleList(layers)
            self.embed = frozen(get("wte" if self.gpt2 else "embed"))
            tied = cfg["lm_head"] == ("wte" if self.gpt2 else "embed")
            self.lm_head = self.embed if tied else frozen(get(cfg["lm_head"]))
            self.weight_bytes += self.embed.numel() * 2 + (0 if tied else self.lm_head.numel() * 2)
            if self.gpt2:
                self.wpe = frozen(get("wpe"))
                self.nfw, self.nfb = frozen(get("ln_f_w")), frozen(get("ln_f_b"))
                self.weight_bytes += (self.wpe.numel() + 2 * self.hidden) * 2
            else:
                self.nfw, self.nfb = frozen(get("final_norm")), None
                self.weight_bytes += self.hidden * 2
                # HF LlamaRotaryEmbedding: inv_freq in fp32, cos/sin of cat(freqs, freqs), cast to bf16
                D = self.head_dim
                inv_freq = 1.0 / (cfg["theta"] ** (torch.arange(0, D, 2, dtype=torch.int64).float() / D))
                if "llama3" in cfg:
                    inv_freq = llama3_inv_freq(inv_freq, **cfg["llama3"])
                freqs = torch.outer(torch.arange(self.max_pos, dtype=torch.float32), inv_freq).cuda()
                emb = torch.cat((freqs, freqs), dim=-1)
                self.register_buffer("cos", emb.cos().to(torch.bfloat16), persistent=False)
                self.register_buffer("sin", emb.sin().to(torch.bfloat16), persistent=False)
                torch._dynamo.mark_static_address(self.cos)  # not copied into the CUDA graph each replay
                torch._dynamo.mark_static_address(self.sin)

    def setup_cache(self, batch, max_ctx):
        for L in self.layers:
            L.k_cache = L.v_cache = None
        torch.cuda.empty_cache()
        shape = (batch, self.kv_heads, max_ctx, self.head_dim)
        for L in self.layers:
            L.k_cache = torch.zeros(shape, dtype=torch.bfloat16, device="cuda")
            L.v_cache = torch.zeros(shape, dtype=torch.bfloat16, device="cuda")
            # static addresses (as HF StaticCache): CUDA graphs update the caches in place, no input copies
            torch._dynamo.mark_static_address(L.k_cache)
            torch._dynamo.mark_static_address(L.v_cache)

    def norm(self, x, w, b):
        return F.layer_norm(x, (self.hidden,), w, b, self.eps) if self.gpt2 else rms_norm(x, w, self.eps)

    def attention(self, L, x, pos, cos, sin, decode):
        B, T, _ = x.shape
        H, KVH, D = self.heads, self.kv_heads, self.head_dim
        q, k, v = F.linear(x, L.wqkv, L.bqkv).split([H * D, KVH * D, KVH * D], dim=-1)
        q, k, v = q.view(B, T, H, D), k.view(B, T, KVH, D), v.view(B, T, KVH, D)
        if not self.gpt2:  # rope, half rotation (HF apply_rotary_pos_emb), in bf16 as HF
            c, s = cos[None, :, None, :], sin[None, :, None, :]
            q, k = q * c + rotate_half(q) * s, k * c + rotate_half(k) * s
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # [B, heads, T, D]
        L.k_cache.index_copy_(2, pos, k)
        L.v_cache.index_copy_(2, pos, v)
        if decode:  # T == 1: q heads of one kv head as rows; mask the cache to positions <= pos
            S = L.k_cache.shape[2]
            mask = (torch.arange(S, device=x.device) <= pos[-1]).view(1, 1, 1, S)
            o = F.scaled_dot_product_attention(q.reshape(B, KVH, H // KVH, D), L.k_cache, L.v_cache,
                                               attn_mask=mask)
        else:  # prefill from position 0: causal over its own k/v
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=H != KVH)
            o = o.transpose(1, 2)
        return F.linear(o.reshape(B, T, H * D), L.wo, L.bo)

    def mlp(self, L, x):
        if self.gpt2:
            return F.linear(F.gelu(F.linear(x, L.w1, L.b1), approximate="tanh"), L.w2, L.b2)
        gate, up = F.linear(x, L.w1).chunk(2, dim=-1)
        return F.linear(F.silu(gate) * up, L.w2)

    def forward(self, tokens, pos, decode, last_only=True):
        x = F.embedding(tokens, self.embed)
        cos = sin = None
        if self.gpt2:
            x = x + F.embedding(pos, self.wpe)[None]
        else:
            cos, sin = self.cos[pos], self.sin[pos]
        for L in self.layers:
            x = x + self.attention(L, self.norm(x, L.n1w, L.n1b), pos, cos, sin, decode)
            x = x + self.mlp(L, self.norm(x, L.n2w, L.n2b))
        if last_only:
            x = x[:, -1:]
        return F.linear(self.norm(x, self.nfw, self.nfb), self.lm_head)


def decode_step(model, tokens, pos):  # tokens [B, 1], pos [1] -> next tokens [B, 1] (greedy)
    return model(tokens, pos, True)[:, -1].argmax(dim=-1, keepdim=True)


def prefill(model, tokens, pos):  # tokens [1, P], pos [P] = 0..P-1 -> logits of the last token [1, vocab]
    return model(tokens, pos, False)[:, -1]


# ------------------------------------------------------------------------------------------ measuring
def release():
    torch._dynamo.reset()  # drops compiled code and its CUDA-graph pools
    gc.collect()
    torch.cuda.empty_cache()


def error(e):
    try:
        torch.cuda.synchronize()
        release()
    except Exception:
        pass
    return {"error": f"{type(e).__name__}: {e}"[:1000]}


def compiled_first_call(fn, args, res, **kw):
    """torch.compile(fn, fullgraph=True, **kw), or without fullgraph if dynamo cannot trace it whole; runs
    the first call (the compile: timed apart, into res) and returns the compiled function."""
    for fullgraph in (True, False):
        torch._dynamo.reset()
        f = torch.compile(fn, fullgraph=fullgraph, **kw)
        try:
            t0 = time.perf_counter()
            f(*args)
            torch.cuda.synchronize()
            res.update(seconds=time.perf_counter() - t0, fullgraph=fullgraph)
            return f
        except Exception as e:
            if not fullgraph:
                raise
            res["fullgraph_error"] = f"{type(e).__name__}: {e}"[:500]


def time_runs(fn, runs, warmup):
    """Median milliseconds of fn() over `runs` runs after `warmup`, CUDA events around each."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def measure_decode(model, B, context, steps, vocab, g, compiled):
    model.setup_cache(B, context + steps)
    prompt = torch.randint(0, vocab, (B, context), device="cuda", generator=g)
    tok = prefill(model, prompt, torch.arange(context, device="cuda")).argmax(-1, keepdim=True)  # not timed
    positions = [torch.tensor([context + i], device="cuda") for i in range(steps)]
    res, step = {}, decode_step
    if compiled:
        step = compiled_first_call(decode_step, (model, tok, positions[0]), res, mode="reduce-overhead")
    mark = getattr(torch.compiler, "cudagraph_mark_step_begin", None) if compiled else None

    def run():
        t = tok
        for p in positions:
            if mark:
                mark()
            t = step(model, t, p)
            if compiled:
                t = t.clone()  # the CUDA graph's output buffer is overwritten by the next replay

    # one warm-up pass (and CUDA-graph capture) over the same positions the timed runs use
    res["ms_per_step"] = time_runs(run, runs=3, warmup=1) / steps
    res["tok_s"] = B / res["ms_per_step"] * 1000.0
    return res


def measure_prefill(model, P, vocab, g, compiled):
    model.setup_cache(1, P)
    args = (model, torch.randint(0, vocab, (1, P), device="cuda", generator=g), torch.arange(P, device="cuda"))
    res, fn = {}, prefill
    if compiled:
        fn = compiled_first_call(prefill, args, res, dynamic=False)
    res["ms"] = time_runs(lambda: fn(*args), runs=5, warmup=2)
    res["tok_s"] = P / res["ms"] * 1000.0
    return res


def variants(row, measure, compile_too, peak):
    """Fills row with eager_* and compile_* fields from measure(compiled) (or *_error)."""
    for name, compiled in (("eager", False), ("compile", True)):
        if compiled and not compile_too:
            continue
        torch.cuda.reset_peak_memory_stats()
        try:
            res = measure(compiled)
        except Exception as e:  # out of memory, a compile failure, ...
            res = error(e)
        release()
        peak[0] = max(peak[0], torch.cuda.max_memory_allocated())
        row.update({f"{name}_{k}": v for k, v in res.items()})
        row[f"{name}_peak_bytes"] = torch.cuda.max_memory_allocated()
        if "error" not in res:
            print(f"torch_e2e: {json.dumps(row)}", file=sys.stderr, flush=True)
    return row


def ints(s):
    return [int(x) for x in s.split(",") if x.strip()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, choices=sorted(MODELS))
    ap.add_argument("--weights-out", required=True, help="directory for model.safetensors (and seed.txt)")
    ap.add_argument("--out", required=True, help="write the result object here (JSON)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--decode-batches", type=ints, default=[1, 16])
    ap.add_argument("--prefill-tokens", type=ints, default=[512, 2048])
    ap.add_argument("--context", type=int, default=128, help="prompt tokens ahead of the decode steps")
    ap.add_argument("--decode-steps", type=int, default=64)
    ap.add_argument("--no-compile", action="store_true", help="eager only")
    ap.add_argument("--weights-only", action="store_true", help="write the weights and stop (no timing, no --out)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("torch_e2e.py: torch sees no CUDA device")

    cfg = parse_ir(args.model)
    dims = cfg["dims"]
    path = ensure_weights(cfg, args.model, args.seed, args.weights_out)
    if args.weights_only:
        return
    torch.manual_seed(args.seed)
    model = Model(cfg, path)
    torch.cuda.empty_cache()
    g = torch.Generator(device="cuda").manual_seed(args.seed + 1)  # prompts
    peak = [0]
    report = {
        "model": args.model, "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
        "cuda": torch.version.cuda, "seed": args.seed, "weights_path": str(path),
        "checkpoint_bytes": path.stat().st_size, "weight_bytes": model.weight_bytes,  # bf16, as computed on
        "compute_dtype": "bf16", "eps": cfg["eps"], "rope_theta": cfg["theta"],
        "prefill_logits": "last token only", "fused": "q/k/v and gate/up concatenated into one matmul each",
        "decode": [], "prefill": [],
    }
    torch.set_grad_enabled(False)  # everything below is inference
    for B in args.decode_batches:
        row = {"batch": B, "context": args.context, "steps": args.decode_steps}
        if args.context + args.decode_steps > dims["max_pos"]:
            row["error"] = f"context + steps {args.context + args.decode_steps} exceeds max_pos {dims['max_pos']}"
        else:
            variants(row, lambda c: measure_decode(model, B, args.context, args.decode_steps, dims["vocab"], g, c),
                     not args.no_compile, peak)
        report["decode"].append(row)
    for P in args.prefill_tokens:
        row = {"tokens": P}
        if P > dims["max_pos"]:
            row["error"] = f"{P} tokens exceed max_pos {dims['max_pos']}"
        else:
            variants(row, lambda c: measure_prefill(model, P, dims["vocab"], g, c), not args.no_compile, peak)
        report["prefill"].append(row)
    report["compile_seconds"] = sum(r.get("compile_seconds", 0.0) for r in report["decode"] + report["prefill"])
    report["peak_memory_bytes"] = peak[0]

    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    os.replace(tmp, args.out)

    show = lambda r, k: f"{r[k]:.3f} ms" if isinstance(r.get(k), float) else "-"
    print(f"{args.model} on {report['device']} (torch {report['torch']}), "
          f"weights {model.weight_bytes / 1e9:.2f} GB bf16, peak {peak[0] / 1e9:.2f} GB", file=sys.stderr)
    for r in report["decode"] + report["prefill"]:
        what = f"decode B={r['batch']} ctx={r['context']}" if "batch" in r else f"prefill P={r['tokens']}"
        ms = "ms_per_step" if "batch" in r else "ms"
        print(f"  {what}: eager {show(r, 'eager_' + ms)}, compiled {show(r, 'compile_' + ms)}", file=sys.stderr)
        for k, v in r.items():
            if k.endswith("error"):
                print(f"    {k}: {v}", file=sys.stderr)


if __name__ == "__main__":
    main()
