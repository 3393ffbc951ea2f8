#!/usr/bin/env python3
"""FlashInfer's figures for the paged rows of `flash_bench --serving`.

Runs the chunked prefill calls of `flash_bench --serving` on paged caches
(bench/serving_bench.h) with FlashInfer's BatchPrefillWithPagedKVCacheWrapper
on its FlashAttention-3-based Hopper backend (backend="fa3") and prints a
markdown table of median ms and TFLOP/s. flash has no Python binding, so the
comparison is made by reading this table beside flash_bench's "## serving
prefill" table from the same machine (run both in one device call).

The calls, as flash_bench's: bf16, batch 4, heads_q 32, heads_kv 8, causal,
2048 new queries per sequence (Q packed [4 * 2048, 32, D]) against 16384
cached keys, the new keys the last 2048 of them (causal aligned bottom-right,
FlashInfer's convention and flash's: query row i sees keys 0 .. 14336 + i).
K and V are one pool of 4 * 16384 / P pages [P, 8, D] ("NHD"), handed out in
the same permutation as flash_bench's (Fisher-Yates over mt19937, seed
0x9a6e): sequence b's i-th page is table[b * 16384 / P + i]. Inputs are
uniform in [-1, 1). FLOPs = 4 * batch * heads_q * head_dim * visible pairs,
exact (2048 * 14337 + 2047 * 2048 / 2 per sequence and head), as
flash_bench counts them.

Timing, as flash_bench's: warm-up (at least 5 calls and --warmup_ms of
them), then --iters calls (at least 20), each between two CUDA events with
the L2 flushed before the start event (a memset of twice the L2 size, outside
the timed region); the median. run()'s Python overhead falls inside the
timed region when the GPU finishes the flush before the launch reaches it:
tens of microseconds against calls of milliseconds.

Before timing a configuration, its output on a small ragged case (2
sequences, 96 and 40 new queries against 300 and 517 keys, partial last
pages) is checked against torch SDPA in float32 with the same bottom-right
causal mask; the relative L2 error is printed in the row and a row whose
check fails says so. A configuration that FlashInfer rejects or that fails
prints its error in its row and the script goes on. Exit status: 0 when
every row ran and passed its check, 1 otherwise.

Usage, on the GPU machine with the FlashInfer wheels installed
(../shared/anchors/README.md):
  python3 bench/serving_anchor.py [--head_dims=64,128,256] [--page_sizes=1,16,64,256]
                                  [--iters=30] [--warmup_ms=200] [--no-flush]
The first plan() of each head dim builds FlashInfer's kernels (15-90 s each).
"""

import argparse
import statistics
import sys
import time
import traceback

BATCH = 4
HEADS_Q = 32
HEADS_KV = 8
NEW_QUERIES = 2048
CACHED_KEYS = 16384
PAGE_SEED = 0x9A6E
INPUT_SEED = 2026
WORKSPACE_BYTES = 256 << 20
CHECK_QO_LENS = (96, 40)
CHECK_KV_LENS = (300, 517)
CHECK_TOLERANCE = 2e-2  # bf16 outputs land near 4e-3


def mt19937(seed):
    """The outputs of C++'s std::mt19937(seed), one 32-bit integer at a time."""
    n, m = 624, 397
    state = [0] * n
    state[0] = seed & 0xFFFFFFFF
    for i in range(1, n):
        state[i] = (1812433253 * (state[i - 1] ^ (state[i - 1] >> 30)) + i) & 0xFFFFFFFF
    index = n
    while True:
        if index >= n:
            for i in range(n):
                y = (state[i] & 0x80000000) | (state[(i + 1) % n] & 0x7FFFFFFF)
                state[i] = state[(i + m) % n] ^ (y >> 1) ^ (0x9908B0DF if y & 1 else 0)
            index = 0
        y = state[index]
        index += 1
        y ^= y >> 11
        y ^= (y << 7) & 0x9D2C5680
        y ^= (y << 15) & 0xEFC60000
        y ^= y >> 18
        yield y


def shuffled_pages(n, seed):
    """0 .. n-1 in flash_bench's fixed random order (row_setup.h's shuffled_pages)."""
    pages = list(range(n))
    rng = mt19937(seed)
    for i in range(n - 1, 0, -1):
        j = next(rng) % (i + 1)
        pages[i], pages[j] = pages[j], pages[i]
    return pages


def visible_pairs(seqlen_q, seqlen_k):
    """(query, key) pairs the bottom-right causal mask leaves visible."""
    return sum(min(max(i + seqlen_k - seqlen_q + 1, 0), seqlen_k) for i in range(seqlen_q))


def prefill_flops(head_dim):
    return 4.0 * BATCH * HEADS_Q * head_dim * visible_pairs(NEW_QUERIES, CACHED_KEYS)


def uniform(torch, shape, gen):
    """bf16 values uniform in [-1, 1) on the GPU."""
    return (torch.rand(shape, generator=gen, device="cuda", dtype=torch.float32) * 2 - 1).to(torch.bfloat16)


class PagedCall:
    """One batch of new queries against a paged cache, planned on a FlashInfer wrapper."""

    def __init__(self, torch, flashinfer, workspace, qo_lens, kv_lens, page_size, head_dim, gen):
        self.qo_lens, self.kv_lens, self.page_size = list(qo_lens), list(kv_lens), page_size
        pages_per_seq = [-(-n // page_size) for n in kv_lens]
        num_pages = sum(pages_per_seq)
        self.table = shuffled_pages(num_pages, PAGE_SEED)
        kv_indptr = [0]
        for n in pages_per_seq:
            kv_indptr.append(kv_indptr[-1] + n)
        qo_indptr = [0]
        for n in qo_lens:
            qo_indptr.append(qo_indptr[-1] + n)
        last_page_len = [n - (p - 1) * page_size for n, p in zip(kv_lens, pages_per_seq)]

        def ints(values):
            return torch.tensor(values, dtype=torch.int32, device="cuda")

        self.kv_indptr = kv_indptr
        self.qo_indptr = qo_indptr
        self.q = uniform(torch, (qo_indptr[-1], HEADS_Q, head_dim), gen)
        self.k_cache = uniform(torch, (num_pages, page_size, HEADS_KV, head_dim), gen)
        self.v_cache = uniform(torch, (num_pages, page_size, HEADS_KV, head_dim), gen)
        self.out = torch.empty_like(self.q)
        self.wrapper = flashinfer.BatchPrefillWithPagedKVCacheWrapper(workspace, "NHD", backend="fa3")
        self.wrapper.plan(
            ints(qo_indptr),
            ints(kv_indptr),
            ints(self.table),
            ints(last_page_len),
            HEADS_Q,
            HEADS_KV,
            head_dim,
            page_size,
            causal=True,
            q_data_type=torch.bfloat16,
            kv_data_type=torch.bfloat16,
        )
        self.backend = getattr(self.wrapper, "_backend", "fa3")

    def run(self):
        return self.wrapper.run(self.q, (self.k_cache, self.v_cache), out=self.out)

    def reference(self, torch):
        """torch SDPA in float32, sequence by sequence, the same bottom-right causal mask."""
        import torch.nn.functional as F

        outs = []
        group = HEADS_Q // HEADS_KV
        for b, (qo, kv) in enumerate(zip(self.qo_lens, self.kv_lens)):
            pages = torch.tensor(self.table[self.kv_indptr[b] : self.kv_indptr[b + 1]], device="cuda")
            head_dim = self.q.shape[-1]
            k = self.k_cache[pages].reshape(-1, HEADS_KV, head_dim)[:kv].float()
            v = self.v_cache[pages].reshape(-1, HEADS_KV, head_dim)[:kv].float()
            q = self.q[self.qo_indptr[b] : self.qo_indptr[b + 1]].float()
            # [heads, seq, dim]; query head h reads KV head h // group.
            q, k, v = (t.transpose(0, 1) for t in (q, k, v))
            k = k.repeat_interleave(group, dim=0)
            v = v.repeat_interleave(group, dim=0)
            rows = torch.arange(qo, device="cuda")[:, None]
            cols = torch.arange(kv, device="cuda")[None, :]
            mask = cols <= rows + (kv - qo)
            o = F.scaled_dot_product_attention(q[None], k[None], v[None], attn_mask=mask[None, None])[0]
            outs.append(o.transpose(0, 1))
        return torch.cat(outs, dim=0)


def check(torch, flashinfer, workspace, page_size, head_dim, gen):
    """Relative L2 error of FlashInfer's output on the small ragged case."""
    call = PagedCall(torch, flashinfer, workspace, CHECK_QO_LENS, CHECK_KV_LENS, page_size, head_dim, gen)
    call.out.fill_(float("nan"))
    out = call.run().float()
    ref = call.reference(torch)
    torch.cuda.synchronize()
    if not torch.isfinite(out).all():
        return float("inf")
    return ((out - ref).norm() / ref.norm()).item()


class Timer:
    """CUDA-event timing of one launch after an L2 flush, as flash_bench's LaunchTimer."""

    def __init__(self, torch, flush):
        self.torch = torch
        self.flush_buffer = None
        if flush:
            props = torch.cuda.get_device_properties(torch.cuda.current_device())
            l2_bytes = getattr(props, "L2_cache_size", 0) or (64 << 20)
            self.flush_buffer = torch.empty(2 * max(l2_bytes, 1 << 20), dtype=torch.uint8, device="cuda")
        self.flushes = 0
        self.start = torch.cuda.Event(enable_timing=True)
        self.stop = torch.cuda.Event(enable_timing=True)

    def median_ms(self, launch, iters, warmup_ms, min_warmup=5):
        torch = self.torch
        begin = time.perf_counter()
        calls = 0
        while True:
            if calls >= min_warmup:
                torch.cuda.synchronize()
                if (time.perf_counter() - begin) * 1e3 >= warmup_ms:
                    break
            launch()
            calls += 1
        times = []
        for _ in range(iters):
            if self.flush_buffer is not None:
                self.flushes = (self.flushes + 1) & 0xFF
                self.flush_buffer.fill_(self.flushes)
            self.start.record()
            launch()
            self.stop.record()
            self.stop.synchronize()
            times.append(self.start.elapsed_time(self.stop))
        return statistics.median(times)


def cell(text, limit=160):
    """One markdown cell: no pipes or newlines, at most `limit` characters."""
    text = " ".join(str(text).replace("|", "/").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def int_list(text):
    return [int(x) for x in text.split(",") if x]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--head_dims", type=int_list, default=[64, 128, 256])
    parser.add_argument("--page_sizes", type=int_list, default=[1, 16, 64, 256])
    parser.add_argument("--iters", type=int, default=30, help="timed launches per row (at least 20)")
    parser.add_argument("--warmup_ms", type=float, default=200.0, help="warm-up per row, at least 5 calls")
    parser.add_argument("--no-flush", dest="flush", action="store_false", help="do not flush the L2 between launches")
    args = parser.parse_args()
    if args.iters < 20:
        parser.error("--iters must be at least 20")
    for p in args.page_sizes:
        if p < 1 or CACHED_KEYS % p != 0:
            parser.error(f"--page_sizes: {p} does not divide {CACHED_KEYS}")

    import torch
    import flashinfer

    if not torch.cuda.is_available():
        print("serving_anchor: no CUDA device", file=sys.stderr)
        return 77
    gen = torch.Generator(device="cuda")
    gen.manual_seed(INPUT_SEED)
    workspace = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device="cuda")
    timer = Timer(torch, args.flush)
    pairs = visible_pairs(NEW_QUERIES, CACHED_KEYS)

    rows = []
    ok = True
    for head_dim in args.head_dims:
        flops = prefill_flops(head_dim)
        for page_size in args.page_sizes:
            name = f"paged{page_size}"
            t0 = time.perf_counter()
            print(f"serving_anchor: hd{head_dim} {name}: check and plan (the first plan of a head dim builds its kernels)",
                  file=sys.stderr, flush=True)
            row = {"head_dim": head_dim, "cache": name, "backend": "-", "check": "-", "ms": "-", "tflops": "-"}
            try:
                err = check(torch, flashinfer, workspace, page_size, head_dim, gen)
                passed = err <= CHECK_TOLERANCE
                row["check"] = f"{err:.1e}" + ("" if passed else " FAILED")
                ok = ok and passed
                call = PagedCall(torch, flashinfer, workspace, [NEW_QUERIES] * BATCH, [CACHED_KEYS] * BATCH,
                                 page_size, head_dim, gen)
                row["backend"] = call.backend
                ms = timer.median_ms(call.run, args.iters, args.warmup_ms)
                row["ms"] = f"{ms:.3f}"
                row["tflops"] = f"{flops / (ms * 1e-3) / 1e12:.1f}"
                del call
            except Exception as e:  # a configuration FlashInfer rejects or fails: say so and go on
                ok = False
                traceback.print_exc(file=sys.stderr)
                row["backend"] = cell(f"error: {type(e).__name__}: {e}")
                try:
                    torch.cuda.synchronize()
                except Exception:  # a sticky CUDA error: the rows after this one will say so too
                    traceback.print_exc(file=sys.stderr)
            print(f"serving_anchor: hd{head_dim} {name}: {row['ms']} ms, {row['tflops']} TFLOP/s, check {row['check']} "
                  f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
            rows.append(row)
            torch.cuda.empty_cache()

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    print("\n## FlashInfer serving prefill\n")
    print(f"- GPU: {props.name}; torch {torch.__version__}, flashinfer {getattr(flashinfer, '__version__', '?')}, "
          f"BatchPrefillWithPagedKVCacheWrapper(backend=\"fa3\"), the backend column as planned")
    print(f"- chunked prefill: bf16, batch {BATCH}, heads_q {HEADS_Q}, heads_kv {HEADS_KV}, causal, {NEW_QUERIES} new "
          f"queries against {CACHED_KEYS} cached keys (bottom-right: query row i sees keys 0 .. "
          f"{CACHED_KEYS - NEW_QUERIES} + i); one pool of B * {CACHED_KEYS} / P pages [P, {HEADS_KV}, D] in "
          f"flash_bench's page order")
    print(f"- median of {args.iters} CUDA-event-timed launches after >= {args.warmup_ms:.0f} ms of warm-up, "
          + ("L2 flushed before each (a memset of twice the L2 outside the timed region)" if args.flush
             else "L2 not flushed"))
    print(f"- FLOPs = 4 * batch * heads_q * head_dim * visible pairs (exact: {pairs} per sequence and head)")
    print(f"- check: relative L2 error against torch SDPA (float32) on {len(CHECK_QO_LENS)} sequences of "
          f"{'/'.join(map(str, CHECK_QO_LENS))} new queries against {'/'.join(map(str, CHECK_KV_LENS))} keys, "
          f"same page size; FAILED above {CHECK_TOLERANCE:g}\n")
    print("| head_dim | cache | backend | check | ms | TFLOP/s |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['head_dim']} | {r['cache']} | {r['backend']} | {r['check']} | {r['ms']} | {r['tflops']} |")
    sys.stdout.flush()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
