#!/usr/bin/env python3
"""bench/summarize.py — the short table bench/run_gpu.sh prints: each minfer kernel's time, bandwidth and
share of the copy ceiling, beside PyTorch's time on the same shape.

    summarize.py KERNEL_BENCH.json [TORCH_BASELINE.json]

KERNEL_BENCH.json is minfer_kernel_bench --out (an array of results); TORCH_BASELINE.json is
torch_baseline.py --out. "vs torch" is torch's time over minfer's: above 1.00x minfer is faster.
Standard library only.
"""
import json
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"summarize.py: cannot read {path}: {e}", file=sys.stderr)
        return None


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    ours = load(sys.argv[1])
    if ours is None:
        sys.exit(1)
    torch = load(sys.argv[2]) if len(sys.argv) == 3 else None
    torch_ms = {}
    if torch:
        for r in torch.get("results", []):
            torch_ms[(r["kernel"], r["shape"])] = r["torch_ms"]

    ceilings = []
    if ours:
        ceilings.append(f"minfer copy: {ours[0].get('copy_gbps', 0):.0f} GB/s")
    if torch:
        ceilings += [f"torch copy: {torch['copy_gbps']:.0f} GB/s",
                     f"cuBLAS bf16: {torch['cublas_bf16_tflops']:.0f} TFLOP/s",
                     f"({torch['device']}, torch {torch['torch']})"]
    if ceilings:
        print("   ".join(ceilings))
    if not ours:
        print("no minfer results")
        return

    header = ("kernel", "shape", "ms", "GB/s", "% copy", "TFLOP/s", "torch ms", "vs torch")
    rows = []
    for r in ours:
        t = torch_ms.get((r["kernel"], r["shape"]))
        rows.append((r["kernel"], r["shape"], f"{r['ms']:.4f}", f"{r['gbps']:.0f}",
                     f"{100 * r['fraction_of_copy']:.1f}", f"{r['tflops']:.2f}",
                     f"{t:.4f}" if t else "-", f"{t / r['ms']:.2f}x" if t and r["ms"] > 0 else "-"))
    widths = [max(len(str(x[i])) for x in rows + [header]) for i in range(len(header))]
    left = {0, 1}  # text columns; numbers align right
    for row in [header] + rows:
        print("  ".join(str(v).ljust(w) if i in left else str(v).rjust(w) for i, (v, w) in enumerate(zip(row, widths))))
    if torch and torch.get("skipped"):
        print(f"({len(torch['skipped'])} shapes without a torch baseline; see torch_baseline.json)")


if __name__ == "__main__":
    main()
