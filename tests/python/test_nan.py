"""NaN propagation and fully masked rows.

A NaN in q, k, v, a bias or a float mask must reach exactly the output rows (and lse entries) that read
it, as the float64 reference (plain torch ops) computes them, and no other: rows that cannot see a NaN key
under causal masking stay finite, other batch elements and heads stay finite. check_close compares the
NaN / -inf pattern element by element, then the finite values.

A query row with no visible key (a mask row all -inf or all False, causal with Nq > Nk, a window that
misses every key, an empty key sequence) returns exactly 0 with lse = -inf, and its gradients are 0, not NaN.
"""
import pytest
import torch

import tessera
from conftest import assert_close, check_close, fwd_tol, grad_tol, reference_attention

pytestmark = pytest.mark.usefixtures("poison_memory")

NAN = float("nan")
NEG_INF = float("-inf")


def rand_qkv(device, dtype, B=2, Nq=12, Nk=12, Hq=4, Hkv=2, D=8, Dv=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    mk = lambda *s: torch.randn(*s, generator=g).to(device, dtype)  # noqa: E731
    return mk(B, Nq, Hq, D), mk(B, Nk, Hkv, D), mk(B, Nk, Hkv, Dv)


def check_against_reference(q, k, v, **kw):
    out, lse = tessera.attention(q, k, v, return_lse=True, **kw)
    ref_out, ref_lse = reference_attention(q, k, v, **kw)
    tol = fwd_tol(q.dtype, q.device)
    problems = [check_close("out", out, ref_out, tol), check_close("lse", lse, ref_lse, tol)]
    assert not any(problems), "\n".join(p for p in problems if p)
    return out, lse, ref_out, ref_lse


# ----------------------------------------------------------------------------- NaN


@pytest.mark.parametrize("causal", [False, True], ids=["dense", "causal"])
def test_nan_in_one_query_row(device, dtype, causal):
    q, k, v = rand_qkv(device, dtype)
    q[1, 5, 2, 3] = NAN  # batch 1, row 5, head 2: only out[1, 5, 2, :] and lse[1, 2, 5]
    out, lse, ref_out, _ = check_against_reference(q, k, v, causal=causal)
    assert int(torch.isnan(out).sum()) == out.shape[-1] and bool(torch.isnan(out[1, 5, 2]).all())
    assert int(torch.isnan(lse).sum()) == 1 and bool(torch.isnan(lse[1, 2, 5]))


@pytest.mark.parametrize("causal", [False, True], ids=["dense", "causal"])
def test_nan_in_one_key_row(device, dtype, causal):
    # key 6 of kv head 1 (read by q heads 2 and 3) in batch 0; causal: rows 0..5 cannot see it, stay finite
    q, k, v = rand_qkv(device, dtype, Nq=12, Nk=12)
    k[0, 6, 1, 0] = NAN
    out, lse, _, _ = check_against_reference(q, k, v, causal=causal)
    first_nan_row = 6 if causal else 0
    assert bool(torch.isnan(out[0, first_nan_row:, 2:]).all())
    assert bool(torch.isfinite(out[0, :first_nan_row]).all()) and bool(torch.isfinite(out[0, :, :2]).all())
    assert bool(torch.isfinite(out[1]).all())


def test_nan_in_one_key_row_causal_nq_ne_nk(device, dtype):
    # bottom-right alignment: with Nq = 8, Nk = 12, query i sees keys j <= i + 4; key 9 is seen from row 5 on
    q, k, v = rand_qkv(device, dtype, Nq=8, Nk=12)
    k[1, 9, 0, 2] = NAN
    out, _, _, _ = check_against_reference(q, k, v, causal=True)
    assert bool(torch.isfinite(out[1, :5, :2]).all()) and bool(torch.isnan(out[1, 5:, :2]).all())


def test_nan_in_value(device, dtype):
    # every row sees key 3, so column 5 of every output row of q heads 0 and 1 (kv head 0) is NaN
    q, k, v = rand_qkv(device, dtype)
    v[0, 3, 0, 5] = NAN
    out, lse, _, _ = check_against_reference(q, k, v)
    assert bool(torch.isnan(out[0, :, :2, 5]).all())
    assert int(torch.isnan(out).sum()) == out.shape[1] * 2
    assert bool(torch.isfinite(lse).all()), "a NaN in v must not reach lse"


def test_nan_in_value_causal(device, dtype):
    """Rows that see the NaN value row are NaN in that column; every other column of every row is finite
    and correct. (Rows that cannot see it may be NaN or not: SDPA's math multiplies 0 by NaN there.)"""
    q, k, v = rand_qkv(device, dtype)
    v[0, 7, 1, 2] = NAN
    out, lse = tessera.attention(q, k, v, causal=True, return_lse=True)
    ref_out, ref_lse = reference_attention(q, k, v, causal=True)
    assert bool(torch.isnan(out[0, 7:, 2:, 2]).all()), "rows that read the NaN value are not NaN"
    others = torch.ones(out.shape, dtype=torch.bool)
    others[0, :, 2:, 2] = False
    assert_close("out (other columns)", out.cpu()[others], ref_out[others], fwd_tol(dtype, device))
    assert_close("lse", lse, ref_lse, fwd_tol(dtype, device))


@pytest.mark.parametrize("where", ["visible", "hidden_by_causal", "hidden_by_window"])
@pytest.mark.parametrize("term", ["bias", "mask"])
def test_nan_in_bias_or_mask(device, dtype, term, where):
    """A NaN at [head 1, row 4, key j]: row 4 of head 1 (every batch element: the term is 3-D) is NaN iff
    it sees key j."""
    q, k, v = rand_qkv(device, dtype, Nq=10, Nk=10, Hq=2, Hkv=2)
    t = torch.randn(2, 10, 10, generator=torch.Generator().manual_seed(1)).to(device, dtype)
    j, kw = {"visible": (2, dict(causal=True)), "hidden_by_causal": (8, dict(causal=True)),
             "hidden_by_window": (0, dict(window=(2, 2)))}[where]
    t[1, 4, j] = NAN
    out, _, _, _ = check_against_reference(q, k, v, **{term: t}, **kw)
    if where == "visible":
        assert bool(torch.isnan(out[:, 4, 1]).all()) and int(torch.isnan(out).sum()) == 2 * out.shape[-1]
    else:
        assert bool(torch.isfinite(out).all())


# ----------------------------------------------------------------------------- fully masked rows


def check_dead_rows(out, lse, dead, varlen=False):
    """Rows flagged in `dead` ([B, Hq, Nq], varlen [Hq, total]) are exactly 0 with lse -inf; others finite."""
    rows = dead.t() if varlen else dead.permute(0, 2, 1)  # the layout of out without its last dimension
    o = out.detach().cpu()
    assert bool((o[rows] == 0).all()), "a fully masked row is not exactly 0"
    assert bool(torch.isfinite(o[~rows]).all()), "a row with visible keys is not finite"
    l = lse.detach().cpu()
    assert bool((l[dead] == NEG_INF).all()), f"lse of a fully masked row is not -inf: {l[dead][:4].tolist()}"
    assert bool(torch.isfinite(l[~dead]).all())


def check_gradients(q, k, v, kw, dead, varlen=False):
    """Gradients finite and equal to the reference's (0 for the query rows that see nothing)."""
    q, k, v = (t.detach().requires_grad_(True) for t in (q, k, v))
    out, lse = tessera.attention(q, k, v, return_lse=True, **kw)
    g = torch.Generator().manual_seed(8)
    g_out = torch.randn(*out.shape, generator=g).to(out.device)
    loss = (out.float() * g_out).sum() + lse.masked_fill(dead.to(lse.device), 0.0).sum()
    grads = torch.autograd.grad(loss, (q, k, v))
    rq, rk, rv = (t.detach().to("cpu", torch.float64).requires_grad_(True) for t in (q, k, v))
    ref_out, ref_lse = reference_attention(rq, rk, rv, **kw)
    ref_loss = (ref_out * g_out.cpu().double()).sum() + ref_lse.masked_fill(dead, 0.0).sum()
    ref_grads = torch.autograd.grad(ref_loss, (rq, rk, rv))
    for name, a, b in zip("qkv", grads, ref_grads):
        assert bool(torch.isfinite(a).all()), f"grad {name} has non-finite values"
        assert_close(f"grad {name}", a, b, grad_tol(q.dtype, q.device))
    rows = dead.t() if varlen else dead.permute(0, 2, 1)
    assert bool((grads[0].cpu()[rows] == 0).all()), "grad q of a fully masked row is not 0"


def _dead_case(name, device, dtype):
    """(q, k, v, kwargs) of one way to mask rows fully."""
    if name == "float_mask_row_all_-inf":
        q, k, v = rand_qkv(device, dtype, Nq=9, Nk=13)
        mask = torch.zeros(2, 1, 9, 13)
        mask[0, 0, 3] = NEG_INF  # row 3 of batch 0, every head
        mask[1, 0, 8] = NEG_INF
        return q, k, v, dict(mask=mask.to(device, dtype))
    if name == "bool_mask_row_all_false":
        q, k, v = rand_qkv(device, dtype, Nq=9, Nk=13)
        mask = torch.ones(4, 9, 13, dtype=torch.bool)
        mask[2, 0] = False  # head 2, row 0, every batch element
        mask[3, 5, ::2] = False  # only partly masked: not dead
        return q, k, v, dict(mask=mask.to(device))
    if name == "bias_row_all_-inf":
        q, k, v = rand_qkv(device, dtype, Nq=9, Nk=13)
        bias = torch.randn(9, 13, generator=torch.Generator().manual_seed(3))
        bias[4] = NEG_INF
        return q, k, v, dict(bias=bias.to(device, dtype))
    if name == "causal_nq_gt_nk":
        return (*rand_qkv(device, dtype, Nq=15, Nk=6), dict(causal=True))  # rows 0..8 see no key
    if name == "window_misses_every_key":
        return (*rand_qkv(device, dtype, Nq=10, Nk=6), dict(window=(0, 0)))  # rows 0..3: i + Nk - Nq < 0
    if name == "mask_and_window":
        q, k, v = rand_qkv(device, dtype, Nq=12, Nk=12)
        mask = torch.zeros(12, 12)
        mask[6, 4:7] = NEG_INF  # row 6 sees only keys 4..8 through the window; the mask takes 4..6
        mask[6, 7:9] = NEG_INF
        return q, k, v, dict(mask=mask.to(device, dtype), window=(2, 2))
    raise KeyError(name)


DEAD_CASES = ["float_mask_row_all_-inf", "bool_mask_row_all_false", "bias_row_all_-inf", "causal_nq_gt_nk",
              "window_misses_every_key", "mask_and_window"]


@pytest.mark.parametrize("name", DEAD_CASES)
def test_fully_masked_rows_are_zero(device, dtype, name):
    q, k, v, kw = _dead_case(name, device, dtype)
    out, lse, _, ref_lse = check_against_reference(q, k, v, **kw)
    dead = ref_lse == NEG_INF
    assert bool(dead.any()), "the case masks no row fully (a bug of the test)"
    check_dead_rows(out, lse, dead)
    check_gradients(q, k, v, kw, dead)


def test_varlen_sequence_without_keys(device, dtype):
    """Sequence 1 has 4 queries and no key: its rows are 0 with lse -inf; the others are unaffected."""
    g = torch.Generator().manual_seed(6)
    cu_q = torch.tensor([0, 5, 9, 16], dtype=torch.int32, device=device)
    cu_k = torch.tensor([0, 7, 7, 10], dtype=torch.int32, device=device)
    q = torch.randn(16, 2, 8, generator=g).to(device, dtype)
    k, v = (torch.randn(10, 2, 8, generator=g).to(device, dtype) for _ in range(2))
    kw = dict(cu_seqlens=(cu_q, cu_k))
    out, lse, _, ref_lse = check_against_reference(q, k, v, **kw)
    dead = ref_lse == NEG_INF
    assert bool(dead[:, 5:9].all()) and not bool(dead[:, :5].any()) and not bool(dead[:, 9:].any())
    check_dead_rows(out, lse, dead, varlen=True)
    check_gradients(q, k, v, kw, dead, varlen=True)


def test_no_keys_at_all(device, dtype):
    """Nk = 0: no query row sees a key, so out is all 0 and lse all -inf (not an error: every row is simply
    fully masked), and the gradient of q is 0."""
    q, k, v = rand_qkv(device, dtype, Nq=5, Nk=0)
    out, lse = tessera.attention(q, k, v, return_lse=True)
    assert out.shape == (2, 5, 4, 8) and lse.shape == (2, 4, 5)
    assert bool((out == 0).all()) and bool((lse == NEG_INF).all())
    qq = q.detach().requires_grad_(True)
    (dq,) = torch.autograd.grad(tessera.attention(qq, k, v).float().sum(), (qq,))
    assert bool((dq == 0).all())


def test_no_query_rows(device, dtype):
    """Nq = 0: empty out and lse, and a backward that returns zero gradients for k and v."""
    q, k, v = rand_qkv(device, dtype, Nq=0, Nk=6)
    q, k, v = (t.detach().requires_grad_(True) for t in (q, k, v))
    out, lse = tessera.attention(q, k, v, return_lse=True)
    assert out.shape == (2, 0, 4, 8) and lse.shape == (2, 4, 0)
    dq, dk, dv = torch.autograd.grad(out.float().sum(), (q, k, v), allow_unused=True)
    for name, gr, t in (("q", dq, q), ("k", dk, k), ("v", dv, v)):
        assert gr is None or (gr.shape == t.shape and bool((gr == 0).all())), f"grad {name} not zero"


def test_varlen_no_keys_in_any_sequence(device, dtype):
    """Every key sequence empty (total_k = 0): all rows fully masked."""
    cu_q = torch.tensor([0, 3, 5], dtype=torch.int32, device=device)
    cu_k = torch.tensor([0, 0, 0], dtype=torch.int32, device=device)
    q = torch.randn(5, 2, 8).to(device, dtype)
    k, v = (torch.randn(0, 2, 8).to(device, dtype) for _ in range(2))
    out, lse = tessera.attention(q, k, v, cu_seqlens=(cu_q, cu_k), return_lse=True)
    assert bool((out == 0).all()) and bool((lse == NEG_INF).all())
