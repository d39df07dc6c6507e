#!/usr/bin/env python3
"""bench/summarize_e2e.py — minfer and PyTorch end to end, side by side, from one run's JSON files.

    python3 bench/summarize_e2e.py DIR     # reads DIR/e2e_<model>.json, e2e_unfused_<model>.json and
                                           # torch_e2e_<model>.json

Decode: ms per step (one token of each sequence), minfer's GB/s over its weight bytes as a fraction of the
copy bandwidth measured in the same run (and, on the row below, the same for the persistent decode kernel
where the plan built one), the same counting the KV cache a step reads ("+ KV": every layer's K and V of
each sequence's positions, averaged over the timed steps; from the plan's cache size, so older JSON has it too), minfer unfused (one kernel per IR op), torch.compile(mode=
"reduce-overhead") and eager on the same weights, and minfer's speed-up over torch.compile. Prefill: ms for one prompt. Memory: what minfer
allocates (weights + session) over weights + KV cache.
"""
import json
import pathlib
import sys


def fmt(v, spec=".3f"):
    return "-" if v is None else format(v, spec)


def print_header(phase, metric, metric2=""):
    """The column titles of one phase's table; `metric` and `metric2` head minfer's second and third columns."""
    print(f"  {phase:<14}{'minfer ms':>10}{metric:>8}{metric2:>8}{'unfused ms':>12}{'compile ms':>12}{'eager ms':>10}"
          f"{'vs compile':>12}{'mem':>7}")


def print_row(label, ms, metric, metric2, unfused, compiled, eager, mem, spec):
    """One row: minfer's ms, `metric` and `metric2` (already formatted), the unfused, torch.compile and eager ms
    (None where not measured), all ms to `spec`; minfer's speed-up over torch.compile; minfer's memory ratio."""
    speedup = (fmt(compiled / ms, ".2f") + "x") if compiled else "-"
    print(f"  {label:<14}{ms:>10{spec}}{metric:>8}{metric2:>8}{fmt(unfused, spec):>12}{fmt(compiled, spec):>12}"
          f"{fmt(eager, spec):>10}{speedup:>12}{mem:>7.3f}")


def with_kv(r, ms, copy_gbps):
    """The fraction of the copy bandwidth a decode row's step at `ms` moves, its weights and the KV cache it
    reads: the plan's caches hold batch x (context + steps + 1) positions; step s reads context + s + 1."""
    kv = r["memory"]["kv_cache_bytes"]
    positions = r["context"] + r["steps"] + 1
    read = kv / positions * (r["context"] + (r["steps"] + 1) / 2)
    return (r["memory"]["weight_bytes"] + read) / (ms * 1e-3) / 1e9 / copy_gbps


def main(directory):
    d = pathlib.Path(directory)
    rows = []
    for e2e in sorted(d.glob("e2e_*.json")):
        model = e2e.stem[len("e2e_"):]
        if model.startswith("unfused_"):
            continue
        ours = json.loads(e2e.read_text())
        unfused_path = d / f"e2e_unfused_{model}.json"
        unfused = json.loads(unfused_path.read_text()) if unfused_path.exists() else {"decode": [], "prefill": []}
        udec = {r["batch"]: r for r in unfused.get("decode", [])}
        upre = {r["tokens"]: r for r in unfused.get("prefill", []) if "ms" in r}
        torch_path = d / f"torch_e2e_{model}.json"
        theirs = json.loads(torch_path.read_text()) if torch_path.exists() else {"decode": [], "prefill": []}
        tdec = {r["batch"]: r for r in theirs.get("decode", [])}
        tpre = {r["tokens"]: r for r in theirs.get("prefill", [])}
        print(f"\n{model} on {ours['device']}: copy bandwidth {ours['copy_gbps']:.0f} GB/s")
        print_header("decode", "% copy", "+ KV")
        copy = ours["copy_gbps"]
        for r in ours["decode"]:
            t = tdec.get(r["batch"], {})
            print_row(f"B={r['batch']}", r["ms_per_step"], f"{100 * r['fraction_of_copy']:>7.0f}%",
                      f"{100 * with_kv(r, r['ms_per_step'], copy):>7.0f}%",
                      udec.get(r["batch"], {}).get("ms_per_step"), t.get("compile_ms_per_step"),
                      t.get("eager_ms_per_step"), r["memory"]["allocated_over_weights_plus_kv"], ".3f")
            # The persistent decode kernel, where the plan built one (--decode=persistent), in the same run.
            p = r.get("paths", {}).get("persistent")
            if p:
                print_row("  persistent", p["ms_per_step"], f"{100 * p['fraction_of_copy']:>7.0f}%",
                          f"{100 * with_kv(r, p['ms_per_step'], copy):>7.0f}%", None,
                          t.get("compile_ms_per_step"), None, r["memory"]["allocated_over_weights_plus_kv"], ".3f")
        print_header("prefill", "TFLOP/s")
        for r in ours["prefill"]:
            t = tpre.get(r["tokens"], {})
            if "error" in r:
                print(f"  {'P=' + str(r['tokens']):<14}  {r['error']}")
                continue
            print_row(f"P={r['tokens']}", r["ms"], f"{r['matmul_tflops']:.0f}", "", upre.get(r["tokens"], {}).get("ms"),
                      t.get("compile_ms"), t.get("eager_ms"), r["memory"]["allocated_over_weights_plus_kv"], ".2f")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
