#!/usr/bin/env python3
"""bench/summarize_clocks.py — what held the GPU's clock while a run went: nvidia-smi's samples, summarised.

    summarize_clocks.py CLOCKS.csv

CLOCKS.csv is `nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active
--format=csv -lms 10` (bench/run_gpu.sh's trace step). A sample is busy when the "GPU idle" reason (bit 0x1)
is clear. Prints how many busy samples had each throttling reason active (SW power cap 0x4, HW slowdown 0x8, SW
thermal 0x20, HW thermal 0x40, HW power brake 0x80), the SM clock over the busy samples (min, median, max), the
SM clock over the samples under the SW power cap, and the largest power reading (a one-second average on most
boards, so it lags: during Llama-2-7B's 46 ms prefills it read 206-240 W while the cap held the clock at
1545-1590 MHz, bench/NOTES.md session 35). nvidia-smi refreshes its values about every 100 ms, so ten 10 ms
samples in a row often repeat one reading, and a run shorter than the whole (a prefill among a benchmark's
decode steps) is a small share of the busy samples: the clock under the cap says what the capped part ran at.
Standard library only.
"""
import csv
import statistics
import sys

REASONS = [(0x4, "SW power cap"), (0x8, "HW slowdown"), (0x20, "SW thermal"), (0x40, "HW thermal"),
           (0x80, "HW power brake")]


def number(text):
    """'1980 MHz' -> 1980.0, '546.33 W' -> 546.33; None where there is no number ([N/A])."""
    try:
        return float(text.strip().split()[0])
    except (ValueError, IndexError):
        return None


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    try:
        with open(sys.argv[1], newline="") as f:
            rows = list(csv.reader(f, skipinitialspace=True))
    except OSError as e:
        sys.exit(f"summarize_clocks.py: cannot read {sys.argv[1]}: {e}")
    if not rows:
        sys.exit(f"summarize_clocks.py: {sys.argv[1]}: no samples")
    header = [h.strip() for h in rows[0]]

    def column(prefix):
        for i, h in enumerate(header):
            if h.startswith(prefix):
                return i
        sys.exit(f"summarize_clocks.py: {sys.argv[1]}: no '{prefix}' column (header: {', '.join(header)})")

    sm, power, reasons = column("clocks.current.sm"), column("power.draw"), column("clocks_event_reasons.active")
    busy, counts, clocks, capped, watts = 0, {bit: 0 for bit, _ in REASONS}, [], [], []
    samples = 0
    for row in rows[1:]:
        if len(row) <= max(sm, power, reasons):
            continue  # a line cut short when the sampler was stopped
        try:
            mask = int(row[reasons].strip(), 16)
        except ValueError:
            continue
        samples += 1
        w = number(row[power])
        if w is not None:
            watts.append(w)
        if mask & 0x1:
            continue
        busy += 1
        for bit, _ in REASONS:
            counts[bit] += bool(mask & bit)
        c = number(row[sm])
        if c is not None:
            clocks.append(c)
            if mask & 0x4:
                capped.append(c)
    print(f"{samples} samples, {busy} busy" + (f"; power up to {max(watts):.0f} W" if watts else ""))
    if not busy:
        return
    print("busy samples with a throttling reason active: "
          + ", ".join(f"{name} {counts[bit]} ({100 * counts[bit] / busy:.0f}%)" for bit, name in REASONS))
    if clocks:
        print(f"SM clock while busy: min {min(clocks):.0f}, median {statistics.median(clocks):.0f}, "
              f"max {max(clocks):.0f} MHz")
    if capped:
        print(f"SM clock under the SW power cap: min {min(capped):.0f}, median {statistics.median(capped):.0f} MHz "
              f"({len(capped)} samples)")


if __name__ == "__main__":
    main()
