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

With --against B (a second CSV of the same kernel binary, e.g. one call
on two caches), prints both summaries, then the lines whose samples
differ most between the two (matched by offset from the kernel's first
line), and the lines that execute in only one of them.

  scripts/ncu-stalls-by-role.py source_hd128_bf16-e4m3kv_paged16.csv.gz [lines]
  scripts/ncu-stalls-by-role.py source_hd256_bf16_seqused.csv.gz [lines] --against source_hd256_bf16_paged64.csv.gz
"""
import collections
import csv
import gzip
import re
import sys


def opcode(src):
    """A line's opcode, without its predicate (branch targets are absolute
    addresses, which differ between two reports of one binary)."""
    words = re.sub(r"^@!?U?P\w+\s+", "", src).split()
    return words[0] if words else ""


def read(path):
    """Per SASS line (offset from the first line): role, source, samples,
    instructions executed and the main stall reasons; and per-role totals."""
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
    lines = {}
    first = None
    for r in rows[2:]:
        if len(r) < len(header):
            continue
        src = r[col["Source"]].strip()
        if "USETMAXREG.DEALLOC" in src:
            role = "producer"
        elif "USETMAXREG.TRY_ALLOC" in src:
            role = "consumer"
        address = int(r[col["Address"]], 16)
        first = address if first is None else first
        n = int(r[col["Warp Stall Sampling (All Samples)"]] or 0)
        executed = int(r[col["Instructions Executed"]] or 0)
        samples[role] += n
        insts[role] += executed
        for h in stalls:
            reasons[role][h] += int(r[col[h]] or 0)
        main_reasons = {h[6:]: int(r[col[h]]) for h in stalls if int(r[col[h]] or 0) > 0.15 * n}
        lines[address - first] = (n, executed, role, src, main_reasons)
    return lines, samples, insts, reasons


def summary(path, lines, samples, insts, reasons, top_n):
    print(f"== {path}")
    for role in ("producer", "consumer"):
        total = sum(reasons[role].values()) or 1
        shares = ", ".join(f"{h[6:]} {v / total:.2f}" for h, v in reasons[role].most_common(8))
        print(f"{role}: {samples[role]} samples, {insts[role]:.3e} warp instructions; {shares}")
    for n, _, role, src, main_reasons in sorted(lines.values(), key=lambda t: -t[0])[:top_n]:
        print(n, role, src[:70], main_reasons)


def compare(a, b, top_n):
    common = [o for o in a if o in b]
    if sum(opcode(a[o][3]) == opcode(b[o][3]) for o in common) < 0.99 * max(len(a), len(b)):
        print("(the two reports' SASS differ: not the same kernel binary; no line comparison)")
        return
    print("== lines by samples, A -> B (offset from the kernel's first line)")
    deltas = sorted(common, key=lambda o: -abs(b[o][0] - a[o][0]))
    for o in deltas[:top_n]:
        print(f"{b[o][0] - a[o][0]:+8d} {o:#07x} {a[o][2]:8s} samples {a[o][0]:7d} -> {b[o][0]:7d}, "
              f"executed {a[o][1]:10d} -> {b[o][1]:10d}  {a[o][3][:60]}")
    for name, x, y in (("A", a, b), ("B", b, a)):
        only = [o for o in x if x[o][1] > 0 and y.get(o, (0, 0))[1] == 0]
        if only:
            print(f"== executed only in {name}: {len(only)} lines, {sum(x[o][1] for o in only):.3e} warp "
                  f"instructions, {sum(x[o][0] for o in only)} samples")


def main():
    args = sys.argv[1:]
    against = None
    if "--against" in args:
        k = args.index("--against")
        against = args[k + 1]
        del args[k:k + 2]
    path = args[0]
    top_n = int(args[1]) if len(args) > 1 else 20
    a = read(path)
    summary(path, *a, top_n)
    if against:
        b = read(against)
        summary(against, *b, top_n)
        compare(a[0], b[0], top_n)


if __name__ == "__main__":
    main()
