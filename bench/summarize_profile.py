#!/usr/bin/env python3
"""bench/summarize_profile.py — per-kernel GPU time from `ncu --print-summary per-kernel --csv`.

    python3 bench/summarize_profile.py profile.csv

Prints each kernel's invocations, mean and total time (us), sorted by total, and the sum. run_gpu.sh's
`profile` step profiles a few decode steps of `minferc run` kernel by kernel, fused and unfused.
"""
import csv
import io
import sys


def main(path):
    text = open(path, errors="replace").read()
    start = text.find('"Process ID"')
    if start < 0:
        print(f"{path}: no ncu summary found")
        return 1
    rows = list(csv.DictReader(io.StringIO(text[start:])))
    kernels = {}
    for r in rows:
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        name = r["Kernel Name"].split("(")[0][:90]
        unit = r.get("Metric Unit", "ns")
        scale = {"ns": 1e-3, "us": 1.0, "usecond": 1.0, "nsecond": 1e-3, "ms": 1e3, "msecond": 1e3}.get(unit, 1e-3)
        inv = int(r.get("Invocations", "1") or 1)
        avg = float(r["Average"].replace(",", "")) * scale
        k = kernels.setdefault(name, [0, 0.0])
        k[0] += inv
        k[1] += avg * inv
    total = sum(v[1] for v in kernels.values())
    print(f"{'kernel':<92}{'calls':>7}{'mean us':>10}{'total us':>11}{'share':>7}")
    for name, (n, t) in sorted(kernels.items(), key=lambda kv: -kv[1][1]):
        print(f"{name:<92}{n:>7}{t / n:>10.2f}{t:>11.1f}{100 * t / total:>6.1f}%")
    print(f"{'sum':<92}{sum(v[0] for v in kernels.values()):>7}{'':>10}{total:>11.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
