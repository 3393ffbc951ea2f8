#!/usr/bin/env python3
"""The e4m3-cache producer's copies and widening (kernels/sm90/producer.cuh,
ConvertProducer) and the e4m3 Q K^T's Q order (kernels/sm90/mainloop.cuh,
convert_q), modelled on the host from the code's formulas.

Checks, at the head dims and block widths the kernels use:

- every (key row, byte column) of a block is copied exactly once;
- every warp copy instruction reads whole 32-byte sectors and lands the two
  16-byte chunks of each in one aligned 32-byte pair of shared memory: the
  hardware then asks L2 for the sector once (scripts/probes/ldgsts-wavefronts.cu
  measured 3.7x the copy time when a sector's chunks land apart);
- the widening reads only the chunks the thread copied, writes every slot of
  the widened block exactly once, each 16-byte bf16/fp16 chunk where TMA's
  128-byte swizzle puts it, and each of its shared-memory instructions is free
  of bank conflicts (a quarter warp's eight 16-byte accesses in eight distinct
  slots);
- at head dims 128 and 256 (K left e4m3 for Q K^T), K's e4m3 columns and Q's
  split (convert_q) are in the same order.

  scripts/fp8-copy-map.py        # exit 1 on a failed check
"""
import sys

SWIZZLE = 128  # bytes a shared-memory line (kSwizzleBytes)
THREADS = 128  # the producer warpgroup


class Geometry:
    def __init__(self, hd, bn):
        self.hd, self.bn = hd, bn
        self.lines = hd // 64 * bn
        self.half = self.lines // 2
        self.per_thread = (self.half * 4 + THREADS - 1) // THREADS
        self.step = THREADS // 4

    def pairs(self):
        """(thread, i, lower line, p, phase) of every valid pair."""
        for t in range(THREADS):
            line0, p = t // 4, t % 4
            for i in range(self.per_thread):
                lo = line0 + self.step * i
                if lo < self.half:
                    yield t, i, lo, p, line0 % 8

    def source(self, line, p):
        return line % self.bn, (line // self.bn) * 64 + 16 * p

    def chunk(self, line0, p, h):
        """Pair.chunk0 / chunk1: the e4m3 chunk of item h in its upper line, line0's offset."""
        return line0 * SWIZZLE + ((4 * (p // 2) + 2 * h + p % 2) ^ (line0 % 8)) * 16

    def copies(self):
        """{(warp, i, h): {lane: (dst, row, col)}}: one warp instruction each."""
        out = {}
        for t, i, lo, p, _ in self.pairs():
            line0 = t // 4
            for h in (0, 1):
                dst = self.chunk(line0, p, h) + (i * self.step + self.half) * SWIZZLE
                row, col = self.source(lo + h * self.half, p)
                out.setdefault((t // 32, i, h), {})[t % 32] = (dst, row, col)
        return out

    def widening(self):
        """{(warp, i, k): {lane: (kind, offset, item)}}: the widening's instructions in program order."""
        out = {}
        for t, i, lo, p, phase in self.pairs():
            line0 = t // 4
            h0 = line0 % 2
            read0 = self.chunk(line0, p, h0) + self.half * SWIZZLE
            read1 = read0 ^ 32
            write0 = line0 * SWIZZLE + ((2 * p) ^ phase) * 16 + h0 * self.half * SWIZZLE
            write1 = write0 ^ 16
            apart = (1 - 2 * h0) * self.half * SWIZZLE
            base = i * self.step * SWIZZLE
            items = (h0, 1 - h0)
            ops = [("read", base + read0, items[0]), ("read", base + read1, items[1]),
                   ("write", base + write0, (items[0], 0)), ("write", base + write1, (items[0], 1)),
                   ("write", base + write0 + apart, (items[1], 0)), ("write", base + write1 + apart, (items[1], 1))]
            for k, op in enumerate(ops):
                out.setdefault((t // 32, i, k), {})[t % 32] = (op, lo, p)
        return out


def conflict_free(offsets_by_lane):
    for q in range(0, 32, 8):
        slots = [offsets_by_lane[l] // 16 % 8 for l in range(q, q + 8) if l in offsets_by_lane]
        if len(slots) != len(set(slots)):
            return False
    return True


def check(hd, bn):
    g = Geometry(hd, bn)
    errors = []
    copies = g.copies()
    # Every chunk once, destinations distinct.
    chunks = [(row, col) for instr in copies.values() for (_, row, col) in instr.values()]
    want = {(r, c) for r in range(bn) for c in range(0, hd, 16)}
    if sorted(chunks) != sorted(want):
        errors.append("the copies do not cover the block's chunks exactly once")
    dsts = [d for instr in copies.values() for (d, _, _) in instr.values()]
    if len(dsts) != len(set(dsts)) or any(d < g.half * SWIZZLE for d in dsts):
        errors.append("copy destinations overlap or leave the upper half")
    # Sectors whole and kept together.
    split = 0
    for instr in copies.values():
        sectors = {}
        for lane, (dst, row, col) in instr.items():
            sectors.setdefault((row, col // 32), []).append((col, dst))
        for pieces in sectors.values():
            if len(pieces) != 2 or len({d // 32 for _, d in pieces}) != 1:
                split += 1
    if split:
        errors.append(f"{split} sectors read in part or landing apart")
    # The widening.
    dst_of = {}
    for (w, i, h), instr in copies.items():
        for lane, (dst, _, _) in instr.items():
            dst_of[(32 * w + lane, i, h)] = dst
    written = {}
    for (w, i, k), instr in g.widening().items():
        if not conflict_free({lane: op[1] for lane, (op, _, _) in instr.items()}):
            errors.append(f"bank conflict: warp {w} pair {i} instruction {k}")
        for lane, ((kind, off, item), lo, p) in instr.items():
            t = 32 * w + lane
            if kind == "read":
                if dst_of[(t, i, item)] != off:
                    errors.append(f"thread {t} reads a chunk it did not copy")
            else:
                h, s = item
                line = lo + h * g.half
                want_off = line * SWIZZLE + ((2 * p + s) ^ (line % 8)) * 16
                if off != want_off:
                    errors.append(f"thread {t} writes item ({line}, {p}) slot {s} at {off}, TMA's layout {want_off}")
                written[off] = written.get(off, 0) + 1
    if sorted(written) != [16 * k for k in range(g.lines * 8)] or set(written.values()) != {1}:
        errors.append("the widening does not write every slot once")
    # K's e4m3 order against Q's (head dims 128 and 256: K stays e4m3).
    if hd in (128, 256):
        groups = hd // 128
        k_order = {}
        for instr in copies.values():
            for dst, row, col in instr.values():
                line, slot = dst // SWIZZLE, dst % SWIZZLE // 16
                if row == 0:
                    u = line // bn - groups
                    k_order[(u, slot ^ (line % 8))] = col
        q_order = {}
        for u in range(groups):
            for a in range(2):
                for k in range(4):
                    h, b = k // 2, k % 2
                    # convert_q: e4m3 chunk 4a + k from block u + h groups, bf16 chunks 4a + 2b, + 1
                    q_order[(u, 4 * a + k)] = (u + h * groups) * 64 + 8 * (4 * a + 2 * b)
        if k_order != q_order:
            errors.append("K's e4m3 column order differs from Q's")
    return g, errors


def main():
    ok = True
    for hd, bn in ((64, 128), (128, 128), (192, 112), (256, 64)):
        g, errors = check(hd, bn)
        print(f"head_dim {hd}, {bn}-key blocks: {g.lines * 4} copies a block; "
              + ("every check holds" if not errors else "; ".join(sorted(set(errors))[:4])))
        ok = ok and not errors
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
