#!/usr/bin/env python3
"""bench/best_per_shape.py — the fastest minfer kernel of each shape against PyTorch on that shape: the figure
issue 11 judges the fused prefill matmuls by (the best tile with its fused epilogue, as the autotuner would
pick it, against a bare cuBLAS matmul), and how many shapes reach the bar.

    best_per_shape.py KERNEL_BENCH.json [--torch TORCH_BASELINE.json] [--exclude REGEX] [--bar 0.95]

KERNEL_BENCH.json is minfer_kernel_bench --out (an array of results); TORCH_BASELINE.json is
torch_baseline.py --out (the fastest of its timings of a shape). --exclude leaves out the kernels whose name
matches (for the gemm_fused suite, '_epi_none' drops the bare variants that only show what an epilogue
costs). "vs torch" is torch's time over minfer's: at or above --bar (default 0.95) counts as reaching it.
"epilogue (us)" is what the best kernel's epilogue costs: its time over the same tile's bare variant (the name
up to "_epi_" + "_epi_none", run on the shape, excluded or not), where there is one. Standard library only.
"""
import argparse
import json
import re
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"best_per_shape.py: cannot read {path}: {e}")


def shape_key(shape):
    """"M=512 N=2048 K=2048" -> (512, 2048, 2048) in the order written, so shapes sort by their numbers."""
    out = []
    for tok in shape.split():
        _, _, value = tok.partition("=")
        out.append(int(value) if value.isdigit() else 0)
    return tuple(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernel_bench", help="minfer_kernel_bench --out")
    ap.add_argument("--torch", help="torch_baseline.py --out")
    ap.add_argument("--exclude", help="leave out the kernels whose name matches this regular expression")
    ap.add_argument("--bar", type=float, default=0.95, help="the vs-torch ratio a shape should reach")
    args = ap.parse_args()
    try:
        exclude = re.compile(args.exclude) if args.exclude else None
    except re.error as e:
        sys.exit(f"best_per_shape.py: --exclude '{args.exclude}' is not a regular expression: {e}")

    ours = load(args.kernel_bench)
    if not isinstance(ours, list):
        sys.exit(f"best_per_shape.py: {args.kernel_bench}: expected a JSON array of kernel results")
    torch_us = {}
    if args.torch:
        for r in load(args.torch).get("results", []):
            us = 1e3 * r["torch_ms"]
            torch_us[r["shape"]] = min(us, torch_us.get(r["shape"], us))

    by_shape, every = {}, {}
    for r in ours:
        every[(r["shape"], r["kernel"])] = min(1e3 * r["ms"], every.get((r["shape"], r["kernel"]), float("inf")))
        if exclude and exclude.search(r["kernel"]):
            continue
        by_shape.setdefault(r["shape"], []).append((1e3 * r["ms"], r["kernel"]))
    if not by_shape:
        sys.exit("best_per_shape.py: no kernel results" + (" left after --exclude" if exclude else ""))

    def epilogue(shape, kernel, us):
        """The best kernel's time over its tile's bare variant's, '-' where it is bare or has none."""
        tile, sep, epi = kernel.partition("_epi_")
        bare = every.get((shape, tile + "_epi_none"))
        return f"{us - bare:+.1f}" if sep and epi != "none" and bare is not None else "-"

    header = ("shape", "torch (us)", "best (us)", "vs torch", "kernel", "runner-up (us)", "epilogue (us)")
    rows, reached, compared = [], 0, 0
    for shape in sorted(by_shape, key=shape_key):
        runs = sorted(by_shape[shape])
        us, kernel = runs[0]
        t = torch_us.get(shape)
        if t:
            compared += 1
            reached += t / us >= args.bar
        rows.append((shape, f"{t:.1f}" if t else "-", f"{us:.1f}", f"{t / us:.3f}x" if t else "-", kernel,
                     f"{runs[1][0]:.1f}" if len(runs) > 1 else "-", epilogue(shape, kernel, us)))
    print(f"best kernel of each shape: {reached} of {compared} shapes at or above {args.bar:.2f}x torch"
          + (f" ({len(rows) - compared} without a torch time)" if compared < len(rows) else ""))
    widths = [max(len(x[i]) for x in rows + [header]) for i in range(len(header))]
    left = {0, 4}  # text columns; numbers align right
    for row in [header] + rows:
        print("  ".join(v.ljust(w) if i in left else v.rjust(w) for i, (v, w) in enumerate(zip(row, widths))).rstrip())


if __name__ == "__main__":
    main()
