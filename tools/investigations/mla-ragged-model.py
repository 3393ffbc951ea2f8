#!/usr/bin/env python3
# How long does a ragged MLA decode batch take when each CTA walks one
# (sequence, 64-row block, split), one CTA an SM? A list-scheduling model:
# every CTA costs its pairs of 64-key blocks plus one pair for its start,
# and CTAs go to the first free SM in launch order (blockIdx.z, the
# sequence, slowest). Prints, for flash_bench --mla's ragged rows (64 and
# 128 sequences at 128 heads, lengths 16384 (i + 1) / batch dealt in the
# bench's shuffled order), the time in pair-times in launch order, with
# the longest sequences first, and the lower bound (all work over all SMs).
#
#   python3 tools/investigations/mla-ragged-model.py [num_sms=132] [splits=1]
import heapq
import sys


def lengths(batch, keys=16384):
    # bench/mla_rows.cpp's mla_lengths: the same shuffle.
    out = [keys * (i + 1) // batch for i in range(batch)]
    state = 0x9E3779B97F4A7C15
    for i in range(batch - 1, 0, -1):
        state = (state * 6364136223846793005 + 1442695040888963407) & ((1 << 64) - 1)
        j = (state >> 33) % (i + 1)
        out[i], out[j] = out[j], out[i]
    return out


def makespan(costs, sms):
    free = [0.0] * sms
    for c in costs:
        t = heapq.heappop(free)
        heapq.heappush(free, t + c)
    return max(free)


def ctas(lens, splits, row_blocks=2):
    out = []
    for n in lens:
        pairs = (n + 127) // 128
        per = -(-pairs // splits)
        for _ in range(row_blocks):
            for s in range(splits):
                out.append(max(0, min(per, pairs - s * per)) + 1.0)
    return out


def main():
    sms = int(sys.argv[1]) if len(sys.argv) > 1 else 132
    splits = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    for batch in (64, 128):
        lens = lengths(batch)
        launch = ctas(lens, splits)
        longest = ctas(sorted(lens, reverse=True), splits)
        print(f"{batch} sequences, {splits} split(s): launch order {makespan(launch, sms):.0f}, "
              f"longest first {makespan(longest, sms):.0f}, lower bound {sum(launch) / sms:.0f} pair-times")


if __name__ == "__main__":
    main()
