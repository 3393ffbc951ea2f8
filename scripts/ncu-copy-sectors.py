#!/usr/bin/env python3
"""Per copy opcode of a kernel, from ncu's per-SASS-line source counters
(`ncu --page source --csv`, as scripts/ncu-serving-prefill.sh writes them,
gzipped or not): instructions executed, and per instruction the L1 tag
requests, the L2 sectors and ncu's ideal sectors, and the shared-memory
wavefronts with their excess. docs/perf/fp8-prefill.md reads the e4m3
producer's LDGSTS from it.

  scripts/ncu-copy-sectors.py source_hd256_bf16-e4m3kv_seqused.csv.gz
"""
import csv
import gzip
import signal
import sys


def number(row, index, name):
    try:
        return float(row[index[name]].replace(",", ""))
    except (KeyError, ValueError):
        return 0.0


def main(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        rows = list(csv.reader(f))
    header = next(r for r in rows if "Source" in r and "Address" in r)
    index = {name: i for i, name in enumerate(header)}
    totals = {}
    for row in rows[rows.index(header) + 1:]:
        if len(row) != len(header):
            continue
        words = row[index["Source"]].split()
        if not words:
            continue
        op = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
        if not op.startswith(("LDG", "STG", "LDGSTS", "UTMA", "UBLKCP")):
            continue
        t = totals.setdefault(op, [0.0] * 6)
        for k, name in enumerate(("Instructions Executed", "L1 Tag Requests Global", "L2 Theoretical Sectors Global",
                                  "L2 Theoretical Sectors Global Ideal", "L1 Wavefronts Shared",
                                  "L1 Wavefronts Shared Excessive")):
            t[k] += number(row, index, name)
    print("| opcode | executed | tag requests / instr | L2 sectors / instr | ideal | smem wavefronts / instr | excess |")
    print("|---|---|---|---|---|---|---|")
    for op, t in sorted(totals.items(), key=lambda kv: -kv[1][0]):
        n = t[0] or 1.0
        print(f"| {op} | {t[0]:.3g} | {t[1] / n:.2f} | {t[2] / n:.2f} | {t[3] / n:.2f} | {t[4] / n:.2f} | {t[5] / n:.2f} |")


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet under `| head`
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
