"""pytest suite of the flash Python package.

Host tests run everywhere (CI has no GPU): import, version, argument checks
that need no device (NumPy arrays are DLPack tensors on the CPU). GPU tests
need a CUDA device and PyTorch (CuPy for its own test) and are skipped
without them: flash against a float32 PyTorch reference for dense, GQA,
causal, windowed, softcapped, strided, varlen and paged calls, the LSE,
an fp8 (e4m3) KV cache and the FP8 prefill against a float64 reference,
errors, the caller's stream and CUDA-graph capture.
"""

import math
import re

import numpy as np
import pytest

import flash

try:
    import torch

    HAS_CUDA = torch.cuda.is_available()
except ImportError:  # pragma: no cover - depends on the machine
    torch = None
    HAS_CUDA = False

gpu = pytest.mark.skipif(not HAS_CUDA, reason="needs PyTorch and a CUDA device")


# ---------------------------------------------------------------- host


def test_version_is_the_library_version():
    assert re.fullmatch(r"\d+\.\d+\.\d+", flash.__version__)
    assert flash.__version__ == flash._flash.library_version()


def test_type_stubs_ship_with_the_package():
    import pathlib

    here = pathlib.Path(flash.__file__).parent
    assert (here / "__init__.pyi").is_file()
    assert (here / "py.typed").is_file()


def test_cpu_tensors_are_rejected_with_value_error():
    q = np.zeros((1, 4, 2, 64), np.float16)
    with pytest.raises(ValueError, match="CUDA tensor"):
        flash.workspace_size(q, q, q)
    with pytest.raises(ValueError, match="pass out="):
        flash.attention(q, q, q)  # NumPy: flash does not allocate for it


def test_dtype_and_rank_are_checked():
    q = np.zeros((1, 4, 2, 64), np.float32)
    with pytest.raises(ValueError, match="float16 or bfloat16"):
        flash.kernel_choice(q, q, q)
    q3 = np.zeros((4, 2, 64), np.float16)
    with pytest.raises(ValueError, match="4 dimensions"):
        flash.kernel_choice(q3, q3, q3)


def test_fp8_cache_arguments_are_checked_on_the_host():
    # These checks come before the device check, so NumPy arrays reach them.
    q = np.zeros((1, 1, 8, 128), np.float16)
    k = np.zeros((1, 64, 2, 128), np.float16)
    descale = np.ones(2, np.float32)
    with pytest.raises(ValueError, match="k_descale / v_descale need an fp8 cache"):
        flash.kernel_choice(q, k, k, k_descale=descale)
    with pytest.raises(ValueError, match="k_descale / v_descale need an fp8 cache"):
        flash.kernel_choice(q, k, k, v_descale=descale)
    k8 = np.zeros((1, 64, 2, 128), np.uint8)
    with pytest.raises(ValueError, match="pass kv_dtype='float8_e4m3fn'"):
        flash.kernel_choice(q, k8, k8)  # uint8 is e4m3 bytes only when the call says so
    with pytest.raises(ValueError, match="kv_dtype must be None or 'float8_e4m3fn'"):
        flash.kernel_choice(q, k8, k8, kv_dtype="float8_e5m2")
    with pytest.raises(ValueError, match="needs k and v of dtype float8_e4m3fn or uint8"):
        flash.kernel_choice(q, k, k, kv_dtype="float8_e4m3fn")
    with pytest.raises(ValueError, match="CUDA tensor"):
        flash.kernel_choice(q, k8, k8, kv_dtype="float8_e4m3fn")  # accepted as e4m3 bytes; then the device check


def test_fp8_prefill_arguments_are_checked_on_the_host():
    # An e4m3 q (the FP8 prefill): these checks too come before the device check.
    q8 = np.zeros((1, 64, 8, 128), np.uint8)
    kv8 = np.zeros((1, 64, 2, 128), np.uint8)
    q16, k16 = np.zeros((1, 64, 8, 128), np.float16), np.zeros((1, 64, 2, 128), np.float16)
    e4m3 = {"q_dtype": "float8_e4m3fn", "kv_dtype": "float8_e4m3fn"}
    descale = np.ones(2, np.float32)
    with pytest.raises(ValueError, match="pass q_dtype='float8_e4m3fn'"):
        flash.kernel_choice(q8, kv8, kv8, kv_dtype="float8_e4m3fn")  # uint8 q is e4m3 only when the call says so
    with pytest.raises(ValueError, match="q_dtype must be None or 'float8_e4m3fn'"):
        flash.kernel_choice(q8, kv8, kv8, q_dtype="float8_e5m2", kv_dtype="float8_e4m3fn")
    with pytest.raises(ValueError, match="needs q of dtype float8_e4m3fn or uint8"):
        flash.kernel_choice(q16, kv8, kv8, **e4m3)
    with pytest.raises(ValueError, match="q_descale needs an e4m3 q"):
        flash.kernel_choice(q16, kv8, kv8, kv_dtype="float8_e4m3fn", q_descale=descale)
    with pytest.raises(ValueError, match="out_dtype is for an e4m3 q"):
        flash.kernel_choice(q16, k16, k16, out_dtype="float16")
    with pytest.raises(ValueError, match="out_dtype must be None, 'bfloat16' or 'float16'"):
        flash.kernel_choice(q8, kv8, kv8, out_dtype="float32", **e4m3)
    with pytest.raises(ValueError, match="needs k and v in e4m3 too"):
        flash.kernel_choice(q8, k16, k16, q_dtype="float8_e4m3fn")
    with pytest.raises(ValueError, match="CUDA tensor"):
        flash.kernel_choice(q8, kv8, kv8, q_descale=descale, **e4m3)  # accepted; then the device check


_capsules_alive = []  # the capsules below have no deleter: their memory stays referenced here


def _dl_capsule(data, device_type, device_id, shape, strides, code, bits, keep):
    """A DLPack capsule (a DLTensor, no deleter) over `data`; `keep` lives as long as the tests."""
    import ctypes

    class DLTensor(ctypes.Structure):
        _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                    ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                    ("lanes", ctypes.c_uint16), ("shape", ctypes.POINTER(ctypes.c_int64)),
                    ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64),
                    ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]

    dims = (ctypes.c_int64 * len(shape))(*shape)
    steps = None if strides is None else (ctypes.c_int64 * len(shape))(*strides)
    t = DLTensor(data, device_type, device_id, len(shape), code, bits, 1, dims, steps)
    new = ctypes.pythonapi.PyCapsule_New
    new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    capsule = new(ctypes.addressof(t), b"dltensor", None)
    _capsules_alive.append((keep, dims, steps, t))
    return capsule


def dlpack_capsule(array, code):
    """A DLPack capsule of a NumPy array's bytes with another dtype code (kDLFloat8_e4m3fn is 10)."""
    return _dl_capsule(array.ctypes.data, 1, 0, array.shape, None, code, 8 * array.itemsize, array)  # kDLCPU


def test_dlpack_float8_e4m3fn_is_an_fp8_cache():
    q = np.zeros((1, 1, 8, 128), np.float16)
    kv = np.zeros((1, 64, 2, 128), np.uint8)
    descale = np.ones(2, np.float32)
    with pytest.raises(ValueError, match="q must be a CUDA tensor"):  # accepted, with a descale; then the device check
        flash.kernel_choice(q, dlpack_capsule(kv, 10), dlpack_capsule(kv, 10), k_descale=descale)
    with pytest.raises(ValueError, match="both be float8_e4m3fn"):
        flash.kernel_choice(q, dlpack_capsule(kv, 10), np.zeros((1, 64, 2, 128), np.float16))
    with pytest.raises(ValueError, match="float16 or bfloat16"):  # e5m2 (code 12) is not e4m3
        flash.kernel_choice(q, dlpack_capsule(kv, 12), dlpack_capsule(kv, 12))


def fake_cuda(shape, strides=None, code=4, bits=16, device_id=0, data=1 << 40):
    """A DLPack capsule describing a CUDA tensor at a fake address (bfloat16 by
    default): the bindings read shapes, strides and devices, never the data."""
    return _dl_capsule(data, 2, device_id, shape, strides, code, bits, None)  # kDLCUDA


def test_mla_v_as_a_view_of_k_passes_the_checks():
    # Absorbed MLA: v = k[..., :512], one K/V head. Size-1 dimensions get
    # packed strides from each tensor's own width; v's must still be k's.
    q = fake_cuda((1, 1, 128, 576))
    k_strides = (64 * 576, 576, 576, 1)
    k = fake_cuda((1, 64, 1, 576), k_strides, data=2 << 40)
    v = fake_cuda((1, 64, 1, 512), k_strides, data=2 << 40)
    flash.validate(q, k, v, scale=0.07)


def test_a_scale_float32_rounds_to_zero_is_refused():
    # 0 is the library's "1 / sqrt(head_dim)": a tiny positive scale must not turn into it.
    q = fake_cuda((1, 4, 2, 64))
    with pytest.raises(ValueError, match="scale rounds to 0 in float32"):
        flash.validate(q, fake_cuda((1, 4, 2, 64), data=2 << 40), fake_cuda((1, 4, 2, 64), data=3 << 40), scale=1e-50)


def test_tensors_of_a_call_share_its_device():
    q = fake_cuda((1, 4, 2, 64))
    with pytest.raises(ValueError, match="k is on CUDA device 1; every tensor of a call must be on"):
        flash.validate(q, fake_cuda((1, 4, 2, 64), device_id=1, data=2 << 40), fake_cuda((1, 4, 2, 64), data=3 << 40))


def test_block_table_and_cu_seqlens_k_are_refused_together():
    q = fake_cuda((1, 4, 2, 64))
    with pytest.raises(ValueError, match="block_table and cu_seqlens_k do not go together"):
        flash.validate(q, fake_cuda((48, 2, 64), data=2 << 40), fake_cuda((48, 2, 64), data=3 << 40),
                       block_table=fake_cuda((1, 3), code=0, bits=32, data=4 << 40),
                       cu_seqlens_k=fake_cuda((2,), code=0, bits=32, data=5 << 40), max_seqlen_k=48)


def test_unknown_keyword_is_a_type_error():
    q = np.zeros((1, 4, 2, 64), np.float16)
    with pytest.raises(TypeError, match="caussal"):
        flash.kernel_choice(q, q, q, caussal=True)


def test_stream_argument_forms():
    q = np.zeros(1)

    class Stream:
        cuda_stream = 1234

    assert flash._stream_handle(77, q) == 77
    assert flash._stream_handle(Stream(), q) == 1234
    assert flash._stream_handle(None, q) == 0  # no framework: the legacy default stream
    with pytest.raises(ValueError, match="stream"):
        flash._stream_handle("s", q)


# ---------------------------------------------------------------- GPU


def test_merge_states_rejects_host_arrays():
    o = np.zeros((2, 1, 4, 2, 64), np.float16)
    lse = np.zeros((2, 1, 2, 4), np.float32)
    with pytest.raises(ValueError, match="CUDA tensor"):
        flash._flash.merge_states(o, lse, o[0])
    with pytest.raises(ValueError, match="pass out="):
        flash.merge_states(o, lse)  # NumPy: flash does not allocate for it


def reference(q, k, v, causal=False, scale=None, window=(-1, -1), softcap=0.0, alibi=None, acc=None):
    """Attention of [B, S, H, D] tensors in float32 (or `acc`), bottom-right masks; returns (O, LSE [B, H, Sq])."""
    acc = acc or torch.float32
    b, sq, hq, d = q.shape
    sk, hk = k.shape[1], k.shape[2]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    qf = q.to(acc).transpose(1, 2)
    kf = k.to(acc).transpose(1, 2).repeat_interleave(hq // hk, dim=1)
    vf = v.to(acc).transpose(1, 2).repeat_interleave(hq // hk, dim=1)
    s = qf @ kf.transpose(-1, -2) * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(sq, device=q.device)[:, None] + (sk - sq)
    j = torch.arange(sk, device=q.device)[None, :]
    if alibi is not None:
        s = s - alibi[None, :, None, None] * (i - j).abs().to(acc)
    left, right = window
    if causal:
        right = 0
    visible = torch.ones(sq, sk, dtype=torch.bool, device=q.device)
    if left >= 0:
        visible &= j >= i - left
    if right >= 0:
        visible &= j <= i + right
    s = s.masked_fill(~visible, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    return (p @ vf).transpose(1, 2), lse


def assert_close(out, ref, dtype):
    rel = ((out.float() - ref).norm() / ref.norm().clamp_min(1e-12)).item()
    assert rel < (1.5e-2 if dtype == torch.bfloat16 else 5e-3), rel


def rand(*shape, dtype=None):
    return torch.randn(*shape, device="cuda", dtype=dtype or torch.bfloat16)


@gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("head_dim", [64, 80, 128, 192])
@pytest.mark.parametrize("causal", [False, True])
def test_dense_gqa_matches_reference(dtype, head_dim, causal):
    dt = getattr(torch, dtype)
    q = rand(2, 300, 8, head_dim, dtype=dt)
    k = rand(2, 400, 2, head_dim, dtype=dt)
    v = rand(2, 400, 2, head_dim, dtype=dt)
    out, lse = flash.attention(q, k, v, causal=causal, return_lse=True)
    torch.cuda.synchronize()
    ref, ref_lse = reference(q, k, v, causal=causal)
    assert out.shape == q.shape and out.dtype == dt
    assert_close(out, ref, dt)
    assert torch.allclose(lse, ref_lse, atol=1e-3, rtol=1e-4)


@gpu
@pytest.mark.parametrize("head_dims", [(192, 128), (64, 128)])
@pytest.mark.parametrize("causal", [False, True])
def test_value_head_dim_of_its_own(head_dims, causal):
    # DeepSeek-V2/V3 prefill: q and k 192 wide, v and out 128; and v wider.
    d, dv = head_dims
    q, k, v = rand(2, 300, 8, d), rand(2, 400, 2, d), rand(2, 400, 2, dv)
    out, lse = flash.attention(q, k, v, causal=causal, return_lse=True)
    torch.cuda.synchronize()
    ref, ref_lse = reference(q, k, v, causal=causal)
    assert out.shape == (2, 300, 8, dv)
    assert_close(out, ref, torch.bfloat16)
    assert torch.allclose(lse, ref_lse, atol=1e-3, rtol=1e-4)
    with pytest.raises(ValueError, match="v's last dimension"):
        flash.attention(q, k, v, out=torch.empty_like(q))
    with pytest.raises(ValueError, match="k must have q's head_dim"):
        flash.attention(q, v, v)


def rotate_neox(x, cos, sin):
    """GPT-NeoX rotary of x [..., d] by cos/sin [..., d/2] (broadcast), in float32."""
    half = cos.shape[-1]
    x = x.float()
    x1, x2 = x[..., :half], x[..., half : 2 * half]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos, x[..., 2 * half :]], dim=-1)


def rotate_gptj(x, cos, sin):
    """GPT-J (interleaved) rotary: pairs (2j, 2j+1)."""
    half = cos.shape[-1]
    x = x.float()
    pairs = x[..., : 2 * half].unflatten(-1, (half, 2))
    x1, x2 = pairs[..., 0], pairs[..., 1]
    turned = torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)
    return torch.cat([turned, x[..., 2 * half :]], dim=-1)


@gpu
@pytest.mark.parametrize("interleaved", [False, True])
def test_append_with_rotary_matches_torch(interleaved):
    # Decode-and-chunk shape: 3 new tokens per sequence appended to a dense
    # cache of 64 slots holding 10 and 40 keys, rotary over 32 of 64 columns.
    b, cap, hk, hq, d, n, rd = 2, 64, 2, 8, 64, 3, 32
    old = [10, 40]
    k_cache, v_cache = rand(b, cap, hk, d), rand(b, cap, hk, d)
    k_before = k_cache.clone()
    k_new, v_new, q = rand(b, n, hk, d), rand(b, n, hk, d), rand(b, n, hq, d)
    pos = torch.arange(cap, device="cuda", dtype=torch.float32)[:, None]
    inv = 10000.0 ** (-torch.arange(rd // 2, device="cuda", dtype=torch.float32) * 2 / rd)
    cos, sin = torch.cos(pos * inv), torch.sin(pos * inv)
    used = torch.tensor(old, dtype=torch.int32, device="cuda")
    out = flash.attention(q, k_cache, v_cache, k_new=k_new, v_new=v_new, seqused_k=used, causal=True,
                          rotary_cos=cos, rotary_sin=sin, rotary_interleaved=interleaved)
    torch.cuda.synchronize()
    rotate = rotate_gptj if interleaved else rotate_neox
    for s in range(b):
        p = torch.arange(old[s], old[s] + n, device="cuda")
        k_rot = rotate(k_new[s], cos[p][:, None, :], sin[p][:, None, :])
        q_rot = rotate(q[s], cos[p][:, None, :], sin[p][:, None, :])
        # The cache holds the rotated new rows; the rows before them are untouched.
        assert torch.allclose(k_cache[s, old[s] : old[s] + n].float(), k_rot, atol=2e-2, rtol=1e-2)
        assert torch.equal(v_cache[s, old[s] : old[s] + n], v_new[s])
        assert torch.equal(k_cache[s, : old[s]], k_before[s, : old[s]])
        keys = old[s] + n
        ref, _ = reference(q_rot[None].to(torch.bfloat16), k_cache[s : s + 1, :keys], v_cache[s : s + 1, :keys],
                           causal=True)
        assert_close(out[s : s + 1], ref, torch.bfloat16)


@gpu
def test_window_softcap_and_scale():
    q, k, v = rand(1, 256, 4, 128), rand(1, 256, 4, 128), rand(1, 256, 4, 128)
    out = flash.attention(q, k, v, window=(64, 8), softcap=20.0, scale=0.1)
    ref, _ = reference(q, k, v, window=(64, 8), softcap=20.0, scale=0.1)
    assert_close(out, ref, torch.bfloat16)


@gpu
@pytest.mark.parametrize("window", [(-1, -1), (128, 0)])
def test_sinks_match_an_extra_logit_column(window):
    # gpt-oss: the sink is one more logit per head, concatenated to the
    # scaled scores before the softmax and dropped after it.
    q, k, v = rand(2, 300, 8, 64), rand(2, 500, 2, 64), rand(2, 500, 2, 64)
    sinks = torch.tensor([-math.inf, 0.5, 4.0, 7.5, -2.0, 10.0, 3.0, 6.0], device="cuda")
    out, lse = flash.attention(q, k, v, causal=True, window=window, sinks=sinks, return_lse=True)
    torch.cuda.synchronize()
    _, lse_keys = reference(q, k, v, causal=True, window=window)
    o_keys, _ = reference(q, k, v, causal=True, window=window)
    sink = sinks[None, :, None]
    ref_lse = torch.logaddexp(lse_keys, sink.expand_as(lse_keys))
    weight = torch.exp(lse_keys - ref_lse).nan_to_num(0.0).transpose(1, 2)[..., None]
    assert_close(out, o_keys * weight, torch.bfloat16)
    assert torch.allclose(lse, ref_lse, atol=1e-3, rtol=1e-4)
    plain = flash.attention(q, k, v, causal=True, window=window)
    assert ((plain.float() - out.float()).norm() / out.float().norm()).item() > 0.1
    with pytest.raises(ValueError, match="sinks"):
        flash.attention(q, k, v, sinks=sinks[:4])


@gpu
@pytest.mark.parametrize("causal", [False, True])
def test_alibi_matches_a_biased_reference(causal):
    q, k, v = rand(2, 300, 8, 128), rand(2, 500, 2, 128), rand(2, 500, 2, 128)
    slopes = torch.tensor([2.0 ** (-h) for h in range(1, 9)], device="cuda")
    out, lse = flash.attention(q, k, v, causal=causal, alibi_slopes=slopes, return_lse=True)
    torch.cuda.synchronize()
    ref, ref_lse = reference(q, k, v, causal=causal, alibi=slopes)
    assert_close(out, ref, torch.bfloat16)
    assert torch.allclose(lse, ref_lse, atol=1e-3, rtol=1e-4)
    plain = flash.attention(q, k, v, causal=causal)
    assert ((plain.float() - out.float()).norm() / out.float().norm()).item() > 0.1


@gpu
def test_strided_views_are_read_in_place():
    base = rand(2, 8, 200, 128)  # [B, H, S, D]: a BHND tensor viewed as BNHD
    q = base.transpose(1, 2)
    kv = rand(2, 200, 2, 4, 128)  # K and V interleaved in one buffer
    k, v = kv[:, :, 0], kv[:, :, 1]
    out = torch.empty(2, 8, 200, 128, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
    flash.attention(q, k, v, out=out, causal=True)
    ref, _ = reference(q, k, v, causal=True)
    assert_close(out, ref, torch.bfloat16)


@gpu
def test_varlen_matches_each_sequence():
    lens_q, lens_k = [5, 130, 64], [17, 200, 64]
    cu_q = torch.tensor([0] + list(np.cumsum(lens_q)), dtype=torch.int32, device="cuda")
    cu_k = torch.tensor([0] + list(np.cumsum(lens_k)), dtype=torch.int32, device="cuda")
    q, k, v = rand(sum(lens_q), 4, 64), rand(sum(lens_k), 2, 64), rand(sum(lens_k), 2, 64)
    out, lse = flash.attention(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max(lens_q),
                               max_seqlen_k=max(lens_k), causal=True, return_lse=True)
    assert lse.shape == (4, sum(lens_q))
    for b in range(3):
        qs, ks = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        ref, ref_lse = reference(q[None, qs], k[None, ks], v[None, ks], causal=True)
        assert_close(out[qs], ref[0], torch.bfloat16)
        assert torch.allclose(lse[:, qs], ref_lse[0], atol=1e-3, rtol=1e-4)


@gpu
@pytest.mark.parametrize("page_size", [1, 16, 64])
def test_paged_cache_matches_dense(page_size):
    b, lens, hk, d = 2, [100, 37], 2, 128
    pages_per_seq = -(-max(lens) // page_size)
    num_pages = b * pages_per_seq + 3
    k_pages, v_pages = rand(num_pages, page_size, hk, d), rand(num_pages, page_size, hk, d)
    order = torch.randperm(num_pages, device="cuda")[: b * pages_per_seq]
    table = order.view(b, pages_per_seq).to(torch.int32)
    used = torch.tensor(lens, dtype=torch.int32, device="cuda")
    q = rand(b, 1, 8, d)
    out = flash.attention(q, k_pages, v_pages, block_table=table, seqused_k=used)
    for s in range(b):
        k = k_pages[table[s].long()].reshape(-1, hk, d)[: lens[s]][None]
        v = v_pages[table[s].long()].reshape(-1, hk, d)[: lens[s]][None]
        ref, _ = reference(q[s : s + 1], k, v)
        assert_close(out[s : s + 1], ref, torch.bfloat16)


def to_e4m3(x, descale):
    """x [..., heads_kv, d] / descale (float32 [1] or [heads_kv]) rounded to float8_e4m3fn."""
    return (x / descale[:, None]).to(torch.float8_e4m3fn)


def dequantise(x8, descale):
    """What an fp8 cache stands for, exactly, in float64: descale[h] * x8."""
    return x8.to(torch.float64) * descale.to(torch.float64)[:, None]


# K/V heads of very different sizes (per K/V head h, over its last dimension),
# so that a descale read for the wrong head shows.
FP8_HEAD_SIZES = (0.5, 6.0)


@gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("seqlen_q", [1, 4])
@pytest.mark.parametrize("descales", ["none", "shared", "per_head"])
def test_fp8_cache_matches_a_float64_reference(dtype, seqlen_q, descales):
    # Decode on an fp8 (e4m3) KV cache: flash must compute attention over
    # K = k_descale[h] * k8 and V = v_descale[h] * v8, which the reference
    # takes exactly, in float64. Tolerances are the other tests': e4m3 values
    # are exact in fp16 and bf16, so only the kernel's own rounding remains.
    dt = getattr(torch, dtype)
    b, sk, hq, hk, d = 2, 300, 8, 2, 128
    size = torch.tensor(FP8_HEAD_SIZES, device="cuda")[:, None]
    k = rand(b, sk, hk, d, dtype=torch.float32) * size
    v = rand(b, sk, hk, d, dtype=torch.float32) * size.flip(0)
    if descales == "none":  # these values fit e4m3 (|x| <= 448) as they are
        k_descale = v_descale = None
        k_ds = v_ds = torch.ones(1, device="cuda")
    elif descales == "shared":  # one factor for every K/V head (descale_head_stride 0)
        k_ds, v_ds = k.abs().amax().reshape(1) / 448, v.abs().amax().reshape(1) / 448
        k_descale, v_descale = k_ds, v_ds
    else:  # one per K/V head (descale_head_stride 1)
        k_ds, v_ds = k.abs().amax(dim=(0, 1, 3)) / 448, v.abs().amax(dim=(0, 1, 3)) / 448
        k_descale, v_descale = k_ds, v_ds
    k8, v8 = to_e4m3(k, k_ds), to_e4m3(v, v_ds)
    q = rand(b, seqlen_q, hq, d, dtype=dt)
    causal = seqlen_q > 1
    out, lse = flash.attention(q, k8, v8, causal=causal, k_descale=k_descale, v_descale=v_descale, return_lse=True)
    torch.cuda.synchronize()
    ref, ref_lse = reference(q, dequantise(k8, k_ds), dequantise(v8, v_ds), causal=causal, acc=torch.float64)
    assert out.shape == q.shape and out.dtype == dt
    assert_close(out, ref, dt)
    assert torch.allclose(lse.double(), ref_lse, atol=1e-3, rtol=1e-4)
    assert flash.kernel_choice(q, k8, v8, k_descale=k_descale, v_descale=v_descale)["backend"] == "decode"
    # The same bytes as uint8 with kv_dtype: the same call, bitwise.
    out_u8 = flash.attention(q, k8.view(torch.uint8), v8.view(torch.uint8), kv_dtype="float8_e4m3fn", causal=causal,
                             k_descale=k_descale, v_descale=v_descale)
    torch.cuda.synchronize()
    assert torch.equal(out_u8, out)
    if descales != "none":  # the descales matter
        plain = flash.attention(q, k8, v8, causal=causal)
        assert ((plain.float() - out.float()).norm() / out.float().norm()).item() > 0.1


@gpu
@pytest.mark.parametrize("page_size", [1, 16, 64])
def test_paged_fp8_cache_matches_a_float64_reference(page_size):
    b, lens, hq, hk, d = 2, [300, 37], 8, 2, 128
    pages_per_seq = -(-max(lens) // page_size)
    num_pages = b * pages_per_seq + 3
    size = torch.tensor(FP8_HEAD_SIZES, device="cuda")[:, None]
    k = rand(num_pages, page_size, hk, d, dtype=torch.float32) * size
    v = rand(num_pages, page_size, hk, d, dtype=torch.float32) * size.flip(0)
    k_ds, v_ds = k.abs().amax(dim=(0, 1, 3)) / 448, v.abs().amax(dim=(0, 1, 3)) / 448
    k_pages, v_pages = to_e4m3(k, k_ds), to_e4m3(v, v_ds)
    order = torch.randperm(num_pages, device="cuda")[: b * pages_per_seq]
    table = order.view(b, pages_per_seq).to(torch.int32)
    used = torch.tensor(lens, dtype=torch.int32, device="cuda")
    q = rand(b, 1, hq, d)
    out, lse = flash.attention(q, k_pages, v_pages, block_table=table, seqused_k=used, k_descale=k_ds,
                               v_descale=v_ds, return_lse=True)
    torch.cuda.synchronize()
    k_all, v_all = dequantise(k_pages, k_ds), dequantise(v_pages, v_ds)
    for s in range(b):
        ks = k_all[table[s].long()].reshape(-1, hk, d)[: lens[s]][None]
        vs = v_all[table[s].long()].reshape(-1, hk, d)[: lens[s]][None]
        ref, ref_lse = reference(q[s : s + 1], ks, vs, acc=torch.float64)
        assert_close(out[s : s + 1], ref, torch.bfloat16)
        assert torch.allclose(lse[s : s + 1].double(), ref_lse, atol=1e-3, rtol=1e-4)


@gpu
def test_fp8_cache_as_dlpack_float8_when_the_framework_exports_it():
    # flash.attention hands PyTorch's fp8 tensors over as uint8 views; the
    # extension itself also takes DLPack's kDLFloat8_e4m3fn (other
    # frameworks, and PyTorch releases that export fp8).
    q, k, v = rand(2, 1, 8, 128), rand(2, 300, 2, 128), rand(2, 300, 2, 128)
    k8, v8 = k.to(torch.float8_e4m3fn), v.to(torch.float8_e4m3fn)
    try:
        k8.__dlpack__()
    except Exception as e:  # BufferError or RuntimeError, by release
        pytest.skip(f"this PyTorch does not export float8_e4m3fn through DLPack: {e}")
    out = torch.empty_like(q)
    flash._flash.forward(flash._flash.params(q, k8, v8, out=out, num_splits=1), torch.cuda.current_stream().cuda_stream)
    ref = flash.attention(q, k8, v8, num_splits=1)
    torch.cuda.synchronize()
    assert torch.equal(out, ref)


@gpu
def test_fp8_cache_errors():
    q, k, v = rand(1, 1, 8, 128), rand(1, 64, 2, 128), rand(1, 64, 2, 128)
    per_head = torch.ones(2, device="cuda")
    with pytest.raises(ValueError, match="k_descale / v_descale need an fp8 cache"):
        flash.attention(q, k, v, k_descale=per_head)  # a bf16 cache takes no descale
    with pytest.raises(ValueError, match="k_descale / v_descale need an fp8 cache"):
        flash.attention(q, k, v, k_descale=per_head, v_descale=per_head)
    k8, v8 = k.to(torch.float8_e4m3fn), v.to(torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="both be float8_e4m3fn"):
        flash.attention(q, k8, v)
    with pytest.raises(ValueError, match="pass kv_dtype='float8_e4m3fn'"):
        flash.attention(q, k8.view(torch.uint8), v8.view(torch.uint8))
    with pytest.raises(ValueError, match="k_descale must be a contiguous float32"):
        flash.attention(q, k8, v8, k_descale=torch.ones(3, device="cuda"))  # neither 1 nor heads_kv
    with pytest.raises(ValueError, match="v_descale must be a contiguous float32"):
        flash.attention(q, k8, v8, v_descale=per_head.double())
    with pytest.raises(ValueError, match="same length"):
        flash.attention(q, k8, v8, k_descale=torch.ones(1, device="cuda"), v_descale=per_head)
    used = torch.tensor([10], dtype=torch.int32, device="cuda")
    with pytest.raises(ValueError, match="k_new must be float16 or bfloat16"):  # new rows come unquantised
        flash.attention(q, k8, v8, k_new=rand(1, 1, 2, 128).to(torch.float8_e4m3fn),
                        v_new=rand(1, 1, 2, 128).to(torch.float8_e4m3fn), seqused_k=used)


@gpu
def test_fp8_cache_append_quantises_the_new_rows():
    # One decode step into an e4m3 cache: the new rows (bf16) are stored as
    # e4m3(x / descale) of their K/V head, and O is the plain call's on the
    # appended cache, bit for bit.
    q = rand(2, 1, 8, 128)
    k8, v8 = rand(2, 64, 2, 128).to(torch.float8_e4m3fn), rand(2, 64, 2, 128).to(torch.float8_e4m3fn)
    kd = torch.tensor([0.5, 0.25], device="cuda")
    vd = torch.tensor([0.125, 1.0], device="cuda")
    kn, vn = rand(2, 1, 2, 128), rand(2, 1, 2, 128)
    old = [10, 63]
    used = torch.tensor(old, dtype=torch.int32, device="cuda")
    out = flash.attention(q, k8, v8, k_new=kn, v_new=vn, seqused_k=used, k_descale=kd, v_descale=vd)
    torch.cuda.synchronize()
    for s in range(2):
        # Inputs within e4m3's range, so torch's (unsaturated) conversion agrees.
        expect_k = (kn[s, 0].float() / kd[:, None]).to(torch.float8_e4m3fn)
        expect_v = (vn[s, 0].float() / vd[:, None]).to(torch.float8_e4m3fn)
        assert torch.equal(k8[s, old[s]].view(torch.uint8), expect_k.view(torch.uint8))
        assert torch.equal(v8[s, old[s]].view(torch.uint8), expect_v.view(torch.uint8))
    plain = flash.attention(q, k8, v8, seqused_k=used + 1, k_descale=kd, v_descale=vd)
    assert torch.equal(out, plain)


def hopper():
    return HAS_CUDA and torch.cuda.get_device_capability()[0] == 9


@gpu
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_fp8_prefill_matches_a_float64_reference(head_dim, causal):
    # Q, K and V in e4m3 with per-K/V-head descales, on the Hopper kernel's
    # e4m3 tensor cores; the reference takes the dequantised inputs exactly,
    # in float64. P is rounded to e4m3 in the kernel, so O is held to a
    # relative RMS error per K/V head (the README states 0.09-0.9% on the
    # C++ tests' inputs) and the LSE to 2^-9 of each row's largest scaled
    # sum of |q_t k_t| (the e4m3 accumulator truncates near 2^-11 of it).
    if not hopper():
        pytest.skip("the FP8 prefill runs on Hopper (sm_90) only")
    b, s, hq, hk = 2, 300, 8, 2
    g = hq // hk
    size = torch.tensor(FP8_HEAD_SIZES, device="cuda")[:, None]
    q = rand(b, s, hq, head_dim, dtype=torch.float32)
    k = rand(b, s, hk, head_dim, dtype=torch.float32) * size
    v = rand(b, s, hk, head_dim, dtype=torch.float32) * size.flip(0)
    q_ds = q.abs().amax(dim=(0, 1, 3)).view(hk, g).amax(1) / 448  # indexed by the K/V head
    k_ds, v_ds = k.abs().amax(dim=(0, 1, 3)) / 448, v.abs().amax(dim=(0, 1, 3)) / 448
    q_each = q_ds.repeat_interleave(g)  # the same factor for each query head of a K/V head
    q8, k8, v8 = to_e4m3(q, q_each), to_e4m3(k, k_ds), to_e4m3(v, v_ds)
    out, lse = flash.attention(q8, k8, v8, causal=causal, q_descale=q_ds, k_descale=k_ds, v_descale=v_ds,
                               return_lse=True)
    torch.cuda.synchronize()
    qd, kd, vd = dequantise(q8, q_each), dequantise(k8, k_ds), dequantise(v8, v_ds)
    ref, ref_lse = reference(qd, kd, vd, causal=causal, acc=torch.float64)
    assert out.shape == q.shape and out.dtype == torch.bfloat16
    for h in range(hk):
        err = (out[:, :, h * g : (h + 1) * g].double() - ref[:, :, h * g : (h + 1) * g]).pow(2).mean().sqrt()
        assert (err / vd[:, :, h].pow(2).mean().sqrt()).item() < 0.02, h
    scale = 1.0 / math.sqrt(head_dim)
    qk = (qd.abs().transpose(1, 2) @ kd.abs().transpose(1, 2).repeat_interleave(g, dim=1).transpose(-1, -2)) * scale
    assert ((lse.double() - ref_lse).abs() <= qk.amax(-1) * 2**-9 + 1e-6).all()
    choice = flash.kernel_choice(q8, k8, v8, causal=causal, q_descale=q_ds, k_descale=k_ds, v_descale=v_ds)
    assert choice["backend"] == "sm90" and "fp8" in choice["name"], choice
    # The same bytes as uint8 with q_dtype and kv_dtype: the same call, bitwise.
    out_u8 = flash.attention(q8.view(torch.uint8), k8.view(torch.uint8), v8.view(torch.uint8), causal=causal,
                             q_dtype="float8_e4m3fn", kv_dtype="float8_e4m3fn", q_descale=q_ds, k_descale=k_ds,
                             v_descale=v_ds)
    # float16 O, asked for by name and by passing out.
    out16 = flash.attention(q8, k8, v8, causal=causal, q_descale=q_ds, k_descale=k_ds, v_descale=v_ds,
                            out_dtype="float16")
    given = torch.empty(q.shape, dtype=torch.float16, device="cuda")
    flash.attention(q8, k8, v8, out=given, causal=causal, q_descale=q_ds, k_descale=k_ds, v_descale=v_ds)
    torch.cuda.synchronize()
    assert torch.equal(out_u8, out)
    assert out16.dtype == torch.float16 and torch.equal(given, out16)
    assert ((out16.double() - out.double()).norm() / out.double().norm()).item() < 1e-2


@gpu
def test_fp8_prefill_errors():
    if not hopper():
        pytest.skip("the FP8 prefill runs on Hopper (sm_90) only")
    q8 = rand(1, 64, 8, 128).to(torch.float8_e4m3fn)
    k, v = rand(1, 64, 2, 128), rand(1, 64, 2, 128)
    k8, v8 = k.to(torch.float8_e4m3fn), v.to(torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="needs k and v in e4m3 too"):
        flash.attention(q8, k, v)  # an e4m3 q with a bf16 cache
    with pytest.raises(ValueError, match="same length"):
        flash.attention(q8, k8, v8, q_descale=torch.ones(1, device="cuda"), k_descale=torch.ones(2, device="cuda"))
    with pytest.raises(ValueError, match="q_descale must be a contiguous float32"):
        flash.attention(q8, k8, v8, q_descale=torch.ones(3, device="cuda"))
    with pytest.raises(ValueError, match="out_dtype does not match"):
        flash.attention(q8, k8, v8, out=torch.empty(1, 64, 8, 128, dtype=torch.bfloat16, device="cuda"),
                        out_dtype="float16")


@gpu
def test_long_keys_get_a_workspace_and_split():
    q, k, v = rand(1, 64, 8, 128), rand(1, 1 << 19, 2, 128), rand(1, 1 << 19, 2, 128)
    need = flash.workspace_size(q, k, v)  # 2^19 keys: two accumulations of 2^18
    assert need > 0
    workspace = torch.empty(need, dtype=torch.uint8, device="cuda")
    given = flash.kernel_choice(q, k, v, workspace=workspace)["name"]
    assert "splits" in given
    # Without workspace=, kernel_choice allocates the one attention() would: the same kernel.
    assert flash.kernel_choice(q, k, v)["name"] == given
    out = flash.attention(q, k, v)  # allocates the workspace itself
    ref, _ = reference(q, k, v)
    assert_close(out, ref, torch.bfloat16)


@gpu
def test_errors_carry_the_library_message():
    q, k = rand(1, 16, 4, 128), rand(1, 16, 3, 128)
    with pytest.raises(ValueError, match="heads"):
        flash.attention(q, k, k)
    with pytest.raises(ValueError, match="float16 or bfloat16"):
        flash.attention(q.float(), q.float(), q.float())
    with pytest.raises(ValueError):
        flash.attention(q, q, q, window=(-5, 0))
    with pytest.raises(ValueError, match="backend"):
        flash.attention(q, q, q, backend="tpu")


@gpu
@pytest.mark.parametrize("explicit", [False, True])
def test_runs_on_the_callers_stream(explicit):
    # The side stream first sleeps, then writes new queries: a call that
    # ran on any other stream would read the old ones.
    q, k, v = rand(1, 512, 4, 128), rand(1, 512, 4, 128), rand(1, 512, 4, 128)
    new_q = rand(1, 512, 4, 128)
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        assert flash._stream_handle(None, q) == side.cuda_stream
        torch.cuda._sleep(50_000_000)
        q.copy_(new_q)
        if not explicit:
            out = flash.attention(q, k, v)
    if explicit:
        out = flash.attention(q, k, v, stream=side)  # from the default stream, onto the side one
    torch.cuda.current_stream().wait_stream(side)
    ref, _ = reference(new_q, k, v)
    assert_close(out, ref, torch.bfloat16)


@gpu
def test_cuda_graph_capture_and_replay():
    q, k, v = rand(2, 256, 8, 64), rand(2, 256, 2, 64), rand(2, 256, 2, 64)
    out = torch.empty_like(q)
    flash.attention(q, k, v, out=out, causal=True)  # warm-up outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        flash.attention(q, k, v, out=out, causal=True)
    for _ in range(2):
        q.copy_(rand(*q.shape))
        graph.replay()
        torch.cuda.synchronize()
        ref, _ = reference(q, k, v, causal=True)
        assert_close(out, ref, torch.bfloat16)


@gpu
def test_cupy_arrays_when_cupy_is_there():
    cupy = pytest.importorskip("cupy")
    q = cupy.random.standard_normal((1, 128, 4, 64), dtype=cupy.float32).astype(cupy.float16)
    out = flash.attention(q, q, q)
    assert isinstance(out, cupy.ndarray) and out.shape == q.shape
    cupy.cuda.get_current_stream().synchronize()
    tq = torch.from_dlpack(q)
    ref, _ = reference(tq, tq, tq)
    assert_close(torch.from_dlpack(out), ref, torch.float16)


@gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_merge_states_of_key_slices_matches_one_call(dtype):
    dt = getattr(torch, dtype)
    q = rand(2, 100, 8, 128, dtype=dt)
    k = rand(2, 900, 2, 128, dtype=dt)
    v = rand(2, 900, 2, 128, dtype=dt)
    full, full_lse = flash.attention(q, k, v, return_lse=True)
    cuts = [0, 200, 650, 900]
    parts = [flash.attention(q, k[:, a:b], v[:, a:b], return_lse=True) for a, b in zip(cuts, cuts[1:])]
    o_states = torch.stack([o for o, _ in parts])
    lse_states = torch.stack([lse for _, lse in parts])
    out, lse = flash.merge_states(o_states, lse_states, return_lse=True)
    torch.cuda.synchronize()
    assert out.shape == q.shape and out.dtype == dt and lse.shape == full_lse.shape
    assert_close(out, full.float(), dt)
    assert torch.allclose(lse, full_lse, atol=1e-3, rtol=1e-4)
    # In place into state 2: the same result, bitwise.
    flash.merge_states(o_states, lse_states, out=o_states[2], lse=lse_states[2])
    torch.cuda.synchronize()
    assert torch.equal(o_states[2], out) and torch.equal(lse_states[2], lse)


@gpu
def test_merge_states_empty_rows_and_errors():
    o_states = rand(3, 1, 4, 2, 64)
    lse_states = torch.full((3, 1, 2, 4), float("-inf"), device="cuda")
    out, lse = flash.merge_states(o_states, lse_states, return_lse=True)
    torch.cuda.synchronize()
    assert torch.count_nonzero(out) == 0 and torch.isneginf(lse).all()
    with pytest.raises(ValueError, match="lse_states"):
        flash.merge_states(o_states, lse_states[:, :, :1])
    with pytest.raises(ValueError, match="overlap"):
        bad_out = o_states[0].as_strided((1, 4, 2, 64), (512, 128, 32, 1))  # heads 32 apart, 64 wide
        flash.merge_states(o_states, lse_states, out=bad_out)
