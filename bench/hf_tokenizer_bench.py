#!/usr/bin/env python3
"""Encoding speed of Hugging Face `tokenizers` (tokenizer.json, what transformers' fast tokenizers run) on
the text minfer_tokenizer_bench encodes, one thread, best of 5, whole and line by line.

    python3 bench/hf_tokenizer_bench.py --text FILE --out hf.json DIR...

For a SentencePiece checkpoint give the directory of its tokenizer.json (HF's converted form, which gives the
same ids). The checksum is computed as minfer_tokenizer_bench computes it: equal checksums, equal ids.
"""
import argparse
import json
import os
import time

os.environ["TOKENIZERS_PARALLELISM"] = "false"  # one thread, as minfer's encode


def checksum(ids):
    s = 0
    for i in ids:
        s = (s * 1000003 + i) % (1 << 64)
    return str(s)


def load(d):
    from tokenizers import Tokenizer
    t = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    return "tokenizers (Rust)", lambda s: t.encode(s, add_special_tokens=False).ids


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--text", required=True)
    ap.add_argument("--out")
    ap.add_argument("dirs", nargs="+")
    a = ap.parse_args()
    text = open(a.text, encoding="utf-8", newline="").read()
    nbytes = len(text.encode("utf-8"))
    results = []
    for d in a.dirs:
        impl, encode = load(d)
        name = os.path.basename(os.path.normpath(d))
        for mode, parts in (("whole", [text]), ("lines", text.split("\n"))):
            best, ids = 1e30, []
            for _ in range(5):
                t0 = time.perf_counter()
                ids = [i for p in parts for i in encode(p)]
                best = min(best, time.perf_counter() - t0)
            print(f"{name} ({mode}): {nbytes} bytes -> {len(ids)} tokens in {best * 1e3:.1f} ms "
                  f"({nbytes / 1e6 / best:.2f} MB/s, {impl}), checksum {checksum(ids)}")
            results.append({"tokenizer": name, "impl": impl, "mode": mode, "bytes": nbytes, "tokens": len(ids),
                            "seconds": best, "mb_per_s": nbytes / 1e6 / best, "checksum": checksum(ids)})
    if a.out:
        with open(a.out, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
