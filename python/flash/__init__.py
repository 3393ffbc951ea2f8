"""flash: exact attention forward on NVIDIA GPUs, from Python.

Takes any DLPack tensor on a CUDA device (PyTorch, CuPy, JAX, ...) without
copying it and without importing a framework it is not given::

    import torch, flash
    q = torch.randn(2, 4096, 32, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(2, 4096, 8, 128, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    out = flash.attention(q, k, v, causal=True)          # [2, 4096, 32, 128]
    out, lse = flash.attention(q, k, v, return_lse=True)

Layouts (any strides; the last dimension contiguous):

- q, out: ``[batch, seqlen_q, heads_q, head_dim]``, or ``[total_q, heads_q,
  head_dim]`` with ``cu_seqlens_q`` (int32 ``[batch + 1]``) and ``max_seqlen_q``;
- k, v: ``[batch, seqlen_k, heads_kv, head_dim]``; ``[total_k, heads_kv,
  head_dim]`` with ``cu_seqlens_k`` and ``max_seqlen_k``; or a paged cache
  ``[num_pages, page_size, heads_kv, head_dim]`` with ``block_table`` (int32
  ``[batch, max_pages_per_seq]``), usually with ``seqused_k`` (int32
  ``[batch]``);
- v and out may have a last dimension of their own, ``head_dim_v``
  (DeepSeek-V2/V3 prefill: q and k 192 wide, v and out 128);
- lse: float32 ``[batch, heads_q, seqlen_q]`` (varlen: ``[heads_q, total_q]``);
- an fp8 KV cache: k and v ``float8_e4m3fn`` (PyTorch's ``torch.float8_e4m3fn``,
  DLPack's ``kDLFloat8_e4m3fn``), or ``uint8`` views of their bytes with
  ``kv_dtype="float8_e4m3fn"``; q and out stay float16 / bfloat16. Optional
  ``k_descale`` / ``v_descale``: float32 ``[1]`` or ``[heads_kv]``;
- the FP8 prefill (Hopper): q as well ``float8_e4m3fn`` (or ``uint8`` with
  ``q_dtype="float8_e4m3fn"``), with an fp8 cache; out bfloat16 (or
  ``out_dtype="float16"``); ``q_descale`` like ``k_descale``.

Outputs and the workspace are allocated only when not given, by the
framework of ``q`` (PyTorch's caching allocator for PyTorch tensors, so the
call can be captured in a CUDA graph; CuPy's for CuPy arrays); for other
frameworks pass ``out`` (and ``lse``, ``workspace``). The call runs on
``stream``: an int (a ``cudaStream_t``) or an object with ``cuda_stream``
(or CuPy's ``ptr``); by default the framework's current stream (PyTorch,
CuPy), else the legacy default stream. It is asynchronous on that stream.

Errors: a rejected argument raises ``ValueError`` with the library's message;
a call this build or GPU cannot run, or a CUDA failure, ``RuntimeError``.
"""

from __future__ import annotations

import contextlib
from typing import Any, Optional, Tuple, Union

from . import _flash

__version__: str = _flash.__version__

__all__ = ["attention", "workspace_size", "kernel_choice", "validate", "__version__"]

_KEYS = (
    "causal", "scale", "window_left", "window_right", "softcap", "sinks", "alibi_slopes",
    "cu_seqlens_q", "cu_seqlens_k",
    "max_seqlen_q", "max_seqlen_k", "seqused_k", "block_table", "num_splits", "backend", "autotune", "workspace",
    "k_new", "v_new", "cu_seqlens_k_new", "rotary_cos", "rotary_sin", "rotary_interleaved",
    "kv_dtype", "k_descale", "v_descale", "q_dtype", "q_descale", "out_dtype",
)


def _framework(x: Any) -> str:
    module = type(x).__module__ or ""
    if module.startswith("torch"):
        return "torch"
    if module.startswith("cupy"):
        return "cupy"
    return "other"


def _stream_handle(stream: Any, q: Any) -> int:
    if stream is None:
        fw = _framework(q)
        if fw == "torch":
            import torch  # the caller's own framework, already imported

            return int(torch.cuda.current_stream(q.device).cuda_stream)
        if fw == "cupy":
            import cupy

            return int(cupy.cuda.get_current_stream().ptr)
        return 0
    if isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "ptr"):
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    raise ValueError("stream must be an int (a cudaStream_t) or have a cuda_stream attribute")


def _on_device(q: Any, stream: Any) -> contextlib.ExitStack:
    """The context of a call: q's device current, and for PyTorch the call's
    stream current, so that what is allocated belongs to that stream (the
    caching allocator reuses a block only in that stream's order)."""
    ctx = contextlib.ExitStack()
    fw = _framework(q)
    if fw == "torch":
        import torch

        ctx.enter_context(torch.cuda.device(q.device))
        if stream is not None:
            ctx.enter_context(torch.cuda.stream(torch.cuda.ExternalStream(_stream_handle(stream, q), device=q.device)))
    elif fw == "cupy":
        import cupy

        ctx.enter_context(q.device)
        if stream is not None:
            # CuPy's pool, like PyTorch's, hands a freed block back only in
            # its stream's order: allocate on the call's stream.
            ctx.enter_context(cupy.cuda.ExternalStream(_stream_handle(stream, q), q.device.id))
    return ctx


def _empty(like: Any, shape: Tuple[int, ...], dtype: str) -> Any:
    """A new tensor of `shape` in `like`'s framework and device ('same' = like's dtype)."""
    fw = _framework(like)
    if fw == "torch":
        import torch

        names = {"float32": torch.float32, "uint8": torch.uint8, "bfloat16": torch.bfloat16, "float16": torch.float16}
        if dtype != "same" and dtype not in names:
            raise ValueError(f"out_dtype must be None, 'bfloat16' or 'float16'; got '{dtype}'")
        dt = like.dtype if dtype == "same" else names[dtype]
        return torch.empty(shape, dtype=dt, device=like.device)
    if fw == "cupy" and dtype == "bfloat16":
        raise ValueError("CuPy has no bfloat16: pass out= (a bfloat16 array of another framework) or "
                         "out_dtype='float16'")
    if fw == "cupy":
        import cupy

        with like.device:
            dt = like.dtype if dtype == "same" else dtype
            return cupy.empty(shape, dtype=dt)
    what = {"float32": "lse", "uint8": "workspace"}.get(dtype, "out")
    raise ValueError(f"flash allocates only for PyTorch and CuPy tensors; pass {what}= for {type(like).__name__}")


def _options(kwargs: dict) -> dict:
    unknown = set(kwargs) - set(_KEYS) - {"window"}
    if unknown:
        raise TypeError(f"unexpected keyword argument(s): {', '.join(sorted(unknown))}")
    opts = {key: kwargs[key] for key in _KEYS if key in kwargs}
    if "window" in kwargs:
        left, right = kwargs["window"]
        opts["window_left"], opts["window_right"] = int(left), int(right)
    return opts


def _fp8_views(q: Any, k: Any, v: Any, opts: dict) -> Tuple[Any, Any, Any]:
    """PyTorch float8_e4m3fn q, k and v as uint8 views of the same bytes, with
    q_dtype / kv_dtype='float8_e4m3fn' in opts: PyTorch's DLPack export
    refused fp8 ("float8 types are not supported by dlpack") until recent
    releases, and a view works with every release (no copy; strides count
    elements, one byte each either way)."""
    if all(_framework(x) != "torch" for x in (q, k, v)):
        return q, k, v
    import torch  # the caller's own framework, already imported

    fp8 = getattr(torch, "float8_e4m3fn", None)
    if fp8 is not None and getattr(q, "dtype", None) == fp8 and opts.get("q_dtype") in (None, "float8_e4m3fn"):
        opts["q_dtype"] = "float8_e4m3fn"
        q = q.view(torch.uint8)
    k, v = _fp8_kv_views(k, v, opts, fp8)
    return q, k, v


def _fp8_kv_views(k: Any, v: Any, opts: dict, fp8: Any) -> Tuple[Any, Any]:
    import torch

    k_fp8 = fp8 is not None and getattr(k, "dtype", None) == fp8
    v_fp8 = fp8 is not None and getattr(v, "dtype", None) == fp8
    if not (k_fp8 or v_fp8) or opts.get("kv_dtype") not in (None, "float8_e4m3fn"):
        return k, v  # nothing to view, or a kv_dtype the extension rejects with its message
    if k_fp8 != v_fp8:
        raise ValueError("k and v must both be float8_e4m3fn (an fp8 cache) or both have q's dtype")
    opts["kv_dtype"] = "float8_e4m3fn"
    return k.view(torch.uint8), v.view(torch.uint8)


def _out_dtype(opts: dict) -> str:
    """The dtype attention() allocates out with: q's, or for an e4m3 q
    out_dtype (default bfloat16)."""
    if opts.get("q_dtype") is None:
        return "same"
    return opts.get("out_dtype") or "bfloat16"


def _wants_workspace(opts: dict) -> bool:
    """Whether attention() allocates a workspace the caller did not give:
    splits, appends and the FP8 prefill (V transposed) want one."""
    return opts.get("num_splits", 0) != 1 or opts.get("k_new") is not None or opts.get("q_dtype") is not None


def _call_workspace(q: Any, k: Any, v: Any, opts: dict, out: Any = None, lse: Any = None,
                    auto_splits: bool = True) -> None:
    """The workspace attention() would allocate, in opts when the caller gave
    none, so that kernel_choice() and validate() see the call attention()
    runs: appends, explicit splits and the FP8 prefill are refused without
    one, and (auto_splits) flash's own split count follows it. Run with q's
    device current."""
    if auto_splits:
        wanted = _wants_workspace(opts)
    else:
        wanted = opts.get("k_new") is not None or opts.get("q_dtype") is not None or opts.get("num_splits", 0) > 1
    if opts.get("workspace") is not None or not wanted:
        return
    need = _flash.workspace_size(_flash.params(q, k, v, out=out, lse=lse, **opts))
    if need > 0:
        opts["workspace"] = _empty(q, (need,), "uint8")


def _lse_shape(q: Any, opts: dict, heads_q: int) -> Tuple[int, ...]:
    if opts.get("cu_seqlens_q") is not None:
        return (heads_q, int(q.shape[0]))
    return (int(q.shape[0]), heads_q, int(q.shape[1]))


def attention(
    q: Any,
    k: Any,
    v: Any,
    *,
    out: Any = None,
    lse: Any = None,
    return_lse: bool = False,
    workspace: Any = None,
    stream: Any = None,
    **kwargs: Any,
) -> Union[Any, Tuple[Any, Any]]:
    """softmax(scale * q k^T + mask) v for DLPack tensors; returns out (and lse).

    Keyword options (the C++ API's fields): causal=False, scale=None
    (1/sqrt(head_dim)), window=(-1, -1) or window_left / window_right,
    softcap=0.0, sinks (float32 [heads_q] logits, attention sinks),
    alibi_slopes (float32 [heads_q]: scores gain -slope * |i + d - j|),
    cu_seqlens_q / cu_seqlens_k with max_seqlen_q / max_seqlen_k (packed
    q, k and v hold exactly cu_seqlens[-1] rows, no padding: the lse rows
    of head h start at h * cu_seqlens_q[-1]),
    seqused_k, block_table, num_splits=0 (flash chooses; it splits only with
    a workspace, which is allocated here when flash wants one and none is
    given), backend='auto' ('sm80', 'sm90', 'decode'), autotune=False.
    Append and attend: k_new / v_new ([batch, seqlen_new, heads_kv, d], or
    packed with cu_seqlens_k_new) are written into the cache k / v (dense
    or paged, which this call modifies) at seqused_k[b] onwards, then
    attended; rotary_cos / rotary_sin (float32 [positions, rotary_dim / 2])
    rotate the new keys and q first (rotary_interleaved=False: GPT-NeoX
    pairs (j, j + rotary_dim / 2); True: (2j, 2j + 1)). seqused_k is read,
    not updated.
    FP8 KV cache (decode kernel; chunked prefill on the Hopper kernel): k and v of dtype
    float8_e4m3fn (PyTorch's torch.float8_e4m3fn; flash passes them on as
    uint8 views), or uint8 tensors of e4m3 bytes with
    kv_dtype='float8_e4m3fn' (e.g. ``k.view(torch.uint8)``); both or
    neither. q and out stay float16 / bfloat16. k_descale / v_descale
    (float32 [1]: one factor, or [heads_kv]: one per K/V head; both the same
    length; None means 1) dequantise them: K = k_descale[h] * k. Needs
    head_dim and v's last dimension multiples of 16, strides of k and v
    multiples of 16 elements. With k_new / v_new (q's dtype) the new rows
    are stored as e4m3(x / descale) of their K/V head (rounded to nearest,
    saturated at 448), keys rotated first. A descale without an fp8 cache
    raises ValueError.
    FP8 prefill (Hopper kernel, e4m3 tensor cores): q, k and v all
    float8_e4m3fn (or uint8 with q_dtype='float8_e4m3fn' and
    kv_dtype='float8_e4m3fn'), q_descale like k_descale (Q = q_descale[h] *
    q, h the K/V head); out is bfloat16, or float16 with out_dtype='float16'
    (or out's own dtype when out is given). head_dim 64, 128 or 256; dense
    or varlen; causal and windows; lse and sinks. It needs a workspace (V
    transposed), allocated here when not given.
    """
    opts = _options(kwargs)
    q, k, v = _fp8_views(q, k, v, opts)
    with _on_device(q, stream):
        if out is None:
            out = _empty(q, tuple(int(d) for d in q.shape[:-1]) + (int(v.shape[-1]),), _out_dtype(opts))
        if lse is None and return_lse:
            lse = _empty(q, _lse_shape(q, opts, int(q.shape[-2])), "float32")
        if workspace is None and _wants_workspace(opts):
            need = _flash.workspace_size(_flash.params(q, k, v, out=out, lse=lse, **opts))
            if need > 0:
                workspace = _empty(q, (need,), "uint8")
        _flash.forward(_flash.params(q, k, v, out=out, lse=lse, workspace=workspace, **opts), _stream_handle(stream, q))
    return (out, lse) if return_lse else out


def workspace_size(q: Any, k: Any, v: Any, **kwargs: Any) -> int:
    """Bytes of workspace attention() needs for this call.

    0 when flash would not split the keys, and the call neither appends
    (k_new) nor runs the FP8 prefill (e4m3 q)."""
    opts = _options(kwargs)
    q, k, v = _fp8_views(q, k, v, opts)
    with _on_device(q, None):
        return int(_flash.workspace_size(_flash.params(q, k, v, **opts)))


def kernel_choice(q: Any, k: Any, v: Any, **kwargs: Any) -> dict:
    """The kernel configuration the call runs: name, backend, block_m, block_n, warps, stages.

    Without workspace=, the workspace attention() would allocate is
    allocated here (splits, appends, the FP8 prefill), so the answer is the
    kernel attention() runs."""
    opts = _options(kwargs)
    q, k, v = _fp8_views(q, k, v, opts)
    with _on_device(q, None):
        _call_workspace(q, k, v, opts)
        return dict(_flash.kernel_choice(_flash.params(q, k, v, **opts)))


def validate(q: Any, k: Any, v: Any, *, out: Any = None, lse: Any = None, **kwargs: Any) -> None:
    """The library's argument checks, launching nothing: raises ValueError, or returns None.

    Without workspace=, a call that is refused without one (appends,
    explicit splits, the FP8 prefill) gets the one attention() would
    allocate, as in kernel_choice; other calls are checked as they are."""
    opts = _options(kwargs)
    q, k, v = _fp8_views(q, k, v, opts)
    with _on_device(q, None):
        _call_workspace(q, k, v, opts, out, lse, auto_splits=False)
        _flash.validate(_flash.params(q, k, v, out=out, lse=lse, **opts))


def merge_states(
    o_states: Any,
    lse_states: Any,
    *,
    out: Any = None,
    lse: Any = None,
    return_lse: bool = False,
    stream: Any = None,
) -> Union[Any, Tuple[Any, Any]]:
    """Merges n partial attention results over disjoint key sets; returns out (and lse).

    o_states: [n, batch, seqlen_q, heads, head_dim] (fp16/bf16), lse_states:
    float32 [n, batch, heads, seqlen_q] (each state's LSE as attention()
    returns it). LSE = log sum exp(LSE_s), out = sum exp(LSE_s - LSE) O_s,
    in a fixed order; rows with every LSE -inf get 0 and -inf. out may be
    one of the states (in place).
    """
    with _on_device(o_states, stream):
        if out is None:
            out = _empty(o_states, tuple(int(d) for d in o_states.shape[1:]), "same")
        if lse is None and return_lse:
            lse = _empty(o_states, tuple(int(d) for d in lse_states.shape[1:]), "float32")
        _flash.merge_states(o_states, lse_states, out, lse, _stream_handle(stream, o_states))
    return (out, lse) if return_lse else out
