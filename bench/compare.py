#!/usr/bin/env python3
"""flash beside PyTorch SDPA (cuDNN, FlashAttention-2), FlashAttention-4 and FlashInfer, in one process.

Every library runs the same call on the same tensors, is checked against a
float32 reference before it is timed, and is timed the same way, shape by
shape (for each shape: flash, cudnn, fa2, fa4, flashinfer, then the next
shape). The readings "flash is ahead of cuDNN" and the like come from here.

Libraries (a column each):
  flash       this repository's Python package (`import flash`; build it with
              the CMake project, python/ — see "Running it" below).
  cudnn       torch.nn.functional.scaled_dot_product_attention under
              sdpa_kernel(SDPBackend.CUDNN_ATTENTION).
  fa2         the same under SDPBackend.FLASH_ATTENTION (FlashAttention-2 as
              built into PyTorch).
  fa4         FlashAttention-4, `from flash_attn.cute.interface import
              flash_attn_func` (returns (out, lse)); dense calls only.
  flashinfer  FlashInfer: BatchPrefillWithPagedKVCacheWrapper(backend="fa3")
              for paged prefill, BatchDecodeWithPagedKVCacheWrapper(
              use_tensor_cores=True) for paged decode (the resolved backend is
              printed), and with --seed_flashinfer BatchPrefillWithRaggedKV-
              CacheWrapper(backend="fa3") on the seed sweep's dense shapes.
A library that is not importable, or rejects or fails a call, shows "-" and
the reason is printed once under the table; the run goes on.

Layouts: every tensor is made in flash's [batch, seq, heads, head_dim]
layout. SDPA takes [B, H, S, D]: it gets transposed views (no copies).
FlashInfer gets the same memory viewed as packed [B*S, H, D]. GQA (the
decode and serving shapes, heads 32/8) goes to SDPA with enable_gqa=True; if
that call is refused, with K/V heads repeated (materialized once, outside
the timed region, so that call reads group-times more K/V bytes): the notes
under each table say which. Causal is aligned bottom-right everywhere (query
row i sees keys j <= i + Sk - Sq), flash's convention. SDPA's is_causal is
top-left when Sq != Sk, so there (serving) cuDNN is tried with is_causal=True
and, when that fails the check, with the bottom-right mask as an explicit
additive [1, 1, Sq, Sk] bias made once outside the timed region; FA2 runs
torch.nn.attention.bias.causal_lower_right, which PyTorch routes to FA2's own
bottom-right causal kernel. Each variant tried and why it was set aside is
printed under the table.

Sweeps (any combination; none given: --seed):
  --seed     the seed sweep of flash_bench (bench/sweep.h): fp16 and bf16,
             head_dim 64/128/256, causal and not, N in 512..16384, batch =
             16384 / N, heads = 2048 / head_dim (32/16/8), heads_kv = heads.
             FLOPs = 4*B*H*N*N*D, halved for causal (flash_bench's count).
  --decode   one query per sequence, heads 32/8, head_dim 128 (--head_dims),
             batch 1/8/32, 4096/32768 keys; a dense cache (flash, cudnn, fa2,
             fa4) and a paged cache of 16-key pages (flash with block_table
             and seqused_k; FlashInfer's decode wrapper), pages of all
             sequences in one pool in flash_bench's random order (flash's
             dense call passes no seqused_k, as the others). Reported
             in microseconds and GB/s of K+V (2 * B * L * heads_kv * D * 2
             bytes, the cache's bytes, whatever a library reads).
  --serving  chunked prefill as flash_bench --serving: bf16, heads 32/8,
             batch 4, 2048 causal queries against 16384 cached keys
             (bottom-right), head_dim 64/128/256; a dense cache (flash,
             cudnn, fa2, fa4) and paged caches of 1/16/64/256-key pages
             (flash with block_table + seqused_k, FlashInfer fa3). FLOPs = 4
             * B * H * D * exact visible pairs (2048*14337 + 2047*2048/2 per
             sequence and head). The paged caches hold the dense cache's
             keys, so every row of a head dim shares one reference.

Checking (before any timing, on every shape and library): one call on the
real shape (flash's and FlashInfer's outputs pre-filled with NaN, so an
unwritten element fails), compared with a float32 reference computed once
per shape with torch (chunked Q K^T, masked softmax, P V; TF32 off). A cell
passes when every element is finite, the relative L2 error is within 5e-3
(fp16) / 1.5e-2 (bf16), and every element is within atol + rtol*|ref|, atol =
0.05 (fp16) / 0.25 (bf16) times the reference's RMS, rtol = 2^-9 / 2^-6 (a
wrong row, which the L2 norm would average away, fails here). A failing cell
reads "wrong" and is not timed. The "max abs diff" column gives each
library's max |out - cuDNN's out| (cuDNN's own max |out - ref| beside it), or
max |out - ref| where cuDNN did not run the shape ("vs fp32"). Paged rows
compare with cuDNN's dense output of the same keys.

Timing (one method for every library): per cell, warm-up calls for at least
--warmup_ms (200) of wall time and 3 calls (each synchronized), then --iters
(30) calls, each preceded by an L2 flush (a fill of max(256 MiB, 2 x L2)
bytes) and a GPU-side sleep of --cover_us (200 us, torch.cuda._sleep) that
keeps the GPU busy while the host enqueues the call, then timed between two
CUDA events; the median. The host never waits inside the loop, so its
Python overhead is hidden unless one iteration's host time exceeds its GPU
time; then the cell is flagged "host-bound" under the table (its time may
include idle GPU). The first call of a configuration (FA4 compiles each in
2-4 s, FlashInfer builds its kernels with nvcc at the first plan of a head
dim, 15-90 s) falls in the check, never in the timing. A cuBLAS bf16 GEMM
8192^3 timed the same way is printed at the top as a ceiling.

Output: the GPU, torch, cuDNN and library versions, then one markdown table
per sweep: the shape, each library's TFLOP/s (decode: us and GB/s), flash
over the best other library in the row (>1: flash is faster), the max abs
differences and flash's kernel (flash.kernel_choice). Tables are printed as
each sweep ends; progress goes to stderr. --json PATH writes every
measurement (all timed samples, errors, variants, checks), rewritten after
each sweep. Exit status: 0, or 1 when a cell failed its check ("wrong"), 77
without a CUDA device.

Running it (on the H200 machine, from the repository root). Build the
package (only the extension and the library, Hopper only, the three head
dims swept), then run with the build's python/ folder on PYTHONPATH:
  cmake --preset h100 -DFLASH_HEAD_DIMS="64;128;256" -DFLASH_BUILD_PYTHON=ON \\
      -DFLASH_BUILD_TESTS=OFF -DFLASH_BUILD_BENCH=OFF -DFLASH_BUILD_EXAMPLES=OFF \\
    && cmake --build --preset h100 --target _flash \\
    && PYTHONPATH=build/h100/python PYTHONUNBUFFERED=1 python3 bench/compare.py --seed --json seed.json
With FlashAttention-4 or FlashInfer, install one wheel bundle first as
../shared/anchors/README.md says (one bundle per device call: the two
exceed what one call carries) and put /tmp/site (for FA4 also
/tmp/site/nvidia_cutlass_dsl/dsl_packages) before build/h100/python on
PYTHONPATH. A library left out is a "-" column with its reason.
Quick smoke test: --iters 3 --warmup_ms 0 --seqlens 512 --head_dims 128.
--seed runs 72 shapes (minutes; FA4 compiles each configuration once);
--serving with FlashInfer adds its kernel builds, one per head dim; run the
sweeps in separate calls where a call is limited to 10 minutes.

Only the standard library is imported at module level; torch, flash,
flash_attn and flashinfer are imported in main(), the last three each in a
try, so --help works anywhere.
"""

import argparse
import json
import math
import statistics
import sys
import time
import traceback
import warnings

LIBS = ("flash", "cudnn", "fa2", "fa4", "flashinfer")
SEED_TOKENS = 16384  # batch * N of the seed sweep (bench/sweep.h)
SEED_WIDTH = 2048  # heads * head_dim of the seed sweep
SEED_SEQLENS = (512, 1024, 2048, 4096, 8192, 16384)
DECODE_HEADS = (32, 8)
DECODE_BATCHES = (1, 8, 32)
DECODE_KV_LENS = (4096, 32768)
SERVING_HEADS = (32, 8)
SERVING_BATCH = 4
SERVING_NEW = 2048
SERVING_CACHED = 16384
PAGE_SEED = 0x9A6E  # flash_bench's page permutation (bench/row_setup.h)
INPUT_SEED = 2026
FI_WORKSPACE_BYTES = 256 << 20
REF_CHUNK_BYTES = 256 << 20  # float32 scores per reference chunk

# Tolerances of the check, by dtype name: relative L2 error, the elementwise
# atol as a multiple of the reference's RMS, and the elementwise rtol.
TOLERANCES = {
    "fp16": {"rel_l2": 5e-3, "atol_rms": 0.05, "rtol": 2.0**-9},
    "bf16": {"rel_l2": 1.5e-2, "atol_rms": 0.25, "rtol": 2.0**-6},
}


# ---------------------------------------------------------------- helpers (no torch)


# flash_bench's page order, shared with serving_anchor.py (same directory;
# it imports nothing heavy at module level).
from serving_anchor import shuffled_pages as _anchor_shuffled_pages


_PAGE_ORDERS = {}


def shuffled_pages(n, seed=PAGE_SEED):
    """0 .. n-1 in flash_bench's fixed random order (row_setup.h's shuffled_pages)."""
    key = (n, seed)
    if key not in _PAGE_ORDERS:
        _PAGE_ORDERS[key] = _anchor_shuffled_pages(n, seed)
    return _PAGE_ORDERS[key]


def exact_causal_pairs(seqlen_q, seqlen_k):
    """(query, key) pairs the bottom-right causal mask leaves visible."""
    return sum(min(max(i + seqlen_k - seqlen_q + 1, 0), seqlen_k) for i in range(seqlen_q))


def one_line(text, limit=300):
    text = " ".join(str(text).replace("|", "/").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def error_text(e):
    return one_line(f"{type(e).__name__}: {e}")


def int_list(text):
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a comma-separated list of integers")
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"'{text}': give positive integers")
    return values


def name_list(allowed):
    def parse(text):
        names = [x.strip() for x in text.split(",") if x.strip()]
        bad = [x for x in names if x not in allowed]
        if bad or not names:
            raise argparse.ArgumentTypeError(f"'{text}': choose from {','.join(allowed)}")
        return names

    return parse


def fmt(x, digits=1):
    return f"{x:.{digits}f}"


def sci(x):
    return "-" if x is None else f"{x:.1e}"


# ---------------------------------------------------------------- environment


class Env:
    """torch, the libraries that imported, the timer, the arguments."""

    def __init__(self, torch, args):
        self.torch = torch
        self.args = args
        self.mods = {}  # lib -> module (or function, for fa4)
        self.missing = {}  # lib -> reason
        self.versions = {}
        self.timer = None
        self.fi_workspace = None
        self.any_wrong = False


def package_version(dist_names):
    try:
        from importlib import metadata
    except ImportError:  # pragma: no cover - Python < 3.8
        return "?"
    for name in dist_names:
        try:
            return metadata.version(name)
        except Exception:
            continue
    return "?"


def import_libraries(env):
    torch = env.torch
    args = env.args
    env.versions["torch"] = torch.__version__
    env.versions["cuda (torch)"] = str(torch.version.cuda)
    try:
        env.versions["cudnn"] = str(torch.backends.cudnn.version())
    except Exception as e:
        env.versions["cudnn"] = f"? ({error_text(e)})"

    if "flash" in args.libs:
        try:
            import flash

            env.mods["flash"] = flash
            env.versions["flash"] = f"{flash.__version__} ({flash.__file__})"
        except Exception as e:
            env.missing["flash"] = (f"not importable ({error_text(e)}); build python/ and put <build>/python "
                                    "on PYTHONPATH")

    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: F401
    except Exception as e:
        for lib in ("cudnn", "fa2"):
            env.missing[lib] = f"torch.nn.attention.sdpa_kernel not available ({error_text(e)})"
    env.versions["cudnn"] = f"PyTorch SDPA's CUDNN_ATTENTION backend, cuDNN {env.versions['cudnn']}"
    env.versions["fa2"] = "PyTorch SDPA's FLASH_ATTENTION backend (FlashAttention-2)"
    if "fa2" in args.libs and "fa2" not in env.missing:
        try:
            if not torch.backends.cuda.is_flash_attention_available():
                env.missing["fa2"] = "this PyTorch was built without flash attention"
        except Exception:
            pass

    if "fa4" in args.libs:
        try:
            from flash_attn.cute.interface import flash_attn_func

            env.mods["fa4"] = flash_attn_func
            env.versions["fa4"] = "flash-attn-4 " + package_version(["flash-attn-4", "flash_attn_4", "flash-attn"])
        except Exception as e:
            env.missing["fa4"] = f"not importable ({error_text(e)})"

    if "flashinfer" in args.libs:
        try:
            import flashinfer

            env.mods["flashinfer"] = flashinfer
            env.versions["flashinfer"] = str(
                getattr(flashinfer, "__version__", None) or package_version(["flashinfer-python", "flashinfer"]))
        except Exception as e:
            env.missing["flashinfer"] = f"not importable ({error_text(e)})"

    for lib in LIBS:
        if lib not in args.libs:
            env.missing[lib] = "left out by --libs"


# ---------------------------------------------------------------- timing


class Timer:
    """CUDA-event timing of one call after an L2 flush and a GPU-side sleep; the median."""

    def __init__(self, torch, flush, flush_mib, cover_us):
        self.torch = torch
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        l2 = int(getattr(props, "L2_cache_size", 0) or (64 << 20))
        self.flush_bytes = max(flush_mib << 20, 2 * l2) if flush else 0
        self.buffer = torch.empty(self.flush_bytes, dtype=torch.uint8, device="cuda") if flush else None
        self.flushes = 0
        self.cover_us = cover_us
        self.cycles_per_us = None
        self.sleep_note = ""
        if cover_us > 0:
            if hasattr(torch.cuda, "_sleep"):
                self.cycles_per_us = self._calibrate_sleep()
            else:
                self.sleep_note = "torch.cuda._sleep is missing: no GPU-side cover"
        self.flush_us = self._time_flush() if flush else 0.0

    def recalibrate(self):
        """Again, once the clocks are up (the sleep counts SM cycles, so it is shortest at full clock)."""
        if self.cycles_per_us:
            self.cycles_per_us = max(self.cycles_per_us, self._calibrate_sleep())
        if self.buffer is not None:
            self.flush_us = self._time_flush()

    def _events(self):
        return self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True)

    def _calibrate_sleep(self):
        torch = self.torch
        cycles = 2_000_000
        torch.cuda._sleep(1000)
        start, stop = self._events()
        start.record()
        torch.cuda._sleep(cycles)
        stop.record()
        stop.synchronize()
        us = start.elapsed_time(stop) * 1e3
        return cycles / us if us > 0 else 1500.0

    def _time_flush(self):
        times = []
        for _ in range(5):
            start, stop = self._events()
            start.record()
            self.flush()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) * 1e3)
        return statistics.median(times)

    def flush(self):
        if self.buffer is not None:
            self.flushes = (self.flushes + 1) & 0xFF
            self.buffer.fill_(self.flushes)

    def cover(self):
        if self.cycles_per_us:
            self.torch.cuda._sleep(int(self.cover_us * self.cycles_per_us))

    def measure(self, launch, iters, warmup_ms):
        """Median ms of `iters` timed calls, the samples, and the median host time of one iteration (us)."""
        torch = self.torch
        begin = time.perf_counter()
        calls = 0
        while calls < 3 or (time.perf_counter() - begin) * 1e3 < warmup_ms:
            launch()
            torch.cuda.synchronize()
            calls += 1
        events = [self._events() for _ in range(iters)]
        host_us = []
        torch.cuda.synchronize()
        for start, stop in events:
            h0 = time.perf_counter()
            self.flush()
            self.cover()
            start.record()
            launch()
            stop.record()
            host_us.append((time.perf_counter() - h0) * 1e6)
        torch.cuda.synchronize()
        times = [start.elapsed_time(stop) for start, stop in events]
        return statistics.median(times), times, statistics.median(host_us), calls

    def gpu_iteration_us(self, kernel_ms):
        return self.flush_us + (self.cover_us if self.cycles_per_us else 0.0) + kernel_ms * 1e3


def gemm_ceiling(env):
    """TFLOP/s of a bf16 GEMM 8192^3 (torch.mm, cuBLAS), timed like every cell."""
    torch = env.torch
    n = 8192
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1)
    a = torch.empty((n, n), dtype=torch.bfloat16, device="cuda").uniform_(-1, 1, generator=gen)
    b = torch.empty((n, n), dtype=torch.bfloat16, device="cuda").uniform_(-1, 1, generator=gen)
    c = torch.empty((n, n), dtype=torch.bfloat16, device="cuda")
    ms, _, _, _ = env.timer.measure(lambda: torch.mm(a, b, out=c), env.args.iters, max(env.args.warmup_ms, 1000.0))
    del a, b, c
    return 2.0 * n**3 / (ms * 1e-3) / 1e12


# ---------------------------------------------------------------- reference and check


def reference(torch, q, k, v, causal):
    """float32 attention of [B, Sq, Hq, D] q against [B, Sk, Hkv, D] k, v; causal bottom-right; [B, Sq, Hq, D]."""
    b_count, sq, hq, d = q.shape
    sk, hkv = k.shape[1], k.shape[2]
    group = hq // hkv
    scale = 1.0 / math.sqrt(d)
    out = torch.empty((b_count, sq, hq, d), dtype=torch.float32, device=q.device)
    chunk = max(1, min(sq, REF_CHUNK_BYTES // (hq * sk * 4)))
    cols = torch.arange(sk, device=q.device)
    for b in range(b_count):
        kf = k[b].float().permute(1, 0, 2).contiguous()  # [Hkv, Sk, D]
        vf = v[b].float().permute(1, 0, 2).contiguous()
        for i0 in range(0, sq, chunk):
            i1 = min(sq, i0 + chunk)
            c = i1 - i0
            # query head h = kv_head * group + g reads kv_head (h // group)
            qf = q[b, i0:i1].float().permute(1, 0, 2).reshape(hkv, group * c, d)
            s = torch.bmm(qf, kf.transpose(1, 2))
            s.mul_(scale)
            if causal:
                rows = torch.arange(i0, i1, device=q.device)
                hidden = cols[None, :] > rows[:, None] + (sk - sq)  # [c, Sk]
                s.view(hkv, group, c, sk).masked_fill_(hidden, float("-inf"))
            p = torch.softmax(s, dim=-1)
            o = torch.bmm(p, vf)  # [Hkv, group * c, D]
            out[b, i0:i1] = o.view(hkv, group, c, d).reshape(hq, c, d).permute(1, 0, 2)
            del s, p, o, qf
        del kf, vf
    return out


def check(torch, out, ref, dtype_name):
    """(passed, text, stats) of `out` against the float32 reference."""
    tol = TOLERANCES[dtype_name]
    o = out.float()
    if tuple(o.shape) != tuple(ref.shape):
        return False, f"output shape {tuple(o.shape)} != {tuple(ref.shape)}", {}
    nonfinite = int((~torch.isfinite(o)).sum().item())
    if nonfinite:
        return False, f"{nonfinite} non-finite elements (NaN/inf: unwritten or overflowed)", {"nonfinite": nonfinite}
    diff = (o - ref).abs_()
    max_abs = float(diff.max().item())
    ref_norm = float(ref.norm().item())
    rel = float((o - ref).norm().item()) / max(ref_norm, 1e-30)
    rms = ref_norm / math.sqrt(max(ref.numel(), 1))
    atol = tol["atol_rms"] * rms
    bound = ref.abs().mul_(tol["rtol"]).add_(atol)
    bad = int((diff > bound).sum().item())
    stats = {"max_abs_vs_ref": max_abs, "rel_l2_vs_ref": rel, "elements_beyond_tolerance": bad, "ref_rms": rms}
    problems = []
    if rel > tol["rel_l2"]:
        problems.append(f"rel L2 {rel:.2e} > {tol['rel_l2']:g}")
    if bad:
        problems.append(f"{bad} elements beyond {tol['atol_rms']:g}*rms({rms:.2e}) + {tol['rtol']:.1e}*|ref|")
    if problems:
        return False, "; ".join(problems) + f" (max abs {max_abs:.1e})", stats
    return True, f"max abs {max_abs:.1e}, rel L2 {rel:.1e}", stats


# ---------------------------------------------------------------- calls


class Spec:
    """One call: q [B, Sq, Hq, D]; dense k, v [B, Sk, Hkv, D]; or a paged cache (paged is a Paged)."""

    def __init__(self, sweep, q, k, v, causal, dtype_name, paged=None):
        self.sweep, self.q, self.k, self.v, self.causal, self.dtype_name = sweep, q, k, v, causal, dtype_name
        self.paged = paged


class Paged:
    """The dense k, v [B, L, Hkv, D] copied into one pool of pages [P, Hkv, D] in flash_bench's page order."""

    def __init__(self, torch, k, v, page_size):
        b_count, seqlen, hkv, d = k.shape
        pages_per_seq = seqlen // page_size
        n = b_count * pages_per_seq
        order = torch.tensor(shuffled_pages(n), dtype=torch.int64, device=k.device)
        self.k = torch.empty((n, page_size, hkv, d), dtype=k.dtype, device=k.device)
        self.v = torch.empty_like(self.k)
        # sequence b's i-th page is page order[b * pages_per_seq + i]
        self.k[order] = k.reshape(n, page_size, hkv, d)
        self.v[order] = v.reshape(n, page_size, hkv, d)
        self.block_table = order.to(torch.int32).view(b_count, pages_per_seq).contiguous()
        self.seqused_k = torch.full((b_count,), seqlen, dtype=torch.int32, device=k.device)
        self.page_size = page_size
        self.kv_indptr = torch.arange(0, n + 1, pages_per_seq, dtype=torch.int32, device=k.device)
        self.kv_indices = self.block_table.reshape(-1)
        self.last_page_len = torch.full((b_count,), page_size, dtype=torch.int32, device=k.device)


class Call:
    """What a library's setup returns: launch() -> raw output; view(raw) -> [B, Sq, Hq, D]; poison() or None."""

    def __init__(self, launch, view=None, poison=None, info=None):
        self.launch = launch
        self.view = view or (lambda o: o)
        self.poison = poison
        self.info = info or {}


def flash_candidates(env, spec):
    flash = env.mods["flash"]
    torch = env.torch

    def setup():
        k, v = spec.k, spec.v
        opts = {"causal": spec.causal, "backend": env.args.flash_backend}
        if spec.paged is not None:
            k, v = spec.paged.k, spec.paged.v
            opts.update(block_table=spec.paged.block_table, seqused_k=spec.paged.seqused_k)
        need = int(flash.workspace_size(spec.q, k, v, **opts))
        # A workspace always (256 bytes when flash would not split), so that
        # attention() never asks for its size inside the timed call.
        opts["workspace"] = torch.empty(max(need, 256), dtype=torch.uint8, device="cuda")
        out = torch.empty_like(spec.q)
        kernel = flash.kernel_choice(spec.q, k, v, **opts).get("name", "?")

        def launch():
            return flash.attention(spec.q, k, v, out=out, **opts)

        return Call(launch, poison=lambda: out.fill_(float("nan")),
                    info={"kernel": kernel, "workspace_bytes": need})

    return [("flash.attention", setup, None)]


SDPA_VARIANT_TEXT = {
    "none": "no mask",
    "is_causal": "is_causal=True",
    "explicit_mask": "bottom-right causal as an explicit additive [1,1,Sq,Sk] bias (made outside the timed call)",
    "causal_lower_right": "bottom-right causal via torch.nn.attention.bias.causal_lower_right",
    "mha": "",
    "enable_gqa": "GQA via enable_gqa=True",
    "repeat_kv": "GQA via K/V heads repeated (materialized outside the timed call; reads group x the K/V bytes)",
}


def sdpa_candidates(env, spec, which):
    if spec.paged is not None:
        return None  # not applicable: SDPA has no paged cache
    torch = env.torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = SDPBackend.CUDNN_ATTENTION if which == "cudnn" else SDPBackend.FLASH_ATTENTION
    q, k, v = spec.q, spec.k, spec.v
    _, sq, hq, _ = q.shape
    sk, hkv = k.shape[1], k.shape[2]
    group = hq // hkv
    if not spec.causal:
        masks = ["none"]
    elif sq == sk:
        masks = ["is_causal"]
    elif which == "cudnn":
        masks = ["is_causal", "explicit_mask"]
    else:
        masks = ["is_causal", "causal_lower_right"]
    gqas = ["mha"] if group == 1 else ["enable_gqa", "repeat_kv"]

    def setup(mask, gqa):
        if gqa == "repeat_kv":
            kk = k.repeat_interleave(group, dim=2)
            vv = v.repeat_interleave(group, dim=2)
        else:
            kk, vv = k, v
        qt, kt, vt = q.transpose(1, 2), kk.transpose(1, 2), vv.transpose(1, 2)
        kwargs = {}
        if gqa == "enable_gqa":
            kwargs["enable_gqa"] = True
        if mask == "is_causal":
            kwargs["is_causal"] = True
        elif mask == "explicit_mask":
            rows = torch.arange(sq, device="cuda")[:, None]
            cols = torch.arange(sk, device="cuda")[None, :]
            bias = torch.zeros((sq, sk), dtype=q.dtype, device="cuda")
            bias.masked_fill_(cols > rows + (sk - sq), float("-inf"))
            kwargs["attn_mask"] = bias[None, None]
        elif mask == "causal_lower_right":
            from torch.nn.attention.bias import causal_lower_right

            kwargs["attn_mask"] = causal_lower_right(sq, sk)

        def launch():
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(qt, kt, vt, **kwargs)

        return Call(launch, view=lambda o: o.transpose(1, 2))

    out = []
    for mask in masks:
        for gqa in gqas:
            label = ", ".join(t for t in (SDPA_VARIANT_TEXT[mask], SDPA_VARIANT_TEXT[gqa]) if t)
            out.append((label, (lambda m=mask, g=gqa: setup(m, g)), mask))
    return out


def fa4_candidates(env, spec):
    if spec.paged is not None:
        return None
    fn = env.mods["fa4"]
    q, k, v, causal = spec.q, spec.k, spec.v, spec.causal

    def setup():
        def launch():
            r = fn(q, k, v, causal=causal)
            return r[0] if isinstance(r, (tuple, list)) else r

        return Call(launch)

    return [("flash_attn_func", setup, None)]


def flashinfer_candidates(env, spec, ragged_ok):
    torch = env.torch
    fi = env.mods["flashinfer"]
    q = spec.q
    b_count, sq, hq, d = q.shape
    dtype = q.dtype
    if env.fi_workspace is None:
        env.fi_workspace = torch.empty(FI_WORKSPACE_BYTES, dtype=torch.uint8, device="cuda")
    ws = env.fi_workspace

    def backend_of(wrapper, default):
        name = getattr(wrapper, "_backend", None) or default
        if getattr(wrapper, "_cudnn_auto", False):
            name = f"{name} (auto: cudnn)"
        return str(name)

    if spec.paged is None:
        if not ragged_ok:
            return None

        def setup_ragged():
            sk, hkv = spec.k.shape[1], spec.k.shape[2]
            qo = torch.arange(0, (b_count + 1) * sq, sq, dtype=torch.int32, device="cuda")
            kv = torch.arange(0, (b_count + 1) * sk, sk, dtype=torch.int32, device="cuda")
            wrapper = fi.BatchPrefillWithRaggedKVCacheWrapper(ws, "NHD", backend="fa3")
            wrapper.plan(qo, kv, hq, hkv, d, causal=spec.causal, q_data_type=dtype, kv_data_type=dtype)
            q2 = q.reshape(b_count * sq, hq, d)
            k2 = spec.k.reshape(b_count * sk, hkv, d)
            v2 = spec.v.reshape(b_count * sk, hkv, d)
            out = torch.empty_like(q2)
            return Call(lambda: wrapper.run(q2, k2, v2, out=out), view=lambda o: o.view(b_count, sq, hq, d),
                        poison=lambda: out.fill_(float("nan")), info={"backend": backend_of(wrapper, "fa3")})

        return [("BatchPrefillWithRaggedKVCacheWrapper(backend=fa3)", setup_ragged, None)]

    paged = spec.paged
    hkv = paged.k.shape[2]
    if sq == 1:

        def setup_decode():
            wrapper = fi.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD", use_tensor_cores=True)
            wrapper.plan(paged.kv_indptr, paged.kv_indices, paged.last_page_len, hq, hkv, d, paged.page_size,
                         q_data_type=dtype, kv_data_type=dtype)
            q2 = q.reshape(b_count, hq, d)
            out = torch.empty_like(q2)
            return Call(lambda: wrapper.run(q2, (paged.k, paged.v), out=out), view=lambda o: o.view(b_count, 1, hq, d),
                        poison=lambda: out.fill_(float("nan")), info={"backend": backend_of(wrapper, "auto")})

        return [("BatchDecodeWithPagedKVCacheWrapper(use_tensor_cores=True)", setup_decode, None)]

    def setup_prefill():
        qo = torch.arange(0, (b_count + 1) * sq, sq, dtype=torch.int32, device="cuda")
        wrapper = fi.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD", backend="fa3")
        wrapper.plan(qo, paged.kv_indptr, paged.kv_indices, paged.last_page_len, hq, hkv, d, paged.page_size,
                     causal=spec.causal, q_data_type=dtype, kv_data_type=dtype)
        q2 = q.reshape(b_count * sq, hq, d)
        out = torch.empty_like(q2)
        return Call(lambda: wrapper.run(q2, (paged.k, paged.v), out=out), view=lambda o: o.view(b_count, sq, hq, d),
                    poison=lambda: out.fill_(float("nan")), info={"backend": backend_of(wrapper, "fa3")})

    return [("BatchPrefillWithPagedKVCacheWrapper(backend=fa3)", setup_prefill, None)]


def applicable(env, lib, spec):
    """Whether the library has this call at all (decided without importing it)."""
    if lib == "flash":
        return True
    if lib in ("cudnn", "fa2", "fa4"):
        return spec.paged is None
    if lib == "flashinfer":
        return spec.paged is not None or (spec.sweep == "seed" and env.args.seed_flashinfer)
    return False


def candidates(env, lib, spec):
    """[(variant label, setup, semantics key)] to try in order, or None when the library has no such call.

    A variant that runs but fails the check sets its semantics key aside: the
    variants after it with the same key (the same mask, another GQA form)
    are not tried."""
    if lib == "flash":
        return flash_candidates(env, spec)
    if lib in ("cudnn", "fa2"):
        return sdpa_candidates(env, spec, lib)
    if lib == "fa4":
        return fa4_candidates(env, spec)
    if lib == "flashinfer":
        return flashinfer_candidates(env, spec, spec.sweep == "seed" and env.args.seed_flashinfer)
    raise ValueError(lib)


# ---------------------------------------------------------------- one cell


def safe_sync(torch):
    try:
        torch.cuda.synchronize()
        return ""
    except Exception as e:  # a sticky CUDA error: the cells after this one will say so too
        return error_text(e)


def warning_summary(caught):
    texts = []
    for w in caught:
        t = one_line(str(w.message), 200)
        if t and t not in texts:
            texts.append(t)
    return " / ".join(texts[:6])


def run_cell(env, lib, spec, ref, label):
    """Check, then time, one library's call. Returns the cell (a dict) and its checked output (or None)."""
    torch = env.torch
    cell = {"lib": lib, "status": "n/a"}
    if lib not in env.args.libs or not applicable(env, lib, spec):
        return cell, None
    if lib in env.missing:
        cell.update(status="missing", reason=env.missing[lib])
        return cell, None
    try:
        cands = candidates(env, lib, spec)
    except Exception as e:
        cands = []
        cell.update(status="error", reason=error_text(e))
        return cell, None
    if cands is None:
        return cell, None
    rejected = []
    wrong_stats = None
    wrong_keys = set()
    for variant, setup, key in cands:
        if key is not None and key in wrong_keys:
            continue
        t0 = time.perf_counter()
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                call = setup()
                if call.poison is not None:
                    call.poison()
                else:
                    # The call allocates its output: the caching allocator may hand
                    # it the block an earlier library's correct output was freed
                    # from. Such blocks hold NaN first, so an output the call
                    # never writes cannot pass the check.
                    stale = [torch.full(ref.shape, float("nan"), dtype=spec.q.dtype, device="cuda") for _ in range(4)]
                    del stale
                raw = call.launch()
                torch.cuda.synchronize()
            out = call.view(raw)
            passed, text, stats = check(torch, out, ref, spec.dtype_name)
        except Exception as e:
            call = raw = out = None  # let a failed variant's tensors go before the next one
            sticky = safe_sync(torch)
            more = warning_summary(caught) if "caught" in locals() else ""
            msg = error_text(e) + (f" [warnings: {more}]" if more else "") + (f" [after: {sticky}]" if sticky else "")
            rejected.append(f"{variant}: {one_line(msg, 500)}")
            print(f"compare: {label} {lib} [{variant}]: {msg}", file=sys.stderr, flush=True)
            if env.args.verbose:
                traceback.print_exc(file=sys.stderr)
            continue
        setup_s = time.perf_counter() - t0
        if not passed:
            rejected.append(f"{variant}: wrong: {text}")
            wrong_stats = wrong_stats or dict(stats, variant=variant, check=text)
            if key is not None:
                wrong_keys.add(key)
            print(f"compare: {label} {lib} [{variant}]: WRONG: {text}", file=sys.stderr, flush=True)
            del out, raw, call
            continue
        kept = out.detach().clone()
        del out, raw
        try:
            median_ms, times, host_us, warm_calls = env.timer.measure(call.launch, env.args.iters, env.args.warmup_ms)
        except Exception as e:
            sticky = safe_sync(torch)
            rejected.append(f"{variant}: timing failed: {error_text(e)}" + (f" [after: {sticky}]" if sticky else ""))
            del call
            cell.update(status="error", reason="; ".join(rejected))
            return cell, None
        host_bound = host_us > 0.9 * env.timer.gpu_iteration_us(median_ms)
        cell.update(status="ok", variant=variant, rejected=rejected, check=text, median_ms=median_ms,
                    min_ms=min(times), times_ms=times, host_iteration_us=host_us, host_bound=host_bound,
                    warmup_calls=warm_calls, first_call_s=setup_s, **stats, **call.info)
        del call
        return cell, kept
    if wrong_stats is not None:
        env.any_wrong = True
        cell.update(status="wrong", reason="; ".join(rejected), **wrong_stats)
    else:
        messages = {r.split(": ", 1)[-1] for r in rejected}
        if len(rejected) > 1 and len(messages) == 1:
            reason = f"every variant ({len(rejected)}): {messages.pop()}"
        else:
            reason = "; ".join(rejected)
        cell.update(status="error", reason=reason)
    return cell, None


# ---------------------------------------------------------------- groups of rows


def uniform(torch, shape, dtype, gen):
    """Values uniform in [-1, 1), as flash_bench's inputs."""
    return torch.empty(shape, dtype=dtype, device="cuda").uniform_(-1.0, 1.0, generator=gen)


def torch_dtype(torch, name):
    return {"fp16": torch.float16, "bf16": torch.bfloat16}[name]


def run_group(env, sweep, rows, q, k, v, causal, dtype_name):
    """Runs the rows of one shape group (one set of inputs, one reference).

    rows: [(row dict, paged page size or 0)]; the row dict gets 'cells' and
    the max-abs-difference base. Libraries run in LIBS order within a row,
    rows in order."""
    torch = env.torch
    t0 = time.perf_counter()
    ref = reference(torch, q, k, v, causal)
    torch.cuda.synchronize()
    ref_s = time.perf_counter() - t0
    outputs = {}  # (row index, lib) -> checked output
    for ri, (row, page_size) in enumerate(rows):
        row["cells"] = {}
        row["reference_s"] = ref_s
        label = f"{sweep} {row['label']}"
        try:
            paged = Paged(torch, k, v, page_size) if page_size else None
        except Exception as e:  # no room for the pool, say: every cell of the row says so
            paged = None
            reason = f"making the paged cache failed: {error_text(e)}"
            print(f"compare: {label}: {reason}", file=sys.stderr, flush=True)
            safe_sync(torch)
            for lib in LIBS:
                row["cells"][lib] = {"lib": lib, "status": "error", "reason": reason}
            continue
        spec = Spec(sweep, q, k, v, causal, dtype_name, paged)
        for lib in LIBS:
            cell, out = run_cell(env, lib, spec, ref, label)
            row["cells"][lib] = cell
            if out is not None:
                outputs[(ri, lib)] = out
            if cell["status"] == "ok":
                print(f"compare: {label} {lib}: {cell['median_ms'] * 1e3:.1f} us ({cell['check']})",
                      file=sys.stderr, flush=True)
        del spec, paged
    # The base of the max abs differences: cuDNN's output where it ran a row
    # of this group (dense rows: every row holds the same keys), else the reference.
    base = None
    for (ri, lib), out in outputs.items():
        if lib == "cudnn":
            base = out
            break
    for ri, (row, _) in enumerate(rows):
        row["diff_base"] = "cudnn" if base is not None else "fp32 ref"
        for lib, cell in row["cells"].items():
            out = outputs.get((ri, lib))
            if out is None:
                continue
            if base is not None:
                cell["max_abs_vs_cudnn"] = float((out.float() - base.float()).abs().max().item())
    del outputs, base, ref
    torch.cuda.empty_cache()


def seed_sweep(env):
    torch = env.torch
    args = env.args
    gen = torch.Generator(device="cuda")
    gen.manual_seed(INPUT_SEED)
    rows = []
    causals = {"both": (False, True), "yes": (True,), "no": (False,)}[args.causal]
    for dtype_name in args.dtypes or ["fp16", "bf16"]:
        dtype = torch_dtype(torch, dtype_name)
        for hd in args.head_dims or [64, 128, 256]:
            heads = max(1, SEED_WIDTH // hd)
            for causal in causals:
                for n in args.seqlens:
                    batch = max(1, SEED_TOKENS // n)
                    flops = 4.0 * batch * heads * n * n * hd * (0.5 if causal else 1.0)
                    label = f"{dtype_name} hd{hd} {'causal' if causal else 'noncausal'} N{n}"
                    row = {"sweep": "seed", "label": label, "dtype": dtype_name, "head_dim": hd, "causal": causal,
                           "seqlen": n, "batch": batch, "heads_q": heads, "heads_kv": heads, "flops": flops}
                    print(f"compare: seed {label} (B {batch}, H {heads})", file=sys.stderr, flush=True)
                    q = uniform(torch, (batch, n, heads, hd), dtype, gen)
                    k = uniform(torch, (batch, n, heads, hd), dtype, gen)
                    v = uniform(torch, (batch, n, heads, hd), dtype, gen)
                    run_group(env, "seed", [(row, 0)], q, k, v, causal, dtype_name)
                    del q, k, v
                    rows.append(row)
    return rows


def decode_sweep(env):
    torch = env.torch
    args = env.args
    gen = torch.Generator(device="cuda")
    gen.manual_seed(INPUT_SEED + 1)
    hq, hkv = DECODE_HEADS
    rows = []
    for dtype_name in args.dtypes or ["bf16"]:
        dtype = torch_dtype(torch, dtype_name)
        elem = 2
        for hd in args.head_dims or [128]:
            for seqlen in args.kv_lens:
                for batch in args.batches:
                    group_rows = []
                    for page in [0] + [p for p in args.decode_page_sizes if seqlen % p == 0]:
                        cache = "dense" if page == 0 else f"paged{page}"
                        label = f"{dtype_name} hd{hd} B{batch} L{seqlen} {cache}"
                        group_rows.append(({"sweep": "decode", "label": label, "dtype": dtype_name, "head_dim": hd,
                                            "batch": batch, "seqlen_k": seqlen, "cache": cache, "heads_q": hq,
                                            "heads_kv": hkv, "kv_bytes": 2.0 * batch * seqlen * hkv * hd * elem},
                                           page))
                    print(f"compare: decode {dtype_name} hd{hd} B{batch} L{seqlen}", file=sys.stderr, flush=True)
                    q = uniform(torch, (batch, 1, hq, hd), dtype, gen)
                    k = uniform(torch, (batch, seqlen, hkv, hd), dtype, gen)
                    v = uniform(torch, (batch, seqlen, hkv, hd), dtype, gen)
                    run_group(env, "decode", group_rows, q, k, v, False, dtype_name)
                    del q, k, v
                    rows.extend(r for r, _ in group_rows)
    return rows


def serving_sweep(env):
    torch = env.torch
    args = env.args
    gen = torch.Generator(device="cuda")
    gen.manual_seed(INPUT_SEED + 2)
    hq, hkv = SERVING_HEADS
    pairs = exact_causal_pairs(SERVING_NEW, SERVING_CACHED)
    rows = []
    for dtype_name in args.dtypes or ["bf16"]:
        dtype = torch_dtype(torch, dtype_name)
        for hd in args.head_dims or [64, 128, 256]:
            flops = 4.0 * SERVING_BATCH * hq * hd * pairs
            group_rows = []
            for page in [0] + [p for p in args.page_sizes if SERVING_CACHED % p == 0]:
                cache = "dense" if page == 0 else f"paged{page}"
                label = f"{dtype_name} hd{hd} {cache}"
                group_rows.append(({"sweep": "serving", "label": label, "dtype": dtype_name, "head_dim": hd,
                                    "cache": cache, "batch": SERVING_BATCH, "seqlen_q": SERVING_NEW,
                                    "seqlen_k": SERVING_CACHED, "heads_q": hq, "heads_kv": hkv, "causal": True,
                                    "flops": flops}, page))
            print(f"compare: serving {dtype_name} hd{hd}", file=sys.stderr, flush=True)
            q = uniform(torch, (SERVING_BATCH, SERVING_NEW, hq, hd), dtype, gen)
            k = uniform(torch, (SERVING_BATCH, SERVING_CACHED, hkv, hd), dtype, gen)
            v = uniform(torch, (SERVING_BATCH, SERVING_CACHED, hkv, hd), dtype, gen)
            run_group(env, "serving", group_rows, q, k, v, True, dtype_name)
            del q, k, v
            rows.extend(r for r, _ in group_rows)
    return rows


# ---------------------------------------------------------------- tables


def cell_value(cell, kind, row):
    """'wrong', '-', 'n/a' or the figure: TFLOP/s, or 'us (GB/s)' for decode."""
    status = cell["status"]
    if status == "n/a":
        return "n/a"
    if status == "wrong":
        return "wrong"
    if status != "ok":
        return "-"
    ms = cell["median_ms"]
    if kind == "decode":
        return f"{ms * 1e3:.1f} ({row['kv_bytes'] / (ms * 1e-3) / 1e9:.0f})"
    return fmt(row["flops"] / (ms * 1e-3) / 1e12)


def rate(cell, row, kind):
    """Higher is better: TFLOP/s, or GB/s for decode."""
    ms = cell["median_ms"]
    return (row["kv_bytes"] if kind == "decode" else row["flops"]) / (ms * 1e-3)


def row_ratio(row, kind):
    cells = row["cells"]
    if cells.get("flash", {}).get("status") != "ok":
        return "-"
    others = [rate(c, row, kind) for lib, c in cells.items() if lib != "flash" and c["status"] == "ok"]
    if not others:
        return "-"
    best = max(others)
    return f"{rate(cells['flash'], row, kind) / best:.2f}"


def diff_text(row):
    cells = row["cells"]
    parts = []
    if row.get("diff_base") == "cudnn":
        for lib in LIBS:
            c = cells.get(lib, {})
            if lib != "cudnn" and c.get("status") == "ok" and "max_abs_vs_cudnn" in c:
                parts.append(f"{lib} {sci(c['max_abs_vs_cudnn'])}")
        own = cells.get("cudnn", {})
        tail = f" (cudnn vs fp32 {sci(own.get('max_abs_vs_ref'))})" if own.get("status") == "ok" else ""
        return "vs cudnn: " + (", ".join(parts) or "-") + tail
    for lib in LIBS:
        c = cells.get(lib, {})
        if c.get("status") == "ok":
            parts.append(f"{lib} {sci(c.get('max_abs_vs_ref'))}")
    return "vs fp32: " + (", ".join(parts) or "-")


class Notes:
    """Reasons and variants under a table, each printed once with the rows it concerns."""

    def __init__(self):
        self.items = {}

    def add(self, lib, text, label):
        self.items.setdefault((lib, text), []).append(label)

    def lines(self):
        out = []
        keys = sorted(self.items, key=lambda key: LIBS.index(key[0]) if key[0] in LIBS else len(LIBS))
        for lib, text in keys:
            labels = self.items[(lib, text)]
            where = ""
            if labels and labels[0] is not None:
                n = len(labels)
                shown = ", ".join(labels[:4]) + (", ..." if n > 4 else "")
                where = f" ({n} row{'s' if n > 1 else ''}: {shown})"
            out.append(f"- {lib}: {text}{where}")
        return out


def collect_notes(env, rows, libs_shown):
    notes = Notes()
    for lib in libs_shown:
        if lib in env.missing:
            notes.add(lib, env.missing[lib], None)
    for row in rows:
        for lib, c in row["cells"].items():
            status = c["status"]
            if status == "wrong":
                notes.add(lib, f"failed the check, not timed: {c.get('reason', '?')}", row["label"])
            elif status == "error":
                notes.add(lib, f"error: {c.get('reason', '?')}", row["label"])
            elif status == "ok":
                variant = c.get("variant", "")
                if lib in ("cudnn", "fa2") and variant not in ("", "no mask", "is_causal=True"):
                    notes.add(lib, f"ran as {variant}", row["label"])
                for r in c.get("rejected", []):
                    notes.add(lib, f"set aside first: {r}", row["label"])
                if lib == "flashinfer" and c.get("backend"):
                    notes.add(lib, f"backend {c['backend']}", row["label"])
                if c.get("host_bound"):
                    notes.add(lib, "host-bound: one iteration's host time exceeded its GPU time, the figure "
                              "may include idle GPU (raise --cover_us)", row["label"])
    return notes


def print_table(env, title, kind, rows, out):
    libs_shown = [lib for lib in LIBS if any(r["cells"][lib]["status"] != "n/a" for r in rows)]
    unit = "us (GB/s of K+V)" if kind == "decode" else "TFLOP/s"
    print(f"\n## {title}\n", file=out)
    if kind == "seed":
        head = ["dtype", "head_dim", "causal", "N", "B x H"]
    elif kind == "decode":
        head = ["dtype", "head_dim", "batch", "L", "cache"]
    else:
        head = ["dtype", "head_dim", "cache"]
    head += [f"{lib}" for lib in libs_shown] + ["flash / best other"]
    if kind == "serving":
        head.append("flash vs dense")
    head += ["max abs diff", "flash kernel"]
    print(f"{unit}; flash / best other > 1: flash is faster.\n", file=out)
    print("| " + " | ".join(head) + " |", file=out)
    print("|" + "---|" * len(head), file=out)
    dense_rate = {}
    for row in rows:
        cells = row["cells"]
        if kind == "seed":
            cols = [row["dtype"], str(row["head_dim"]), "yes" if row["causal"] else "no", str(row["seqlen"]),
                    f"{row['batch']} x {row['heads_q']}"]
        elif kind == "decode":
            cols = [row["dtype"], str(row["head_dim"]), str(row["batch"]), str(row["seqlen_k"]), row["cache"]]
        else:
            cols = [row["dtype"], str(row["head_dim"]), row["cache"]]
        cols += [cell_value(cells[lib], kind, row) for lib in libs_shown]
        cols.append(row_ratio(row, kind))
        if kind == "serving":
            key = (row["dtype"], row["head_dim"])
            flash_cell = cells["flash"]
            vs = "-"
            if flash_cell["status"] == "ok":
                r = rate(flash_cell, row, kind)
                if row["cache"] == "dense":
                    dense_rate[key] = r
                    vs = "1.00"
                elif key in dense_rate:
                    vs = f"{r / dense_rate[key]:.2f}"
            cols.append(vs)
        cols.append(diff_text(row))
        cols.append(cells["flash"].get("kernel", "-") if cells["flash"]["status"] == "ok" else "-")
        print("| " + " | ".join(one_line(c, 400) for c in cols) + " |", file=out)
    lines = collect_notes(env, rows, libs_shown).lines()
    if lines:
        print("", file=out)
        for line in lines:
            print(one_line(line, 1200), file=out)
    out.flush()


def print_header(env, out):
    torch = env.torch
    args = env.args
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    l2 = int(getattr(props, "L2_cache_size", 0))
    print("# flash beside PyTorch SDPA (cuDNN, FlashAttention-2), FlashAttention-4 and FlashInfer\n", file=out)
    print(f"- GPU: {props.name}, {props.multi_processor_count} SMs, L2 {l2 >> 20} MiB, "
          f"{props.total_memory / 2**30:.0f} GiB", file=out)
    print(f"- torch {env.versions['torch']} (CUDA {env.versions['cuda (torch)']})", file=out)
    for lib in LIBS:
        if lib in env.missing:
            print(f"- {lib}: {env.missing[lib]}", file=out)
        else:
            print(f"- {lib}: {env.versions.get(lib, '?')}", file=out)
    print(f"- ceiling: cuBLAS bf16 GEMM 8192^3 (torch.mm), median: {env.ceiling:.1f} TFLOP/s", file=out)
    t = env.timer
    flush = (f"L2 flushed before each (fill of {t.flush_bytes >> 20} MiB, {t.flush_us:.0f} us)" if t.flush_bytes
             else "L2 not flushed")
    cover = (f"then a {t.cover_us:.0f} us GPU sleep" if t.cycles_per_us else (t.sleep_note or "no GPU sleep"))
    print(f"- timing: median of {args.iters} CUDA-event-timed calls after >= {args.warmup_ms:.0f} ms of warm-up, "
          f"{flush}, {cover}, outside the timed region; libraries interleaved per shape", file=out)
    print("- check: float32 reference (TF32 off) per shape; fail (\"wrong\", not timed) on non-finite output, rel L2 "
          "above 5e-3 fp16 / 1.5e-2 bf16, or an element beyond atol + rtol*|ref| (atol 0.05 / 0.25 x rms(ref), "
          "rtol 2^-9 / 2^-6)", file=out)
    out.flush()


# ---------------------------------------------------------------- main


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sweeps = parser.add_argument_group("sweeps (none given: --seed)")
    sweeps.add_argument("--seed", action="store_true", help="the seed sweep (fp16/bf16, hd 64/128/256, causal and "
                        "not, N 512..16384, B*N = 16384, H*D = 2048)")
    sweeps.add_argument("--decode", action="store_true", help="decode: 1 query, heads 32/8, batch 1/8/32, 4k/32k keys, "
                        "dense and 16-key paged caches; us and GB/s")
    sweeps.add_argument("--serving", action="store_true", help="chunked prefill: bf16, heads 32/8, batch 4, 2048 "
                        "causal queries vs 16384 cached keys, dense and paged 1/16/64/256")
    shapes = parser.add_argument_group("shapes")
    shapes.add_argument("--dtypes", type=name_list(("fp16", "bf16")), default=None,
                        help="dtypes of every selected sweep (default: seed fp16,bf16; decode and serving bf16)")
    shapes.add_argument("--head_dims", type=int_list, default=None,
                        help="head dims of every selected sweep (default: seed and serving 64,128,256; decode 128)")
    shapes.add_argument("--seqlens", type=int_list, default=list(SEED_SEQLENS), help="seed sweep N (default: "
                        + ",".join(map(str, SEED_SEQLENS)) + ")")
    shapes.add_argument("--causal", choices=("both", "yes", "no"), default="both", help="seed sweep masks")
    shapes.add_argument("--batches", type=int_list, default=list(DECODE_BATCHES), help="decode batches (1,8,32)")
    shapes.add_argument("--kv_lens", type=int_list, default=list(DECODE_KV_LENS), help="decode keys (4096,32768)")
    shapes.add_argument("--decode_page_sizes", type=int_list, default=[16], help="decode paged caches (16)")
    shapes.add_argument("--page_sizes", type=int_list, default=[1, 16, 64, 256],
                        help="serving paged caches (1,16,64,256)")
    libs = parser.add_argument_group("libraries")
    libs.add_argument("--libs", type=name_list(LIBS), default=list(LIBS),
                      help="libraries to run, in the fixed order " + ",".join(LIBS) + " (default: all importable)")
    libs.add_argument("--flash_backend", choices=("auto", "sm80", "sm90", "decode"), default="auto",
                      help="flash's backend= (default auto)")
    libs.add_argument("--seed_flashinfer", action="store_true",
                      help="also run FlashInfer (ragged prefill, fa3) on the seed sweep; it builds kernels for "
                           "each dtype and head dim (15-90 s each)")
    timing = parser.add_argument_group("timing and output")
    timing.add_argument("--iters", type=int, default=30, help="timed calls per cell, the median reported (30)")
    timing.add_argument("--warmup_ms", type=float, default=200.0, help="warm-up per cell, at least 3 calls (200)")
    timing.add_argument("--flush_mib", type=int, default=256, help="L2 flush buffer, at least 2 x L2 (256)")
    timing.add_argument("--no-flush", dest="flush", action="store_false", help="do not flush the L2")
    timing.add_argument("--cover_us", type=float, default=200.0,
                        help="GPU sleep before each timed call that hides the host's launch cost (200; 0: none)")
    timing.add_argument("--json", metavar="PATH", help="write every measurement to PATH (rewritten after each sweep)")
    timing.add_argument("--verbose", action="store_true", help="print tracebacks of failing calls")
    args = parser.parse_args(argv)
    if args.iters < 1:
        parser.error("--iters must be at least 1")
    if args.warmup_ms < 0 or args.cover_us < 0 or args.flush_mib < 0:
        parser.error("--warmup_ms, --cover_us and --flush_mib must be >= 0")
    if not (args.seed or args.decode or args.serving):
        args.seed = True
    return args


def write_json(env, path, sweeps):
    torch = env.torch
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    t = env.timer
    doc = {
        "gpu": props.name,
        "versions": env.versions,
        "missing": env.missing,
        "args": {k: v for k, v in vars(env.args).items()},
        "ceiling_bf16_gemm_8192_tflops": env.ceiling,
        "timing": {"iters": env.args.iters, "warmup_ms": env.args.warmup_ms, "flush_bytes": t.flush_bytes,
                   "flush_us": t.flush_us, "cover_us": t.cover_us if t.cycles_per_us else 0.0,
                   "sleep_cycles_per_us": t.cycles_per_us},
        "tolerances": TOLERANCES,
        "sweeps": sweeps,
    }
    for rows in sweeps.values():
        for row in rows:
            for cell in row.get("cells", {}).values():
                if cell.get("status") == "ok":
                    ms = cell["median_ms"]
                    if "flops" in row:
                        cell["tflops"] = row["flops"] / (ms * 1e-3) / 1e12
                    if "kv_bytes" in row:
                        cell["gbps"] = row["kv_bytes"] / (ms * 1e-3) / 1e9
                        cell["median_us"] = ms * 1e3
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, default=str)


def save_json(env, path, sweeps):
    try:
        write_json(env, path, sweeps)
    except Exception as e:
        print(f"compare: could not write {path}: {error_text(e)}", file=sys.stderr, flush=True)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        import torch
    except ImportError as e:
        print(f"compare: PyTorch is needed to run the comparison ({e})", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("compare: no CUDA device", file=sys.stderr)
        return 77
    # The reference runs in true float32 (no TF32 in its matrix products).
    try:
        if hasattr(torch.backends.cuda.matmul, "fp32_precision"):
            torch.backends.cuda.matmul.fp32_precision = "ieee"
        else:
            torch.backends.cuda.matmul.allow_tf32 = False
    except Exception as e:
        print(f"compare: could not turn TF32 off for the reference: {error_text(e)}", file=sys.stderr)

    env = Env(torch, args)
    import_libraries(env)
    with torch.no_grad():
        env.timer = Timer(torch, args.flush, args.flush_mib, args.cover_us)
        env.ceiling = gemm_ceiling(env)
        env.timer.recalibrate()
        print_header(env, sys.stdout)
        done = {}
        plan = [("seed", args.seed, seed_sweep, "seed sweep: B*N = 16384, H*D = 2048, heads_kv = heads_q"),
                ("decode", args.decode, decode_sweep, "decode: 1 query, heads 32/8, us (GB/s of K+V)"),
                ("serving", args.serving, serving_sweep,
                 "serving: chunked prefill, batch 4, 2048 causal queries vs 16384 cached keys, heads 32/8")]
        for name, wanted, fn, title in plan:
            if not wanted:
                continue
            t0 = time.perf_counter()
            try:
                rows = fn(env)
            except Exception as e:  # a bug here, or the GPU is gone: say so, keep what ran
                traceback.print_exc(file=sys.stderr)
                print(f"\n## {title}\n\nthe sweep stopped: {error_text(e)}", file=sys.stdout, flush=True)
                continue
            print(f"compare: {name} sweep took {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
            done[name] = rows
            print_table(env, title, name, rows, sys.stdout)
            if args.json:
                save_json(env, args.json, done)
        if args.json and not done:
            save_json(env, args.json, done)
    return 1 if env.any_wrong else 0


if __name__ == "__main__":
    sys.exit(main())
