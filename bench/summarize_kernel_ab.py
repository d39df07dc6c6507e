#!/usr/bin/env python3
"""bench/summarize_kernel_ab.py — the table of bench/run_gpu.sh's kernel_ab step: each kernel of this build
(new) against the same kernel of an earlier revision (base), runs alternated in one call, beside PyTorch on
the same shape.

    summarize_kernel_ab.py [--torch TORCH_BASELINE.json] KERNEL_AB_RUN.json ...

Each KERNEL_AB_RUN.json is minfer_kernel_bench --out (an array of results) named kernel_ab_<new|base>_<i>.json.
Per kernel and shape: every run's time in microseconds, in the order run, "new/base" (the best new run over
the best base run: below 1.000 the change is faster), the base runs' spread (slowest over fastest, less one:
what noise the comparison has to beat), and with TORCH_BASELINE.json (torch_baseline.py --out) PyTorch's time
on the shape (the fastest of its timings there) and "vs torch" (that over the best new run: above 1.00x minfer
is faster). A kernel only one side ran is
listed with "-" for the ratio. Standard library only.
"""
import argparse
import json
import os
import re
import sys

RUN_NAME = re.compile(r"kernel_ab_(new|base)_(\d+)\.json$")


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"summarize_kernel_ab.py: cannot read {path}: {e}", file=sys.stderr)
        return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torch", help="torch_baseline.py --out for the same shapes")
    parser.add_argument("runs", nargs="+", help="kernel_ab_<new|base>_<i>.json files")
    args = parser.parse_args()

    runs = {}  # (shape, kernel) -> side -> [(index, us)]
    read = 0
    for path in args.runs:
        m = RUN_NAME.search(os.path.basename(path))
        if not m:
            sys.exit(f"summarize_kernel_ab.py: {path}: expected a name kernel_ab_<new|base>_<i>.json")
        data = load(path)
        if data is None:
            continue  # a run that failed or was cut: the others still count
        read += 1
        side, index = m.group(1), int(m.group(2))
        for r in data:
            runs.setdefault((r["shape"], r["kernel"]), {}).setdefault(side, []).append((index, 1e3 * r["ms"]))
    if not runs:
        print(f"no kernel results in {read} of {len(args.runs)} runs")
        return 1

    torch_us = {}  # shape -> the fastest of torch's timings of it (one per kernel of that shape)
    if args.torch:
        torch = load(args.torch)
        for r in (torch or {}).get("results", []):
            us = 1e3 * r["torch_ms"]
            torch_us[r["shape"]] = min(us, torch_us.get(r["shape"], us))

    def fmt(xs):
        return " ".join(f"{us:.1f}" for _, us in sorted(xs)) or "-"

    header = ("shape", "kernel", "base runs (us)", "new runs (us)", "new/base", "base spread", "torch (us)",
              "vs torch")
    rows = []
    for (shape, kernel), sides in sorted(runs.items()):
        new, base = sides.get("new", []), sides.get("base", [])
        best_new = min((us for _, us in new), default=None)
        best_base = min((us for _, us in base), default=None)
        t = torch_us.get(shape)
        rows.append((shape, kernel, fmt(base), fmt(new),
                     f"{best_new / best_base:.3f}" if best_new and best_base else "-",
                     f"{100 * (max(us for _, us in base) / best_base - 1):.1f}%" if best_base else "-",
                     f"{t:.1f}" if t else "-",
                     f"{t / best_new:.2f}x" if t and best_new else "-"))
    print(f"kernel A/B: {read} runs; best of each side; new/base below 1.000: the change is faster")
    widths = [max(len(str(x[i])) for x in rows + [header]) for i in range(len(header))]
    left = {0, 1}
    for row in [header] + rows:
        print("  ".join(str(v).ljust(w) if i in left else str(v).rjust(w)
                        for i, (v, w) in enumerate(zip(row, widths))).rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
