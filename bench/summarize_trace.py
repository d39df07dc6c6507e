#!/usr/bin/env python3
"""bench/summarize_trace.py — a prefill trace (MINFER_PREFILL_TRACE) by op and by kernel family.

    python3 bench/summarize_trace.py prefill_trace.tsv

The trace has one row a launch: its layer, IR op, kernel spec, rows, start and time in microseconds (the
time between the events recorded before it and before the next launch), then the total. This prints the
time of each op summed over the layers, each kernel family's share, and what the rows do not cover.
"""
import csv
import sys
from collections import defaultdict


def op_kind(op):
    # "%q0 = matmul" -> "matmul"; the value names differ per layer, the op does not.
    return op.split("=", 1)[-1].strip() or op


def main(path):
    rows, total = [], None
    with open(path) as f:
        for r in csv.DictReader(f, delimiter="\t"):
            if r["launch"] == "total":
                total = float(r["took_us"])
            else:
                rows.append(r)
    if not rows or total is None:
        print(f"{path}: no launches or no total")
        return 1
    by_spec = defaultdict(lambda: [0, 0.0])
    by_op = defaultdict(lambda: [0, 0.0])
    for r in rows:
        t = float(r["took_us"])
        layer = "layer" if int(r["layer"]) >= 0 else "outside"
        key = (layer, op_kind(r["op"]), r["spec"].split("_")[0])
        by_op[key][0] += 1
        by_op[key][1] += t
        by_spec[r["spec"]][0] += 1
        by_spec[r["spec"]][1] += t
    covered = sum(v[1] for v in by_op.values())
    print(f"{'where':<9}{'op':<34}{'family':<16}{'calls':>6}{'mean us':>10}{'total us':>11}{'share':>7}")
    for (layer, op, fam), (n, t) in sorted(by_op.items(), key=lambda kv: -kv[1][1]):
        print(f"{layer:<9}{op[:33]:<34}{fam[:15]:<16}{n:>6}{t / n:>10.1f}{t:>11.1f}{100 * t / total:>6.1f}%")
    print(f"{'launches':<59}{len(rows):>6}{'':>10}{covered:>11.1f}")
    print(f"{'total (first event to last)':<75}{total:>11.1f}")
    print()
    print(f"{'kernel spec':<92}{'calls':>6}{'mean us':>10}")
    for spec, (n, t) in sorted(by_spec.items(), key=lambda kv: -kv[1][1])[:12]:
        print(f"{spec[:91]:<92}{n:>6}{t / n:>10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
