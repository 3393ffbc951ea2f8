#!/usr/bin/env python3
"""Per-row changes of an interleaved A/B from scripts/tile-sweep.sh's logs.

Reads the bench-<variant>-<round>[-<run>].log files that tile-sweep.sh
writes (a folder, or the sweep-logs.tgz a device call returns), takes each
Google Benchmark row's median_ms (or median_us) counter, and prints one
markdown row per benchmark: every round's figure for each variant and each
variant's change against the first, the median of the first's rounds over
the median of the variant's, minus one (positive: the variant is faster).

  scripts/sweep-compare.py sweep-logs.tgz [--filter REGEX] [--base NAME]
"""
import argparse
import collections
import os
import re
import statistics
import sys
import tarfile
import tempfile

LOG = re.compile(r"bench-(.+?)-(\d+)(?:-(\d+))?\.log$")
ROW = re.compile(r"^(\S.*?)(?:/iterations:\d+)?(?:/manual_time)?\s{2,}.*\bmedian_(ms|us)=([0-9.eE+-]+)")


def read_logs(folder):
    """{(run, benchmark): {variant: [figure per round]}}, the variants in file order, the unit."""
    rows = collections.defaultdict(lambda: collections.defaultdict(dict))
    variants, units = [], set()
    for name in sorted(os.listdir(folder)):
        m = LOG.search(name)
        if not m:
            continue
        variant, rnd, run = m.group(1), int(m.group(2)), m.group(3) or "0"
        if variant not in variants:
            variants.append(variant)
        with open(os.path.join(folder, name), errors="replace") as f:
            for line in f:
                r = ROW.match(line)
                if r:
                    rows[(run, r.group(1))][variant][rnd] = float(r.group(3))
                    units.add(r.group(2))
    return rows, variants, units


def variant_order(folder, found):
    """The variants as tile-sweep.sh built them (variants.txt), else as found."""
    order = []
    path = os.path.join(folder, "variants.txt")
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                m = re.match(r"\[(.+?)\]", line)
                if m and m.group(1) in found and m.group(1) not in order:
                    order.append(m.group(1))
    return order + [v for v in found if v not in order]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("logs", help="tile-sweep.sh's $OUT folder or its sweep-logs.tgz")
    ap.add_argument("--filter", default="", help="only benchmarks whose name matches this regex")
    ap.add_argument("--base", default="", help="the variant the others are compared with (default: the first built)")
    args = ap.parse_args()
    folder = args.logs
    tmp = None
    if os.path.isfile(folder):
        tmp = tempfile.TemporaryDirectory()
        with tarfile.open(folder) as t:
            t.extractall(tmp.name)
        folder = tmp.name
    rows, found, units = read_logs(folder)
    if not rows:
        print(f"no bench-<variant>-<round>.log rows with a median in {args.logs}", file=sys.stderr)
        return 1
    variants = variant_order(folder, found)
    base = args.base or ("base" if "base" in variants else variants[0])
    others = [v for v in variants if v != base]
    unit = "/".join(sorted(units))
    print(f"| benchmark | {base} ({unit}) | " + " | ".join(f"{v} | change" for v in others) + " |")
    print("|---|---|" + "---|---|" * len(others))
    pattern = re.compile(args.filter)
    for (run, bench), by_variant in sorted(rows.items()):
        if not pattern.search(bench) or base not in by_variant:
            continue
        b = by_variant[base]
        cells = [", ".join(f"{b[r]:.4g}" for r in sorted(b))]
        for v in others:
            fig = by_variant.get(v, {})
            if not fig:
                cells += ["-", "-"]
                continue
            change = statistics.median(b.values()) / statistics.median(fig.values()) - 1
            cells += [", ".join(f"{fig[r]:.4g}" for r in sorted(fig)), f"{100 * change:+.1f}%"]
        label = bench if run == "0" else f"{bench} (run {run})"
        print(f"| {label} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
