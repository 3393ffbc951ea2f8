#!/usr/bin/env python3
"""Host cost model of the Hopper kernel's static schedule against a greedy
longest-first one (FlashAttention-4's SingleTileLPTScheduler on sm90: one CTA
a tile, query blocks longest first within L2-sized head sections, each SM
taking the next tile as it frees).

A tile costs its visible K/V blocks plus 1 (prologue and epilogue). flash:
causal pairs (block M-1-j with block j of one head), middles after every
head's pairs, dealt round-robin over min(132, units) CTAs (unit_map.h). The
seed sweep's shapes: B * N = 16384 tokens, H * D = 2048. Prints the busiest
CTA's load over the mean for each. The model counts neither L2 reuse nor the
power cap, so it overstates what balance is worth
(docs/perf/sm90-schedule.md).

  python3 scripts/sched-balance-model.py
"""
import heapq
import math

SMS = 132


def ceil_div(a, b):
    return -(-a // b)


def greedy(n, heads, tile_m, tile_n, head_dim, causal):
    blocks_m = ceil_div(n, tile_m)
    kv_bytes = n * 2 * head_dim * 2
    section = 1 if kv_bytes > 50 * 2**20 else 1 << int(math.log2(50 * 2**20 // kv_bytes))
    order = []
    for s in range(ceil_div(heads, section)):
        in_section = range(s * section, min(heads, (s + 1) * section))
        for b in range(blocks_m):
            order.extend(blocks_m - 1 - b for _ in in_section)

    def cost(m):
        return (ceil_div(min(n, (m + 1) * tile_m), tile_n) if causal else ceil_div(n, tile_n)) + 1

    loads = [0.0] * SMS
    for m in order:
        heapq.heappush(loads, heapq.heappop(loads) + cost(m))
    return max(loads) / (sum(cost(m) for m in order) / SMS)


def static(n, heads, tile_m, tile_n, causal):
    blocks_m = ceil_div(n, tile_m)
    first = n - blocks_m * tile_m if causal else 0  # masked calls shift the padding into block 0

    def cost(m):
        if not causal:
            return ceil_div(n, tile_n) + 1
        return ceil_div(min(n, first + (m + 1) * tile_m), tile_n) + 1

    if causal:
        units = [cost(blocks_m - 1 - j) + cost(j) for _ in range(heads) for j in range(blocks_m // 2)]
        if blocks_m % 2:
            units += [cost(blocks_m // 2)] * heads
    else:
        units = [cost(m) for _ in range(heads) for m in range(blocks_m)]
    grid = min(SMS, len(units))
    loads = [0.0] * grid
    for i, u in enumerate(units):
        loads[i % grid] += u
    return max(loads) / (sum(units) / SMS)


def longest_first(n, heads, tile_m, tile_n, head_dim, causal, section_bytes=25 << 20, min_blocks=22):
    """UnitMap's longest-first walk (docs/history/patches/2026-12-04-sm90-longest-first.patch):
    single tiles; heads in sections whose K/V fit section_bytes; within a
    section by query block, every other section reversed, the last one
    longest first; slots dealt snake-wise over the rounds. Calls the launcher
    leaves on pairs (not causal, not 192-row tiles, fewer than min_blocks
    blocks) are costed as static()."""
    blocks_m = ceil_div(n, tile_m)
    if not causal or tile_m != 192 or blocks_m < min_blocks:
        return static(n, heads, tile_m, tile_n, causal)
    first = n - blocks_m * tile_m

    def cost(m):
        return ceil_div(min(n, first + (m + 1) * tile_m), tile_n) + 1

    fit = section_bytes // (n * 2 * head_dim * 2)
    section = min(heads, 1 << (fit.bit_length() - 1)) if fit >= 1 else 1
    sections = ceil_div(heads, section)
    order = []
    for s in range(sections):
        heads_here = min(section, heads - s * section)
        for step in range(blocks_m):
            m = blocks_m - 1 - step if (sections - 1 - s) % 2 == 0 else step
            order.extend(cost(m) for _ in range(heads_here))
    grid = min(SMS, len(order))
    loads = [0.0] * grid
    for i, c in enumerate(order):
        rnd, pos = divmod(i, grid)
        loads[pos if rnd % 2 == 0 else min(grid, len(order) - rnd * grid) - 1 - pos] += c
    return max(loads) / (sum(order) / SMS)


def main():
    tiles = {64: (192, 128), 128: (128, 128), 256: (128, 64)}  # flash's and FA4's, but FA4's hd256 is 128 x 80
    print("| head_dim | causal | N | flash static | greedy longest-first | static longest-first (patch) |")
    print("|---|---|---|---|---|---|")
    for d, (tm, tn) in tiles.items():
        for causal in (False, True):
            for n in (512, 1024, 2048, 4096, 8192, 16384):
                heads = (16384 // n) * (2048 // d)
                print(f"| {d} | {'yes' if causal else 'no'} | {n} | {static(n, heads, tm, tn, causal):.3f} "
                      f"| {greedy(n, heads, tm, tn, d, causal):.3f} | {longest_first(n, heads, tm, tn, d, causal):.3f} |")


if __name__ == "__main__":
    main()
