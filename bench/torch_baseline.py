#!/usr/bin/env python3
"""bench/torch_baseline.py — PyTorch's time on the shapes minfer_kernel_bench ran, on the same GPU.

Reads the shape list that `minfer_kernel_bench --shapes-out FILE` wrote (a JSON array of objects such as
{"kind": "gemm", "kernel": "...", "shape": "M=1 N=5632 K=2048", "M": 1, "N": 5632, "K": 2048}) and times:

  gemm, gemv        y[M,N] = x[M,K] @ W[N,K]^T in bf16 with torch.matmul (cuBLAS); gemv is M = 1..8
                    (and their variants gemm_tuning, gemm_prologue, ...: the same shape, timed once)
  attention_decode  one query token per sequence: q[batch,heads,1,head_dim] against bf16 K and V
                    [batch,kv_heads,context,head_dim] with F.scaled_dot_product_attention (enable_gqa)
  attention_prefill a causal prompt of `tokens` rows: q, K and V [1,heads,tokens,head_dim] with
                    F.scaled_dot_product_attention(is_causal=True); K and V are expanded to every query head
                    beforehand (not timed), so torch picks its fastest kernel (flash or cuDNN) as for MHA

plus torch's own device-to-device copy bandwidth (the same 1 GiB copy as minfer's ceiling) and the cuBLAS
bf16 GEMM rate on 8192^3 (the compute ceiling). Other kinds are listed under "skipped" with the reason.
Prints one JSON line per result and writes one JSON object to --out.

Timing follows bench/Bench.cpp: inputs rotated across enough copies that they do not sit in L2, a GPU
busy block (torch.cuda._sleep) while all timed runs are enqueued, CUDA events around each run, median.
Runs on the GPU machine (torch 2.11, CUDA 13); nothing here is needed to build or test minfer.
"""
import argparse
import json
import math
import os
import statistics
import sys

import torch
import torch.nn.functional as F

BF16 = 2  # bytes per element

# The busy block ahead of the timed runs: ~1 ms of spinning at ~1.5-2 GHz, enough for the host to
# enqueue 50 runs (a few microseconds each). Where the host is slower than that (session 35 saw 60-95 us a
# torch.matmul launch on a loaded host, and 12-14 us gemms timed as ~90), the block ended before the last run
# was enqueued and the runs were timed at the host's pace: time_median notices (the event after the block has
# already completed when the enqueueing ends) and times again behind a block 4x longer, up to MAX_SLEEP_CYCLES.
SLEEP_CYCLES = 2_000_000
MAX_SLEEP_CYCLES = 128_000_000


def time_median(fn, warmup=10, iters=50):
    """Median milliseconds of fn(i) over `iters` runs after `warmup`; i counts runs, for input rotation."""
    for i in range(warmup):
        fn(i)
    sleep = SLEEP_CYCLES
    while True:
        marks = [torch.cuda.Event(enable_timing=True) for _ in range(iters + 1)]
        torch.cuda.synchronize()
        slept = hasattr(torch.cuda, "_sleep")
        if slept:
            torch.cuda._sleep(sleep)
        marks[0].record()
        for i in range(iters):
            fn(warmup + i)
            marks[i + 1].record()
        # Still queued behind the block: every run was enqueued before the GPU reached the first.
        queued = not slept or not marks[0].query()
        torch.cuda.synchronize()
        if queued or sleep >= MAX_SLEEP_CYCLES:
            break
        sleep *= 4
    if not queued:
        print(f"torch_baseline.py: warning: the host enqueued {iters} runs slower than a {sleep}-cycle busy block; "
              "these times may be the host's launch rate", file=sys.stderr, flush=True)
    return statistics.median(marks[i].elapsed_time(marks[i + 1]) for i in range(iters))


def l2_bytes():
    props = torch.cuda.get_device_properties(0)
    return getattr(props, "L2_cache_size", 50 << 20) or (50 << 20)  # 50 MiB: H100/H200


def copies_for(bytes_per_run):
    """Input copies to rotate through so a run's inputs are not left in L2 by the previous runs: the
    rotation covers 3x L2, capped at 16 copies (decode shapes are a few MB)."""
    return max(1, min(16, math.ceil(3 * l2_bytes() / max(1, bytes_per_run))))


class ShapeError(ValueError):
    """A shape entry this baseline cannot run: the entry is skipped with this reason."""


def need(entry, *keys):
    missing = [k for k in keys if not isinstance(entry.get(k), int)]
    if missing:
        raise ShapeError(f"shape has no integer {', '.join(missing)} (kind {entry['kind']})")
    return [entry[k] for k in keys]


def bench_gemm(entry):
    M, N, K = need(entry, "M", "N", "K")
    bytes_ = BF16 * (M * K + N * K + M * N)
    n = copies_for(bytes_)
    xs = [torch.randn(M, K, device="cuda", dtype=torch.bfloat16) for _ in range(n)]
    ws = [torch.randn(N, K, device="cuda", dtype=torch.bfloat16) for _ in range(n)]  # [out, in] as HF Linear
    ys = [torch.empty(M, N, device="cuda", dtype=torch.bfloat16) for _ in range(n)]

    def run(i):
        j = i % n
        torch.matmul(xs[j], ws[j].t(), out=ys[j])

    return time_median(run), bytes_, 2.0 * M * N * K


def bench_attention_decode(entry):
    B, H, KVH, D, S = need(entry, "batch", "heads", "kv_heads", "head_dim", "context")
    if H % KVH:
        raise ShapeError(f"heads {H} is not a multiple of kv_heads {KVH}")
    bytes_ = BF16 * (2 * B * H * D + 2 * B * KVH * S * D)  # q and out, K and V
    n = copies_for(bytes_)
    qs = [torch.randn(B, H, 1, D, device="cuda", dtype=torch.bfloat16) for _ in range(n)]
    ks = [torch.randn(B, KVH, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(n)]
    vs = [torch.randn(B, KVH, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(n)]

    def run(i):
        j = i % n
        F.scaled_dot_product_attention(qs[j], ks[j], vs[j], enable_gqa=H != KVH)

    return time_median(run), bytes_, 4.0 * B * H * S * D  # QK^T and PV, 2 FLOPs per multiply-add


def bench_attention_prefill(entry):
    B, H, KVH, D, T = need(entry, "batch", "heads", "kv_heads", "head_dim", "tokens")
    if H % KVH:
        raise ShapeError(f"heads {H} is not a multiple of kv_heads {KVH}")
    bytes_ = BF16 * (2 * B * H * T * D + 2 * B * KVH * T * D)  # q and out, K and V (as minfer counts them)
    n = copies_for(bytes_)
    qs = [torch.randn(B, H, T, D, device="cuda", dtype=torch.bfloat16) for _ in range(n)]
    ks = [torch.randn(B, KVH, T, D, device="cuda", dtype=torch.bfloat16).repeat_interleave(H // KVH, dim=1)
          for _ in range(n)]
    vs = [torch.randn(B, KVH, T, D, device="cuda", dtype=torch.bfloat16).repeat_interleave(H // KVH, dim=1)
          for _ in range(n)]

    def run(i):
        j = i % n
        F.scaled_dot_product_attention(qs[j], ks[j], vs[j], is_causal=True)

    return time_median(run), bytes_, 4.0 * B * T * T / 2 * H * D  # causal: half of QK^T and PV


def base_kind(kind):
    """gemm_tuning, gemm_prologue -> gemm (gemv_* -> gemv): a suite's variants of a shape (other tiles, without
    the epilogue, with a folded norm) are timed against the same torch operation as its default kernel, once."""
    for suffix in ("_tuning", "_prologue"):
        if kind.endswith(suffix):
            return kind[: -len(suffix)]
    return kind


BENCHES = {"gemm": bench_gemm, "gemv": bench_gemm, "attention_decode": bench_attention_decode,
           "attention_prefill": bench_attention_prefill}


def copy_gbps():
    nbytes = 1 << 30  # 1 GiB each way, as minfer's measureCeilings: ~20x L2
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda").fill_(0x3C)
    dst = torch.empty_like(src)
    ms = time_median(lambda i: dst.copy_(src), warmup=3, iters=15)
    del src, dst
    return 2.0 * nbytes / (ms * 1e-3) / 1e9  # read + write


def cublas_tflops():
    n = 8192  # large enough that cuBLAS runs at its peak rate on every GPU minfer targets
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    ms = time_median(lambda i: torch.matmul(a, b, out=c), warmup=3, iters=10)
    return 2.0 * n ** 3 / (ms * 1e-3) / 1e12


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", required=True, help="the JSON shape list from minfer_kernel_bench --shapes-out")
    ap.add_argument("--out", help="write the whole result object here")
    args = ap.parse_args()

    with open(args.shapes) as f:
        shapes = json.load(f)
    if not isinstance(shapes, list):
        sys.exit(f"torch_baseline.py: {args.shapes}: expected a JSON array of shapes")
    if not torch.cuda.is_available():
        sys.exit("torch_baseline.py: torch sees no CUDA device")
    torch.manual_seed(0)

    report = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "copy_gbps": copy_gbps(),
        "cublas_bf16_tflops": cublas_tflops(),
        "results": [],
        "skipped": [],
    }
    print(json.dumps({k: report[k] for k in ("device", "torch", "cuda", "copy_gbps", "cublas_bf16_tflops")}),
          flush=True)

    measured = {}  # one torch timing per distinct (kind, dims): several minfer variants may share a shape
    for entry in shapes:
        kind = base_kind(entry.get("kind", ""))
        ident = {k: entry.get(k, "") for k in ("kind", "kernel", "shape")}
        bench = BENCHES.get(kind)
        if bench is None:
            report["skipped"].append({**ident, "reason": f"no torch baseline for kind '{kind}'"})
            continue
        key = json.dumps({**{k: v for k, v in entry.items() if k not in ("kernel", "suite", "shape")}, "kind": kind},
                         sort_keys=True)
        try:
            if key not in measured:
                measured[key] = bench(entry)
                torch.cuda.empty_cache()
        except (ShapeError, RuntimeError) as e:  # RuntimeError: torch refused the shape (out of memory, ...)
            report["skipped"].append({**ident, "reason": str(e)})
            continue
        ms, bytes_, flops = measured[key]
        gbps = bytes_ / (ms * 1e-3) / 1e9
        row = {**ident, "torch_ms": ms, "bytes": bytes_, "flops": flops, "gbps": gbps,
               "tflops": flops / (ms * 1e-3) / 1e12, "fraction_of_copy": gbps / report["copy_gbps"]}
        report["results"].append(row)
        print(json.dumps(row), flush=True)

    for s in report["skipped"]:
        print("skipped:", json.dumps(s), file=sys.stderr)
    if args.out:
        tmp = args.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(report, f, indent=2)
            f.write("\n")
        os.replace(tmp, args.out)


if __name__ == "__main__":
    main()
