"""Loads the compiled op (torch.ops.tessera.*) and wraps it in a keyword-only Python function."""
import glob
import os

import torch

_HERE = os.path.dirname(os.path.abspath(__file__))


def _load():
    libs = sorted(glob.glob(os.path.join(_HERE, "_C*.so")))
    if not libs:
        raise ImportError(f"tessera: the compiled op (_C*.so) is missing in {_HERE}; "
                          "install the package with `pip install --no-build-isolation .` from the repository")
    torch.ops.load_library(libs[0])
    return libs[0]


library_path = _load()

from . import _fake  # noqa: E402,F401  (fake kernels for torch.compile, after the op exists)


def _pair(x, name, default):
    if x is None:
        return default, default
    if isinstance(x, (tuple, list)):
        if len(x) != 2:
            raise TypeError(f"tessera.attention: {name} must be one value or a pair (q, k), got {len(x)} values")
        return x[0], x[1]
    return x, x


def _additive(mask, q):
    """SDPA's boolean masks (True = attend) as an additive 0 / -inf term."""
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        return mask
    dtype = q.dtype if isinstance(q, torch.Tensor) and q.dtype in (torch.float32, torch.float16, torch.bfloat16) \
        else torch.float32
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, float("-inf"))


def attention(q, k, v, *, bias=None, mask=None, causal=False, window=(-1, -1), alibi_slopes=None,
              cu_seqlens=None, max_seqlen=None, dropout_p=0.0, seed=None, scale=None, return_lse=False,
              deterministic=False):
    """Exact softmax(q kᵀ · scale + bias + mask + ALiBi) v, fused and tiled (O(N) memory), with autograd.

    Args:
        q: ``[B, Nq, Hq, D]`` (float32, float16 or bfloat16; CPU or CUDA), or ``[total_q, Hq, D]`` with
            ``cu_seqlens``. Any strides with a contiguous last dimension.
        k: ``[B, Nk, Hkv, D]``; ``Hq`` must be a multiple of ``Hkv`` (MQA / GQA).
        v: ``[B, Nk, Hkv, Dv]``.
        bias, mask: additive terms broadcast to ``[B, Hq, Nq, Nk]`` from ``[Nq|1, Nk]``,
            ``[Hq|1, Nq|1, Nk]`` or ``[b, Hq|1, Nq|1, Nk]`` where ``b`` divides ``B`` (batch ``i`` reads
            slice ``i % b``: Swin's window mask ``[nW, 1, N, N]`` over ``B = images * nW`` windows). They
            receive gradients when they require grad (reduced over the broadcast). A boolean ``mask``
            means True = attend, as in ``F.scaled_dot_product_attention``.
        causal: query ``i`` sees keys ``j <= i + Nk - Nq`` (bottom-right aligned, as FlashAttention).
        window: ``(left, right)``: key ``j`` is visible to query ``i`` when
            ``i + Nk - Nq - left <= j <= i + Nk - Nq + right``; ``-1`` is unbounded.
        alibi_slopes: float32 ``[Hq]`` or ``[B, Hq]``: adds ``-slope * |i + Nk - Nq - j|``.
        cu_seqlens: int32 offsets ``[B + 1]`` of packed sequences (one tensor for q and k, or a pair
            ``(cu_q, cu_k)``); q, k, v are then ``[total, H, D]``.
        max_seqlen: longest sequence (int or pair); default: read from ``cu_seqlens``.
        dropout_p: dropout on the attention weights (Philox counter RNG: the same mask on CPU and CUDA).
        seed: non-zero dropout seed; default: drawn from torch's generator (honours ``torch.manual_seed``).
        scale: softmax scale, default ``1 / sqrt(D)``.
        return_lse: also return the float32 log-sum-exp ``[B, Hq, Nq]`` (varlen ``[Hq, total_q]``).
        deterministic: bitwise-repeatable backward (CUDA; slower).

    Returns:
        ``out`` ``[B, Nq, Hq, Dv]`` (varlen ``[total_q, Hq, Dv]``) in q's dtype, or ``(out, lse)``.
        A query row with no visible key returns zeros and ``lse = -inf``. A NaN in the inputs gives
        NaN in every output row that reads it, as ``F.scaled_dot_product_attention``.

    Raises:
        ValueError naming the argument for any inconsistent shape, dtype, device or option.
    """
    if not isinstance(causal, bool) or not isinstance(deterministic, bool) or not isinstance(return_lse, bool):
        raise TypeError("tessera.attention: causal, deterministic and return_lse must be bool")
    if not isinstance(window, (tuple, list)) or len(window) != 2 or \
            not all(isinstance(w, int) and not isinstance(w, bool) for w in window):
        raise TypeError(f"tessera.attention: window must be a pair of ints (left, right), got {window!r}")
    if seed is not None and int(seed) == 0:
        raise ValueError("tessera.attention: seed must be non-zero (None draws one from torch's generator)")
    cu_q, cu_k = _pair(cu_seqlens, "cu_seqlens", None)
    max_q, max_k = _pair(max_seqlen, "max_seqlen", -1)
    out, lse = torch.ops.tessera.attention(
        q, k, v, bias=bias, mask=_additive(mask, q), alibi_slopes=alibi_slopes, cu_seqlens_q=cu_q,
        cu_seqlens_k=cu_k, max_seqlen_q=max_q, max_seqlen_k=max_k, scale=scale, causal=causal,
        window_left=window[0], window_right=window[1], dropout_p=float(dropout_p),
        seed=0 if seed is None else int(seed), offset=0, deterministic=deterministic)
    return (out, lse) if return_lse else out
