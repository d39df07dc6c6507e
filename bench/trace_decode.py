#!/usr/bin/env python3
"""bench/trace_decode.py — where a decode step's (or a prefill's) time goes in the stream, kernel by kernel.

ncu times each kernel alone; the e2e bench times whole steps. Between them nothing said how much each
launch adds to a step replayed from a CUDA graph with programmatic dependent launch, where a kernel's blocks
start (and load their weights) while the one before drains. This runs minfer's C API (libminfer.so through
ctypes) under torch.profiler, whose CUPTI activity records every kernel's first-block start and last-block
end without serialising the stream, and reports for each launch of the plan's decode step:
  * `adds_us`: its end minus the previous kernel's end, the time it adds to the step (medians over steps);
  * `alone_us`: end minus start (its start includes the time its blocks wait for the kernel before);
  * `weight_mb` and `gbs`: the weight bytes it reads (from the plan) over `adds_us`.
The launches are named from the plan (minferc --emit=plan), in order; a greedy step skips the select launch
when the lm_head folds the argmax. With --prefill TOKENS it traces a prefill of one sequence of that many
tokens instead (generate with one new token, --steps times): the prefill's launches as the plan lists them
for one output row, which run as programmatic dependents as in any prefill (MINFER_PREFILL_TRACE's events
between launches serialise them; this does not). Nothing here is needed to build or test minfer.

  python3 bench/trace_decode.py --model tinyllama-1.1b --weights W.safetensors --build build-gpu \
      --out trace.json [--context 128] [--steps 32] [--batch 16] [--prefill 2048]
"""
import argparse
import ctypes
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]


class EngineOptions(ctypes.Structure):
    _fields_ = [("weights", ctypes.c_char_p), ("target", ctypes.c_char_p), ("max_batch", ctypes.c_int64),
                ("max_seq", ctypes.c_int64), ("max_prefill_tokens", ctypes.c_int64)]


class GenerationOptions(ctypes.Structure):
    _fields_ = [("max_new_tokens", ctypes.c_int64), ("temperature", ctypes.c_float), ("top_k", ctypes.c_int),
                ("top_p", ctypes.c_float), ("seed", ctypes.c_uint64), ("stop_tokens", ctypes.c_void_p),
                ("num_stop_tokens", ctypes.c_size_t), ("cuda_graph", ctypes.c_int), ("tokenizer", ctypes.c_void_p),
                ("on_token", ctypes.c_void_p), ("user_data", ctypes.c_void_p), ("decode_path", ctypes.c_int)]


def check(lib, err, what):
    if err:
        msg = ctypes.cast(lib.minfer_error_message(err), ctypes.c_char_p).value.decode()
        sys.exit(f"error: {what}: {msg}")


def plan_launches(build, ir, target, phase="decode", batch=1):
    """The phase's launches of the plan: (op or role, kernel name, weight bytes); a prefill's for one output row
    (the launches after the gather that run for more rows are left out, as the session leaves them)."""
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "plan.json"
        subprocess.run([str(Path(build) / "tools" / "minferc"), str(ir), "--target", target, "--max-batch", str(batch),
                        "--emit=plan", "-o", str(out)], check=True)
        plan = json.loads(out.read_text())
    sizes = {b["name"]: b.get("bytes", 0) for b in plan["buffers"] if b.get("kind") == "weight"}
    rows = []
    for s in plan[phase]["steps"]:
        if s.get("min_out_rows", 0) > 1:
            continue
        w = 0
        for a in s["args"]:
            for k, v in a.items():
                if k == "W" and isinstance(v, str) and v.startswith("@"):
                    w += sizes.get(v, 0)
        rows.append({"op": s.get("op", s.get("role", "")), "kernel": s["kernel"], "layer": s.get("layer", -1),
                     "weight_bytes": w, "skip_when_greedy": s.get("skip_when_greedy", False)})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--weights", required=True)
    ap.add_argument("--build", default="build-gpu")
    ap.add_argument("--out", required=True)
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--target", default="sm_90a", help="the target the plan is printed for (the GPU's)")
    ap.add_argument("--lib", help="the libminfer.so to run (default: BUILD/runtime/libminfer.so)")
    ap.add_argument("--chrome", help="also write the profiler's chrome trace here")
    ap.add_argument("--batch", type=int, default=1, help="sequences decoded together (decode only)")
    ap.add_argument("--prefill", type=int, default=0,
                    help="trace a prefill of this many tokens (--steps of them) instead of decode steps")
    a = ap.parse_args()

    ir = REPO / "examples" / f"{a.model}.ir"
    if a.prefill:
        # Each generate of one new token: the prefill's launches, then select and advance on the last row.
        launches = plan_launches(a.build, ir, a.target, "prefill")
        launches += [{"op": "select + advance", "kernel": "tail", "layer": -1, "weight_bytes": 0}] * 2
        a.context = a.prefill
    else:
        launches = [l for l in plan_launches(a.build, ir, a.target, batch=a.batch) if not l["skip_when_greedy"]]
    lib = ctypes.CDLL(a.lib or str(Path(a.build) / "runtime" / "libminfer.so"))
    lib.minfer_error_message.restype = ctypes.c_void_p
    lib.minfer_engine_load.argtypes = [ctypes.c_char_p, ctypes.POINTER(EngineOptions), ctypes.POINTER(ctypes.c_void_p)]
    lib.minfer_session_create.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.minfer_generate_batch.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.POINTER(ctypes.c_int32)),
                                          ctypes.POINTER(ctypes.c_size_t), ctypes.c_size_t,
                                          ctypes.POINTER(GenerationOptions), ctypes.POINTER(ctypes.c_int32),
                                          ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]
    eo = EngineOptions()
    lib.minfer_engine_options_init(ctypes.byref(eo))
    eo.weights = a.weights.encode()
    if a.prefill:
        eo.max_prefill_tokens = a.prefill
        a.batch = 1
    eo.max_batch = a.batch
    engine = ctypes.c_void_p()
    check(lib, lib.minfer_engine_load(str(ir).encode(), ctypes.byref(eo), ctypes.byref(engine)), "engine load")
    session = ctypes.c_void_p()
    check(lib, lib.minfer_session_create(engine, ctypes.byref(session)), "session")
    go = GenerationOptions()
    lib.minfer_generation_options_init(ctypes.byref(go))
    go.max_new_tokens = 1 if a.prefill else a.steps + 1
    # One prompt per sequence, each its own tokens.
    prompts = [(ctypes.c_int32 * a.context)(*[(7 * i + 13 * b + 3) % 1000 + 10 for i in range(a.context)])
               for b in range(a.batch)]
    ptrs = (ctypes.POINTER(ctypes.c_int32) * a.batch)(*[ctypes.cast(p, ctypes.POINTER(ctypes.c_int32)) for p in prompts])
    lens = (ctypes.c_size_t * a.batch)(*([a.context] * a.batch))
    out = (ctypes.c_int32 * (a.batch * (a.steps + 1)))()
    counts = (ctypes.c_size_t * a.batch)()
    run = lambda: check(lib, lib.minfer_generate_batch(session, ptrs, lens, a.batch, ctypes.byref(go), out,
                                                       a.steps + 1, counts), "generate")
    run()  # warm: kernels loaded, the graph captured once
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(a.steps if a.prefill else 1):
            run()
        torch.cuda.synchronize()
    if a.chrome:
        prof.export_chrome_trace(a.chrome)
    kernels = sorted(((e.time_range.start, e.time_range.end, e.name) for e in prof.events()
                      if e.device_type == torch.autograd.DeviceType.CUDA and "memcpy" not in e.name.lower()
                      and "memset" not in e.name.lower()), key=lambda k: k[0])
    per = len(launches)
    # The decode steps are the last runs of `per` kernels (the prefill and its first-token launches come first).
    steps = []
    i = len(kernels)
    while i - per >= 0 and len(steps) < a.steps:
        steps.append(kernels[i - per:i])
        i -= per
    steps.reverse()
    if len(steps) < 3:
        sys.exit(f"error: found {len(kernels)} kernels, fewer than 3 steps of {per} launches")
    # Every step runs the same kernels in the plan's order; otherwise the plan printed here is not the one the
    # engine ran (another tuning database, another target) and the labels would be wrong.
    names = [k[2] for k in steps[-1]]
    repeats = all([k[2] for k in s] == names for s in steps[:-1])
    if not repeats:
        print(f"warning: the traced steps do not repeat every {per} kernels: the plan printed for --target "
              f"{a.target} may not be the one the engine ran, and the labels below may be wrong", file=sys.stderr)
    adds = [[] for _ in range(per)]
    alone = [[] for _ in range(per)]
    step_us = []
    for s, ks in enumerate(steps[1:], 1):
        # A decode step starts where the step before ended; a prefill (one generate call after another, host
        # work between) where its first kernel starts, and ends at its last kernel before select and advance.
        prev_end = ks[0][0] if a.prefill else steps[s - 1][-1][1]
        step_us.append((ks[-3][1] if a.prefill else ks[-1][1]) - prev_end)
        for j, (st, en, _) in enumerate(ks):
            adds[j].append(en - (ks[j - 1][1] if j else prev_end))
            alone[j].append(en - st)
    rows = []
    for j, l in enumerate(launches):
        ad = statistics.median(adds[j])
        rows.append(dict(l, adds_us=ad, alone_us=statistics.median(alone[j]),
                         gbs=l["weight_bytes"] / (ad * 1e3) if ad > 0 else None,
                         profiled_name=steps[-1][j][2][:120]))
    result = {"model": a.model, "context": a.context, "batch": a.batch, "phase": "prefill" if a.prefill else "decode",
              "steps_traced": len(steps) - 1, "steps_repeat": repeats,
              "step_us_median": statistics.median(step_us), "launches": rows}
    Path(a.out).write_text(json.dumps(result, indent=1))
    # Per op kind, summed over the step.
    by = {}
    for r in rows:
        key = r["op"].split("=")[-1].strip() if "=" in r["op"] else r["op"]
        key = key + (" (%s)" % r["kernel"].split("_epi")[0][:40] if r["layer"] < 0 else "")
        t = by.setdefault(key, [0, 0.0, 0.0, 0.0])
        t[0] += 1
        t[1] += r["adds_us"]
        t[2] += r["weight_bytes"]
        t[3] += r["alone_us"]
    what = f"prefill of {a.prefill} tokens" if a.prefill else f"step of {a.batch} rows"
    print(f"{a.model}: {what} {result['step_us_median']:.1f} us (median of {len(steps) - 1})")
    print(f"{'op':60s} {'n':>4s} {'adds us':>9s} {'us each':>8s} {'alone each':>10s} {'MB':>8s} {'GB/s':>7s}")
    for k, (c, t, w, al) in sorted(by.items(), key=lambda kv: -kv[1][1]):
        print(f"{k[:60]:60s} {c:4d} {t:9.1f} {t / c:8.2f} {al / c:10.2f} {w / 1e6:8.1f} "
              f"{w / (t * 1e3) if t > 0 else 0:7.0f}")


if __name__ == "__main__":
    main()
