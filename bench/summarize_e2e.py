#!/usr/bin/env python3
"""bench/summarize_e2e.py — minfer and PyTorch end to end, side by side, from one run's JSON files.

    python3 bench/summarize_e2e.py DIR     # reads DIR/e2e_<model>.json, e2e_unfused_<model>.json and
                                           # torch_e2e_<model>.json

Decode: ms per step (one token of each sequence), minfer's GB/s over its weight bytes as a fraction of the
copy bandwidth measured in the same run, minfer unfused (one kernel per IR op), torch.compile(mode=
"reduce-overhead") and eager on the same weights, and minfer's speed-up over torch.compile. Prefill: ms for one prompt. Memory: what minfer
allocates (weights + session) over weights + KV cache.
"""
import json
import pathlib
import sys


def fmt(v, spec=".3f"):
    return "-" if v is None else format(v, spec)


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
        print(f"  {'decode':<14}{'minfer ms':>10}{'% copy':>8}{'unfused ms':>12}{'compile ms':>12}{'eager ms':>10}"
              f"{'vs compile':>12}{'mem':>7}")
        for r in ours["decode"]:
            t = tdec.get(r["batch"], {})
            c = t.get("compile_ms_per_step")
            u = udec.get(r["batch"], {}).get("ms_per_step")
            print(f"  {'B=' + str(r['batch']):<14}{r['ms_per_step']:>10.3f}{100 * r['fraction_of_copy']:>7.0f}%"
                  f"{fmt(u):>12}{fmt(c):>12}{fmt(t.get('eager_ms_per_step')):>10}"
                  f"{(fmt(c / r['ms_per_step'], '.2f') + 'x') if c else '-':>12}"
                  f"{r['memory']['allocated_over_weights_plus_kv']:>7.3f}")
        print(f"  {'prefill':<14}{'minfer ms':>10}{'TFLOP/s':>8}{'unfused ms':>12}{'compile ms':>12}{'eager ms':>10}"
              f"{'vs compile':>12}{'mem':>7}")
        for r in ours["prefill"]:
            t = tpre.get(r["tokens"], {})
            if "error" in r:
                print(f"  {'P=' + str(r['tokens']):<14}  {r['error']}")
                continue
            c = t.get("compile_ms")
            u = upre.get(r["tokens"], {}).get("ms")
            print(f"  {'P=' + str(r['tokens']):<14}{r['ms']:>10.2f}{r['matmul_tflops']:>8.0f}{fmt(u, '.2f'):>12}"
                  f"{fmt(c, '.2f'):>12}"
                  f"{fmt(t.get('eager_ms'), '.2f'):>10}{(fmt(c / r['ms'], '.2f') + 'x') if c else '-':>12}"
                  f"{r['memory']['allocated_over_weights_plus_kv']:>7.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
