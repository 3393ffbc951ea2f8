"""pytest suite of the flash Python package.

Host tests run everywhere (CI has no GPU): import, version, argument checks
that need no device (NumPy arrays are DLPack tensors on the CPU). GPU tests
need a CUDA device and PyTorch (CuPy for its own test) and are skipped
without them: flash against a float32 PyTorch reference for dense, GQA,
causal, windowed, softcapped, strided, varlen and paged calls, the LSE,
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


def reference(q, k, v, causal=False, scale=None, window=(-1, -1), softcap=0.0, alibi=None):
    """float32 attention of [B, S, H, D] tensors, bottom-right masks; returns (O, LSE [B, H, Sq])."""
    b, sq, hq, d = q.shape
    sk, hk = k.shape[1], k.shape[2]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    qf = q.float().transpose(1, 2)
    kf = k.float().transpose(1, 2).repeat_interleave(hq // hk, dim=1)
    vf = v.float().transpose(1, 2).repeat_interleave(hq // hk, dim=1)
    s = qf @ kf.transpose(-1, -2) * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(sq, device=q.device)[:, None] + (sk - sq)
    j = torch.arange(sk, device=q.device)[None, :]
    if alibi is not None:
        s = s - alibi[None, :, None, None] * (i - j).abs().float()
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


@gpu
def test_long_keys_get_a_workspace_and_split():
    q, k, v = rand(1, 64, 8, 128), rand(1, 1 << 19, 2, 128), rand(1, 1 << 19, 2, 128)
    need = flash.workspace_size(q, k, v)  # 2^19 keys: two accumulations of 2^18
    assert need > 0
    assert "splits" not in flash.kernel_choice(q, k, v)["name"]  # no workspace, no split
    workspace = torch.empty(need, dtype=torch.uint8, device="cuda")
    assert "splits" in flash.kernel_choice(q, k, v, workspace=workspace)["name"]
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
