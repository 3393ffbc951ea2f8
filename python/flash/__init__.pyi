# Type stubs of the flash package (python/flash/__init__.py).
from typing import Any, Optional, Tuple, Union

__version__: str

def attention(
    q: Any,
    k: Any,
    v: Any,
    *,
    out: Any = ...,
    lse: Any = ...,
    return_lse: bool = ...,
    workspace: Any = ...,
    stream: Any = ...,
    causal: bool = ...,
    scale: Optional[float] = ...,
    window: Tuple[int, int] = ...,
    window_left: int = ...,
    window_right: int = ...,
    softcap: float = ...,
    sinks: Any = ...,
    alibi_slopes: Any = ...,
    cu_seqlens_q: Any = ...,
    cu_seqlens_k: Any = ...,
    max_seqlen_q: int = ...,
    max_seqlen_k: int = ...,
    seqused_k: Any = ...,
    block_table: Any = ...,
    num_splits: int = ...,
    backend: str = ...,
    autotune: bool = ...,
    k_new: Any = ...,
    v_new: Any = ...,
    cu_seqlens_k_new: Any = ...,
    rotary_cos: Any = ...,
    rotary_sin: Any = ...,
    rotary_interleaved: bool = ...,
    kv_dtype: Optional[str] = ...,
    k_descale: Any = ...,
    v_descale: Any = ...,
    q_dtype: Optional[str] = ...,
    q_descale: Any = ...,
    out_dtype: Optional[str] = ...,
) -> Union[Any, Tuple[Any, Any]]: ...
def workspace_size(q: Any, k: Any, v: Any, **kwargs: Any) -> int: ...
def kernel_choice(q: Any, k: Any, v: Any, **kwargs: Any) -> dict: ...
def validate(q: Any, k: Any, v: Any, *, out: Any = ..., lse: Any = ..., **kwargs: Any) -> None: ...
def merge_states(
    o_states: Any,
    lse_states: Any,
    *,
    out: Any = ...,
    lse: Any = ...,
    return_lse: bool = ...,
    stream: Any = ...,
) -> Union[Any, Tuple[Any, Any]]: ...
