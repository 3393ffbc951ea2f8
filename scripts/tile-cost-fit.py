#!/usr/bin/env python3
"""Splits the Hopper kernel's time into a cost per K/V block and a cost per tile.

Reads flash_bench JSON (--benchmark_out=FILE --benchmark_out_format=json) of
the seed sweep (B * N = 16384, H * D = 2048, heads_kv = heads) and, for each
dtype, head dim and mask, fits the median time of a call as

    t = a * (K/V blocks a CTA computes) + b * (tiles a CTA computes)

over the lengths measured (least squares; at least two lengths). Blocks and
tiles are counted from the tile in the row's label ("sm90 192x128 ..."), the
132 SMs of an H200 and the kernel's schedule: causal query blocks are aligned
to the last row (tile_scheduler.cuh, first_row; 128-row tiles align so only
from 16 blocks on, which at the sweep's lengths, multiples of 128, changes
nothing), a causal tile computes the key blocks up to its last row, an
unmasked one every key block. `a` is the
steady-state cost of one block, `b` what a tile costs beyond its blocks (its
first and last block's waits, the epilogue, the masked diagonal blocks' extra
work, the schedule's imbalance), in microseconds.

  scripts/tile-cost-fit.py bench_auto.json [--sms 132]
"""
import argparse
import json
import math
import re
from collections import defaultdict


def counts(n, block_m, block_n, causal):
    """(tiles, key blocks) of one head of an N x N call."""
    m = math.ceil(n / block_m)
    if not causal:
        return m, m * math.ceil(n / block_n)
    blocks = 0
    for i in range(m):
        last_row = n - 1 - (m - 1 - i) * block_m
        blocks += math.ceil((last_row + 1) / block_n)
    return m, blocks


def solve2(rows):
    """Least squares for t = a x + b y over rows of (x, y, t)."""
    sxx = sum(x * x for x, _, _ in rows)
    syy = sum(y * y for _, y, _ in rows)
    sxy = sum(x * y for x, y, _ in rows)
    sxt = sum(x * t for x, _, t in rows)
    syt = sum(y * t for _, y, t in rows)
    det = sxx * syy - sxy * sxy
    if abs(det) < 1e-12:
        return None
    return (sxt * syy - syt * sxy) / det, (syt * sxx - sxt * sxy) / det


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json")
    ap.add_argument("--sms", type=int, default=132)
    args = ap.parse_args()
    groups = defaultdict(list)
    for b in json.load(open(args.json))["benchmarks"]:
        m = re.match(r"flash/(\w+)/hd(\d+)/(causal|noncausal)/N(\d+)/", b["name"])
        tile = re.search(r"sm90 (\d+)x(\d+)", b.get("label", ""))
        if not m or not tile:
            continue
        dtype, hd, mask, n = m.group(1), int(m.group(2)), m.group(3), int(m.group(4))
        block_m, block_n = int(tile.group(1)), int(tile.group(2))
        heads = 2048 // hd
        batch = max(1, 16384 // n)
        tiles, blocks = counts(n, block_m, block_n, mask == "causal")
        per_cta = batch * heads / args.sms
        groups[(dtype, hd, mask, block_m, block_n)].append((n, blocks * per_cta, tiles * per_cta,
                                                            b["median_ms"] * 1e3))
    print("| dtype | head_dim | mask | tile | lengths | us per block | us per tile | tile share at the shortest |")
    print("|---|---|---|---|---|---|---|---|")
    for (dtype, hd, mask, block_m, block_n), rows in sorted(groups.items()):
        if len(rows) < 2:
            continue
        fit = solve2([(x, y, t) for _, x, y, t in rows])
        if fit is None:
            continue
        a, b = fit
        _, _, y0, t0 = min(rows)
        lengths = ",".join(str(r[0]) for r in sorted(rows))
        print(f"| {dtype} | {hd} | {mask} | {block_m} x {block_n} | {lengths} | {a:.3f} | {b:.3f} | "
              f"{b * y0 / t0:.2f} of {t0:.1f} us |")


if __name__ == "__main__":
    main()
