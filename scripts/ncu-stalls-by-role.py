#!/usr/bin/env python3
"""Warp-state samples of a warp-specialised sm90 kernel, by role.

Reads the per-SASS-line CSV that `ncu --import R --page source --csv
--print-source sass` writes (scripts/ncu-serving-prefill.sh gzips one per
report) and splits its lines into the producer's (from each
USETMAXREG.DEALLOC to the next USETMAXREG.TRY_ALLOC, in address order) and
the consumers' (the rest). Prints, per role, the samples, the warp
instructions executed and the stall reasons' shares, then the lines with
the most samples. Out-of-line code that the compiler places after the
producer's (the slow paths of either role's mbarrier waits) counts as the
producer's: read the barrier a spin line waits on before crediting it.

  scripts/ncu-stalls-by-role.py source_hd128_bf16-e4m3kv_paged16.csv.gz [lines]
"""
import collections
import csv
import gzip
import sys


def main():
    path = sys.argv[1]
    top_n = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        rows = list(csv.reader(f))
    header = rows[1]
    col = {h: i for i, h in enumerate(header)}
    stalls = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    role = "consumer"
    samples = collections.Counter()
    insts = collections.Counter()
    reasons = collections.defaultdict(collections.Counter)
    lines = []
    for r in rows[2:]:
        if len(r) < len(header):
            continue
        src = r[col["Source"]].strip()
        if "USETMAXREG.DEALLOC" in src:
            role = "producer"
        elif "USETMAXREG.TRY_ALLOC" in src:
            role = "consumer"
        n = int(r[col["Warp Stall Sampling (All Samples)"]] or 0)
        samples[role] += n
        insts[role] += int(r[col["Instructions Executed"]] or 0)
        for h in stalls:
            reasons[role][h] += int(r[col[h]] or 0)
        main_reasons = {h[6:]: int(r[col[h]]) for h in stalls if int(r[col[h]] or 0) > 0.15 * n}
        lines.append((n, role, src, main_reasons))
    for role in ("producer", "consumer"):
        total = sum(reasons[role].values()) or 1
        shares = ", ".join(f"{h[6:]} {v / total:.2f}" for h, v in reasons[role].most_common(8))
        print(f"{role}: {samples[role]} samples, {insts[role]:.3e} warp instructions; {shares}")
    lines.sort(key=lambda t: -t[0])
    for n, role, src, main_reasons in lines[:top_n]:
        print(n, role, src[:70], main_reasons)


if __name__ == "__main__":
    main()
