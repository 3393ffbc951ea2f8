#!/usr/bin/env python3
"""Warpgroup-block work of the Hopper kernel's 192-row tiles, with and
without the pass over hidden top blocks (Mainloop::kPassHidden).

A consumer warpgroup computes S and P V for every block of its tile; with
the pass it skips the tile's top blocks that none of its 64 rows sees
(all of them for a warpgroup of padding rows). Counts follow
tile_scheduler.cuh (first_row's shift, visible_blocks) for a causal or
unmasked call of len_q = len_k = N, one head; no timing, only work.

  scripts/hidden-blocks-model.py [--block_m 192] [--block_n 128] N...
"""
import argparse


def blocks(n, block_m, block_n, causal):
    shift = causal  # 192-row tiles always shift under a mask
    m_blocks = (n + block_m - 1) // block_m
    padding = (block_m - n % block_m) % block_m // 64 * 64 if shift else 0
    base = passed = 0
    for m in range(m_blocks):
        row_begin = m * block_m - padding
        last_row = min(row_begin + block_m, n) - 1
        # Blocks [0, tile_blocks): no left edge, so every tile starts at key 0.
        tile_blocks = (last_row + block_n) // block_n if causal else (n + block_n - 1) // block_n
        for wg in range(block_m // 64):
            first = row_begin + 64 * wg
            r0, r1 = max(first, 0), min(first + 64, n) - 1
            base += tile_blocks
            if r1 < r0:
                continue  # padding rows: every block passed
            passed += (r1 + block_n) // block_n if causal else tile_blocks
    return base, passed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--block_m", type=int, default=192)
    ap.add_argument("--block_n", type=int, default=128)
    ap.add_argument("n", type=int, nargs="+")
    a = ap.parse_args()
    print("| N | causal | warpgroup-blocks | with the pass | saved |")
    print("|---|---|---|---|---|")
    for causal in (True, False):
        for n in a.n:
            base, passed = blocks(n, a.block_m, a.block_n, causal)
            print(f"| {n} | {'yes' if causal else 'no'} | {base} | {passed} | {1 - passed / base:.1%} |")


if __name__ == "__main__":
    main()
