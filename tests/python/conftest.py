"""Shared fixtures, tolerances and the float64 reference of the tessera Python tests.

The device comes from `--device cuda` or $TESSERA_TEST_DEVICE (default cpu); CUDA
runs skip cleanly on a machine without a GPU. Every result of the op is compared
with `reference_attention`, plain torch ops in float64 on the CPU, so that the
reference shares no code with the library it checks.

Worker subprocesses (test_fuzz, test_invalid) import this module directly, so it
must stay importable without pytest having configured anything.
"""
import math
import os
import re

import pytest
import torch

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
NEG_INF = float("-inf")


# ----------------------------------------------------------------------------- options


def pytest_addoption(parser):
    parser.addoption("--device", default=None,
                     help="device the tessera tests run on: cpu or cuda (default: $TESSERA_TEST_DEVICE or cpu)")


def device_name(config=None):
    """The device selected for this run, as a string ('cpu', 'cuda', 'cuda:1')."""
    name = config.getoption("--device") if config is not None else None
    return name or os.environ.get("TESSERA_TEST_DEVICE") or "cpu"


def dtypes_for(device):
    """The dtypes the accuracy tests run in on `device`: CPU float32 only (bf16/fp16 are covered by the fuzz),
    CUDA float32 (exact SIMT kernels) and the two tensor-core dtypes."""
    if torch.device(device).type == "cuda":
        return [torch.float32, torch.bfloat16, torch.float16]
    return [torch.float32]


def pytest_generate_tests(metafunc):
    # A test asking for `dtype` runs once per dtype of the selected device.
    if "dtype" in metafunc.fixturenames:
        dts = dtypes_for(device_name(metafunc.config))
        metafunc.parametrize("dtype", dts, ids=[str(d).replace("torch.", "") for d in dts])


@pytest.fixture(scope="session")
def device(pytestconfig):
    name = device_name(pytestconfig)
    if torch.device(name).type == "cuda" and not torch.cuda.is_available():
        pytest.skip("CUDA tests requested but torch.cuda.is_available() is False")
    return torch.device(name)


@pytest.fixture(scope="module")
def poison_memory():
    """torch >= 2.1 fills every torch.empty / at::empty with NaN in deterministic mode: an output element
    the op forgets to write then shows up as NaN instead of passing by luck. Module-scoped and undone
    afterwards, so that other test modules (test_models.py) run in torch's default mode. Test modules
    use it through `pytestmark = pytest.mark.usefixtures("poison_memory")`."""
    saved = poison_uninitialized_memory()
    yield
    if saved is not None:
        enabled, warn_only, fill = saved
        torch.use_deterministic_algorithms(enabled, warn_only=warn_only)
        torch.utils.deterministic.fill_uninitialized_memory = fill


def poison_uninitialized_memory():
    """Turns the NaN fill on where torch has it; returns the previous settings (None on older torch)."""
    det = getattr(torch.utils, "deterministic", None)
    if det is None or not hasattr(det, "fill_uninitialized_memory"):
        return None
    saved = (torch.are_deterministic_algorithms_enabled(),
             torch.is_deterministic_algorithms_warn_only_enabled(), det.fill_uninitialized_memory)
    torch.use_deterministic_algorithms(True, warn_only=True)
    det.fill_uninitialized_memory = True
    return saved


# ----------------------------------------------------------------------------- tolerances


def fwd_tol(dtype, device="cpu"):
    """Relative (norm-wise) tolerance of out and lse against the float64 reference."""
    if dtype == torch.float32:
        return 1e-4 if torch.device(device).type == "cpu" else 5e-4
    return 2e-2


def grad_tol(dtype, device="cpu"):
    cpu = torch.device(device).type == "cpu"
    if dtype == torch.float32:
        return 1e-4 if cpu else 5e-4
    # the CPU path computes in fp32 between bf16 / fp16 loads and stores; the tensor-core kernels round
    # P and dS to 16 bits before their matmuls, and dS = P * (dP - D) cancels
    return 3e-2 if cpu else 5e-2


def rel_err(actual, expected):
    """||a - e|| / ||e|| over the elements where the reference is finite (0 when there are none)."""
    a = actual.detach().to("cpu", torch.float64)
    e = expected.detach().to("cpu", torch.float64)
    keep = torch.isfinite(e)
    a, e = a[keep], e[keep]
    if e.numel() == 0:
        return 0.0
    return ((a - e).norm() / e.norm().clamp_min(1e-12)).item() if e.norm() > 1e-12 else (a - e).norm().item()


def check_close(name, actual, expected, tol):
    """Same shape, non-finite values exactly where the reference has them (NaN where NaN, -inf where -inf),
    finite elsewhere, and a norm-wise relative error under `tol`. Returns an error string or None."""
    if tuple(actual.shape) != tuple(expected.shape):
        return f"{name}: shape {tuple(actual.shape)}, expected {tuple(expected.shape)}"
    a = actual.detach().to("cpu", torch.float64)
    e = expected.detach().to("cpu", torch.float64)
    for what, fa, fe in (("NaN", torch.isnan(a), torch.isnan(e)),
                         ("-inf", a == NEG_INF, e == NEG_INF),
                         ("+inf", a == float("inf"), e == float("inf"))):
        if not torch.equal(fa, fe):
            bad = (fa != fe).nonzero()
            return (f"{name}: {what} at {int((fa & ~fe).sum())} unexpected and {int((fe & ~fa).sum())} missing "
                    f"places, first index {bad[0].tolist()} (actual {a[tuple(bad[0])].item()}, "
                    f"expected {e[tuple(bad[0])].item()})")
    err = rel_err(a, e)
    if not err <= tol:  # `not <=` so that a NaN error fails too
        diff = (a - e).abs().nan_to_num(0.0)
        worst = (diff == diff.max()).nonzero()[0]
        return (f"{name}: relative error {err:.3g} > {tol:g} (worst at {worst.tolist()}: actual "
                f"{a[tuple(worst)].item():.6g}, expected {e[tuple(worst)].item():.6g})")
    return None


def assert_close(name, actual, expected, tol):
    msg = check_close(name, actual, expected, tol)
    assert msg is None, msg


# ----------------------------------------------------------------------------- error messages


def names_argument(message, keywords):
    """True when the exception message names one of `keywords` (short names such as 'q' or 'k' must
    appear as words, longer ones anywhere, case-insensitively)."""
    for kw in keywords:
        if len(kw) <= 2:
            if re.search(r"(?<![A-Za-z0-9_])" + re.escape(kw) + r"(?![A-Za-z0-9_])", message):
                return True
        elif kw.lower() in message.lower():
            return True
    return False


ALLOWED_ERRORS = (ValueError, TypeError, RuntimeError)


# ----------------------------------------------------------------------------- the reference


def _as_float64_term(t):
    """A bias / mask as float64 (a boolean mask: True = attend -> 0, False -> -inf). Keeps autograd history."""
    if t is None:
        return None
    if t.dtype == torch.bool:
        return torch.zeros(t.shape, dtype=torch.float64).masked_fill(~t.cpu(), NEG_INF)
    return t.to("cpu", torch.float64)


def _to4(t):
    while t.dim() < 4:
        t = t.unsqueeze(0)
    return t


def visible_keys(nq, nk, causal, window):
    """[nq, nk] bool: key j visible to query i (bottom-right aligned, as FlashAttention)."""
    i = torch.arange(nq).view(-1, 1) + (nk - nq)
    j = torch.arange(nk).view(1, -1)
    vis = torch.ones(nq, nk, dtype=torch.bool)
    left, right = window
    if causal:
        vis &= j <= i
    if left >= 0:
        vis &= j >= i - left
    if right >= 0:
        vis &= j <= i + right
    return vis


def _dense_reference(q, k, v, terms, causal, window, slopes, scale):
    """q [B, Nq, Hq, D], k [B, Nk, Hkv, D], v [B, Nk, Hkv, Dv] (float64); terms: 4-D [b, Hq|1, Nq|1, Nk]
    float64 (batch index i reads slice i % b); slopes [Hq] or [B, Hq] or None. Returns out [B, Nq, Hq, Dv],
    lse [B, Hq, Nq]."""
    B, nq, hq, d = q.shape
    nk, hkv = k.shape[1], k.shape[2]
    group = hq // hkv
    qh = q.permute(0, 2, 1, 3)
    kh = k.permute(0, 2, 1, 3).repeat_interleave(group, dim=1)
    vh = v.permute(0, 2, 1, 3).repeat_interleave(group, dim=1)
    s = torch.matmul(qh, kh.transpose(-1, -2)) * scale
    for t in terms:
        t = _to4(t)
        s = s + t[torch.arange(B) % t.shape[0]]
    if slopes is not None:
        sl = slopes.to("cpu", torch.float64)
        sl = sl.view(1, hq, 1, 1) if sl.dim() == 1 else sl.view(B, hq, 1, 1)
        dist = (torch.arange(nq).view(-1, 1) + (nk - nq) - torch.arange(nk).view(1, -1)).abs().to(torch.float64)
        s = s - sl * dist
    s = s.masked_fill(~visible_keys(nq, nk, causal, window), NEG_INF)
    # A row with no visible key (every score -inf) gives out 0 and lse -inf. NaN scores are not -inf, so a
    # NaN that a row can see keeps that row NaN.
    dead = (s == NEG_INF).all(-1, keepdim=True)
    s_safe = s.masked_fill(dead, 0.0)
    lse_safe = torch.logsumexp(s_safe, -1, keepdim=True)
    p = torch.exp(s_safe - lse_safe).masked_fill(dead, 0.0)
    lse = lse_safe.masked_fill(dead, NEG_INF).squeeze(-1)
    if bool(torch.isfinite(vh).all()):
        out = torch.matmul(p, vh)
    else:
        # NaN / inf in v reach only the rows that attend to that key (0 * NaN would poison every row).
        contrib = p.unsqueeze(-1) * vh.unsqueeze(-3)
        out = contrib.masked_fill((p == 0).unsqueeze(-1), 0.0).sum(-2)
    return out.permute(0, 2, 1, 3), lse


def split_cu_seqlens(cu_seqlens):
    if isinstance(cu_seqlens, (tuple, list)):
        return cu_seqlens[0], cu_seqlens[1]
    return cu_seqlens, cu_seqlens


def reference_attention(q, k, v, bias=None, mask=None, causal=False, window=(-1, -1), alibi_slopes=None,
                        scale=None, cu_seqlens=None, max_seqlen=None):
    """float64 attention with plain torch ops, on the CPU, differentiable.

    Same arguments and layouts as tessera.attention (dense [B, N, H, D], or varlen [total, H, D] with
    cu_seqlens as one tensor or a (cu_q, cu_k) pair); returns (out, lse) in float64: out [B, Nq, Hq, Dv]
    (varlen [total_q, Hq, Dv]), lse [B, Hq, Nq] (varlen [Hq, total_q]). Inputs that are float64 CPU leaves
    requiring grad receive the reference gradients. `max_seqlen` only sizes the bias (it is the bias's
    Nq / Nk in varlen mode) and is otherwise not needed.
    """
    f64 = lambda t: t.to("cpu", torch.float64)
    q, k, v = f64(q), f64(k), f64(v)
    terms = [t for t in (_as_float64_term(bias), _as_float64_term(mask)) if t is not None]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    window = tuple(int(w) for w in window)
    if cu_seqlens is None:
        return _dense_reference(q, k, v, terms, causal, window, alibi_slopes, scale)

    cu_q, cu_k = (c.cpu().tolist() for c in split_cu_seqlens(cu_seqlens))
    hq, dv = q.shape[1], v.shape[2]
    outs, lses = [], []
    for b in range(len(cu_q) - 1):
        qs, ks, vs = (t[c[b]:c[b + 1]].unsqueeze(0) for t, c in ((q, cu_q), (k, cu_k), (v, cu_k)))
        lq, lk = qs.shape[1], ks.shape[1]
        # Bias element (b, h, i, j) with i, j positions inside the sequence; batch slice b % nb.
        seq_terms = []
        for t in terms:
            t4 = _to4(t)
            t4 = t4[b % t4.shape[0]].unsqueeze(0)
            seq_terms.append(t4[:, :, : (lq if t4.shape[2] > 1 else 1), :lk])
        sl = None
        if alibi_slopes is not None:
            sl = alibi_slopes if alibi_slopes.dim() == 1 else alibi_slopes[b:b + 1]
        o, l = _dense_reference(qs, ks, vs, seq_terms, causal, window, sl, scale)
        outs.append(o[0])
        lses.append(l[0])
    out = torch.cat(outs, 0) if outs else q.new_zeros((0, hq, dv))
    lse = torch.cat(lses, 1) if lses else q.new_zeros((hq, 0))
    return out, lse


# ----------------------------------------------------------------------------- small helpers


def leaf(t, requires_grad=True):
    """A detached copy of t that is a leaf of autograd (optionally requiring grad)."""
    return t.detach().clone().requires_grad_(requires_grad)


def f64_leaf(t):
    """t's values as a float64 CPU leaf requiring grad, for the reference's gradients."""
    return t.detach().to("cpu", torch.float64).requires_grad_(True)
