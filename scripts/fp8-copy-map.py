#!/usr/bin/env python3
"""The e4m3-cache producer's copy mappings (kernels/sm90/producer.cuh,
ConvertProducer), modelled on the host: which shared-memory byte each
thread's 16-byte cp.async writes and which key row and byte column it
reads.

Checks, for the head dims where whole-line copies apply (128 with 128-key
blocks, 256 with 64-key blocks):

- the whole-line mapping (kLineCopies: eight lanes a 128-byte line) writes
  exactly the (destination, row, column) set of the pair mapping (four
  lanes a row), so the bytes land where the consumers and the widening
  expect them;
- every copy instruction of a warp reads four whole, 128-byte-aligned
  lines under the whole-line mapping, and half lines under the pair one.

  scripts/fp8-copy-map.py        # exit 1 on a mismatch
"""
import sys

SWIZZLE = 128  # bytes a shared-memory line (kSwizzleBytes)


def pair_mapping(hd, bn):
    """{(thread, instruction): (dst, row, col)} of the pair mapping."""
    lines = hd // 64 * bn
    half = lines // 2
    per_thread = (half * 4 + 127) // 128
    out = {}
    for t in range(128):
        l0, p = t // 4, t % 4
        s0 = l0 * SWIZZLE + ((2 * p) ^ (l0 % 8)) * 16
        s1 = l0 * SWIZZLE + ((2 * p + 1) ^ (l0 % 8)) * 16
        for i in range(per_thread):
            lo = l0 + 32 * i
            if lo >= half:
                continue
            up = lo + half
            out[(t, 2 * i)] = (s1 + i * 32 * SWIZZLE + half * SWIZZLE, lo % bn, (lo // bn) * 64 + 16 * p)
            out[(t, 2 * i + 1)] = (s0 + i * 32 * SWIZZLE + half * SWIZZLE, up % bn, (up // bn) * 64 + 16 * p)
    return out


def line_mapping(hd, bn):
    """{(thread, instruction): (dst, row, col)} of the whole-line mapping."""
    half = hd // 64 * bn // 2
    per_thread = bn * (hd // 128) * 8 // 128
    out = {}
    for t in range(128):
        k, q = t % 8, t // 8
        h, p, phase = k // 4, k % 4, q % 8
        s0, s1 = ((2 * p) ^ phase) * 16, ((2 * p + 1) ^ phase) * 16
        a = q * SWIZZLE + h * bn * SWIZZLE
        lo, up = a + half * SWIZZLE + s1, a + s0
        mix = q * SWIZZLE + (bn * SWIZZLE + s0 if h else half * SWIZZLE + s1)
        for c in range(per_thread):
            g, r = 16 * c // bn, 16 * c % bn
            lo0, lo1 = 2 * g * bn < half, (2 * g + 1) * bn < half
            assert lo0 or not lo1
            base = lo if lo1 else (mix if lo0 else up)
            out[(t, c)] = ((2 * g * bn + r) * SWIZZLE + base, q + r, g * 128 + 16 * k)
    return out


def whole_lines(mapping):
    """True if every warp instruction reads only whole 128-byte lines."""
    by_instr = {}
    for (t, c), (_, row, col) in mapping.items():
        by_instr.setdefault((t // 32, c), set()).add((row, col))
    for chunks in by_instr.values():
        lines = {}
        for row, col in chunks:
            lines.setdefault((row, col // 128), set()).add(col % 128 // 16)
        if any(len(v) != 8 for v in lines.values()):
            return False
    return True


def main():
    ok = True
    for hd, bn in ((128, 128), (256, 64)):
        old, new = pair_mapping(hd, bn), line_mapping(hd, bn)
        same = sorted(old.values()) == sorted(new.values())
        dst_unique = len({v[0] for v in new.values()}) == len(new)
        print(f"head_dim {hd}, {bn}-key blocks: {len(new)} copies; same bytes as the pair mapping: {same}; "
              f"destinations distinct: {dst_unique}; whole lines: pair {whole_lines(old)}, line {whole_lines(new)}")
        ok = ok and same and dst_unique and whole_lines(new)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
