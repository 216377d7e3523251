"""Every invalid argument raises a Python exception naming the argument, and never crashes the process.

Each case runs in its own child interpreter (torch 2.11 used to SIGSEGV on some of these inputs), so a
crash fails exactly that case with its name, the signal and the child's stderr. The children of the
selected cases are started together, two at a time (up to 8 on a larger machine), before the first test
needs its result.

A case is a function of the device that makes the call; CASES maps its name to the keywords one of
which the exception message must contain (the argument's name as the library spells it).
"""
import concurrent.futures
import json
import os

import pytest
import torch

import tessera  # noqa: F401  (registers torch.ops.tessera)
from conftest import ALLOWED_ERRORS, names_argument, poison_uninitialized_memory
from subproc import run_child

OP = lambda: torch.ops.tessera.attention  # noqa: E731  (looked up lazily: the child imports tessera first)

HEAD_DIM = ["head dim", "head_dim", "headdim", "head dimension"]
DTYPE = ["dtype", "float32", "float16", "bfloat16", "float64", "double", "int32", "int64", "scalar type"]


def qkv(dev, B=2, N=8, H=2, D=16, Hkv=None, Dv=None, Nk=None, dtype=torch.float32, varlen=False):
    """Random q, k, v ([B, N, H, D], or [B*N, H, D] packed when varlen)."""
    Hkv = H if Hkv is None else Hkv
    Dv = D if Dv is None else Dv
    Nk = N if Nk is None else Nk
    g = torch.Generator().manual_seed(0)
    mk = lambda *s: torch.randn(*s, generator=g).to(dev, dtype)  # noqa: E731
    if varlen:
        return mk(B * N, H, D), mk(B * Nk, Hkv, D), mk(B * Nk, Hkv, Dv)
    return mk(B, N, H, D), mk(B, Nk, Hkv, D), mk(B, Nk, Hkv, Dv)


def cu(dev, *offsets):
    return torch.tensor(offsets, dtype=torch.int32, device=dev)


# ----------------------------------------------------------------------------- the cases
# Each returns a zero-argument callable doing the call; `api` cases go through tessera.attention,
# `op` cases through the raw torch.ops.tessera.attention, `bwd` cases through the raw backward op.

def api(**kw):
    def make(dev, qkv_kw=None):
        q, k, v = qkv(dev, **(qkv_kw or {}))
        return lambda: tessera.attention(q, k, v, **kw)
    return make


CASES = {}  # name -> (builder(dev) -> callable, keywords, device type required or None)


def case(name, keywords, cuda_only=False):
    def register(fn):
        CASES[name] = (fn, keywords, "cuda" if cuda_only else None)
        return fn
    return register


# --- bias / mask shapes ---------------------------------------------------------------------------
def _bias_case(api_or_op, arg, shape_fn, dtype=torch.float32, **qkv_kw):
    def build(dev):
        q, k, v = qkv(dev, **qkv_kw)
        B, N, H = q.shape[0], q.shape[1], q.shape[2]
        Nk = k.shape[1]
        t = torch.zeros(shape_fn(B, N, Nk, H), device=dev).to(dtype)
        if api_or_op == "api":
            return lambda: tessera.attention(q, k, v, **{arg: t})
        return lambda: OP()(q, k, v, **{arg: t})
    return build


for _via in ("api", "op"):
    # Swin's window mask [nW, N, N] given as 3-D (its first dimension is then the head dimension) and as
    # [nW, 1, N, N] over a batch that is not a multiple of nW.
    case(f"{_via}-mask-3d-nW-not-heads", ["mask"])(
        _bias_case(_via, "mask", lambda B, N, Nk, H: (4, N, Nk), B=3, H=2))
    case(f"{_via}-mask-4d-nW-not-dividing-batch", ["mask"])(
        _bias_case(_via, "mask", lambda B, N, Nk, H: (4, 1, N, Nk), B=6, H=2))
    case(f"{_via}-bias-4d-batch-not-dividing", ["bias"])(
        _bias_case(_via, "bias", lambda B, N, Nk, H: (4, H, N, Nk), B=6))
    case(f"{_via}-bias-4d-batch-larger", ["bias"])(
        _bias_case(_via, "bias", lambda B, N, Nk, H: (2 * B, H, N, Nk)))
    case(f"{_via}-bias-wrong-query-length", ["bias"])(
        _bias_case(_via, "bias", lambda B, N, Nk, H: (H, N + 1, Nk)))
    case(f"{_via}-bias-wrong-query-length-2d", ["bias"])(
        _bias_case(_via, "bias", lambda B, N, Nk, H: (N - 1, Nk)))
    case(f"{_via}-bias-wrong-key-length", ["bias"])(
        _bias_case(_via, "bias", lambda B, N, Nk, H: (H, N, Nk + 3), Nk=5))
    case(f"{_via}-bias-wrong-heads", ["bias"])(
        _bias_case(_via, "bias", lambda B, N, Nk, H: (B, H + 1, N, Nk)))
    case(f"{_via}-bias-1d", ["bias"])(_bias_case(_via, "bias", lambda B, N, Nk, H: (Nk,)))
    case(f"{_via}-bias-5d", ["bias"])(_bias_case(_via, "bias", lambda B, N, Nk, H: (1, B, H, N, Nk)))
    case(f"{_via}-bias-0d", ["bias"])(_bias_case(_via, "bias", lambda B, N, Nk, H: ()))
    case(f"{_via}-mask-wrong-key-length", ["mask"])(
        _bias_case(_via, "mask", lambda B, N, Nk, H: (N, Nk - 1)))
    case(f"{_via}-mask-int-dtype", ["mask"])(
        _bias_case(_via, "mask", lambda B, N, Nk, H: (N, Nk), dtype=torch.int32))
    case(f"{_via}-bias-int-dtype", ["bias"])(
        _bias_case(_via, "bias", lambda B, N, Nk, H: (N, Nk), dtype=torch.int64))
case("api-bool-mask-wrong-shape", ["mask"])(
    _bias_case("api", "mask", lambda B, N, Nk, H: (H + 1, N, Nk), dtype=torch.bool))


# --- q / k / v shapes and dtypes -------------------------------------------------------------------
def _qkv_case(api_or_op, make):
    def build(dev):
        q, k, v = make(dev)
        if api_or_op == "api":
            return lambda: tessera.attention(q, k, v)
        return lambda: OP()(q, k, v)
    return build


for _via in ("api", "op"):
    case(f"{_via}-k-head-dim-differs", HEAD_DIM + ["k"])(_qkv_case(_via, lambda d: (
        qkv(d, D=16)[0], qkv(d, D=8)[1], qkv(d, D=8)[2])))
    case(f"{_via}-head-dim-0", HEAD_DIM)(_qkv_case(_via, lambda d: qkv(d, D=0)))
    case(f"{_via}-head-dim-300", HEAD_DIM)(_qkv_case(_via, lambda d: qkv(d, D=300)))
    case(f"{_via}-v-head-dim-0", HEAD_DIM + ["v"])(_qkv_case(_via, lambda d: qkv(d, D=16, Dv=0)))
    case(f"{_via}-v-head-dim-300", HEAD_DIM + ["v"])(_qkv_case(_via, lambda d: qkv(d, D=16, Dv=300)))
    case(f"{_via}-hq-not-multiple-of-hkv", ["head"])(_qkv_case(_via, lambda d: qkv(d, H=3, Hkv=2)))
    case(f"{_via}-v-heads-differ-from-k", ["head", "v"])(_qkv_case(_via, lambda d: (
        qkv(d, H=4, Hkv=2)[0], qkv(d, H=4, Hkv=2)[1], qkv(d, H=4, Hkv=4)[2])))
    case(f"{_via}-k-v-length-differ", ["k", "v", "length", "sequence"])(_qkv_case(_via, lambda d: (
        qkv(d, Nk=6)[0], qkv(d, Nk=6)[1], qkv(d, Nk=7)[2])))
    case(f"{_via}-batch-differs", ["batch"])(_qkv_case(_via, lambda d: (
        qkv(d, B=2)[0], qkv(d, B=3)[1], qkv(d, B=3)[2])))
    case(f"{_via}-dtype-mismatch", DTYPE)(_qkv_case(_via, lambda d: (
        qkv(d)[0], qkv(d, dtype=torch.bfloat16)[1], qkv(d)[2])))
    case(f"{_via}-float64", DTYPE)(_qkv_case(_via, lambda d: qkv(d, dtype=torch.float64)))
    case(f"{_via}-int32", DTYPE)(_qkv_case(_via, lambda d: tuple(
        t.to(torch.int32) for t in qkv(d))))
    case(f"{_via}-int64", DTYPE)(_qkv_case(_via, lambda d: tuple(
        t.to(torch.int64) for t in qkv(d))))
    case(f"{_via}-q-3d-without-cu-seqlens", ["q", "4-D", "cu_seqlens", "varlen"])(_qkv_case(
        _via, lambda d: (qkv(d)[0][0], qkv(d)[1], qkv(d)[2])))
    case(f"{_via}-k-on-cpu", ["device", "cpu", "cuda"], cuda_only=True)(_qkv_case(_via, lambda d: (
        qkv(d)[0], qkv("cpu")[1], qkv(d)[2])))
    case(f"{_via}-v-on-cpu", ["device", "cpu", "cuda"], cuda_only=True)(_qkv_case(_via, lambda d: (
        qkv(d)[0], qkv(d)[1], qkv("cpu")[2])))


# --- options ---------------------------------------------------------------------------------------
def _opt_case(api_kw, op_kw):
    def builds():
        def b_api(dev):
            q, k, v = qkv(dev)
            kw = api_kw(dev) if callable(api_kw) else api_kw
            return lambda: tessera.attention(q, k, v, **kw)

        def b_op(dev):
            q, k, v = qkv(dev)
            kw = op_kw(dev) if callable(op_kw) else op_kw
            return lambda: OP()(q, k, v, **kw)
        return b_api, b_op
    return builds()


def _register_opt(name, keywords, api_kw, op_kw, cuda_only=False):
    b_api, b_op = _opt_case(api_kw, op_kw)
    case(f"api-{name}", keywords, cuda_only)(b_api)
    case(f"op-{name}", keywords, cuda_only)(b_op)


_register_opt("window-left-minus-5", ["window"], {"window": (-5, -1)}, {"window_left": -5})
_register_opt("window-right-minus-3", ["window"], {"window": (-1, -3)}, {"window_right": -3})
_register_opt("window-left-huge", ["window"], {"window": (2 ** 40, -1)}, {"window_left": 2 ** 40})
_register_opt("window-right-huge", ["window"], {"window": (-1, 2 ** 33)}, {"window_right": 2 ** 33})
_register_opt("dropout-1.5", ["dropout"], {"dropout_p": 1.5}, {"dropout_p": 1.5})
_register_opt("dropout-negative", ["dropout"], {"dropout_p": -0.5}, {"dropout_p": -0.5})
_register_opt("dropout-nan", ["dropout"], {"dropout_p": float("nan")}, {"dropout_p": float("nan")})
_register_opt("scale-nan", ["scale"], {"scale": float("nan")}, {"scale": float("nan")})
# qkv() has H = 2 heads and B = 2 sequences.
_register_opt("alibi-wrong-length", ["alibi"], lambda d: {"alibi_slopes": torch.ones(3, device=d)},
              lambda d: {"alibi_slopes": torch.ones(3, device=d)})
_register_opt("alibi-wrong-batch", ["alibi"], lambda d: {"alibi_slopes": torch.ones(3, 2, device=d)},
              lambda d: {"alibi_slopes": torch.ones(3, 2, device=d)})
_register_opt("alibi-3d", ["alibi"], lambda d: {"alibi_slopes": torch.ones(2, 2, 1, device=d)},
              lambda d: {"alibi_slopes": torch.ones(2, 2, 1, device=d)})
# arguments only the Python wrapper has
for _name, _kw, _args in (("window-three-values", ["window"], {"window": (1, 2, 3)}),
                          ("window-float", ["window"], {"window": (1.5, -1)}),
                          ("seed-zero-with-dropout", ["seed"], {"dropout_p": 0.1, "seed": 0})):
    case(f"api-{_name}", _kw)(api(**_args))
_register_opt("bias-on-cpu", ["bias", "device"], lambda d: {"bias": torch.zeros(8, 8)},
              lambda d: {"bias": torch.zeros(8, 8)}, cuda_only=True)
_register_opt("mask-on-cpu", ["mask", "device"], lambda d: {"mask": torch.zeros(8, 8)},
              lambda d: {"mask": torch.zeros(8, 8)}, cuda_only=True)
_register_opt("alibi-on-cpu", ["alibi", "device"], lambda d: {"alibi_slopes": torch.ones(2)},
              lambda d: {"alibi_slopes": torch.ones(2)}, cuda_only=True)


# --- varlen ----------------------------------------------------------------------------------------
# qkv(varlen=True) packs B = 2 sequences of N = 8 rows: 16 rows.
def _varlen_case(api_kw, op_kw, **qkv_kw):
    def b_api(dev):
        q, k, v = qkv(dev, varlen=True, **qkv_kw)
        return lambda: tessera.attention(q, k, v, **api_kw(dev))

    def b_op(dev):
        q, k, v = qkv(dev, varlen=True, **qkv_kw)
        return lambda: OP()(q, k, v, **op_kw(dev))
    return b_api, b_op


def _register_varlen(name, keywords, offsets, max_seqlen=None, offsets_k=None, **qkv_kw):
    offsets_k = offsets if offsets_k is None else offsets_k
    api_kw = lambda d: dict(cu_seqlens=(cu(d, *offsets), cu(d, *offsets_k)), max_seqlen=max_seqlen)  # noqa: E731

    def op_kw(d):
        kw = dict(cu_seqlens_q=cu(d, *offsets), cu_seqlens_k=cu(d, *offsets_k))
        if max_seqlen is not None:
            kw.update(max_seqlen_q=max_seqlen, max_seqlen_k=max_seqlen)
        return kw
    b_api, b_op = _varlen_case(api_kw, op_kw, **qkv_kw)
    case(f"api-{name}", keywords)(b_api)
    case(f"op-{name}", keywords)(b_op)


CU = ["cu_seqlens", "max_seqlen"]
case("api-max-seqlen-three-values", CU)(lambda dev: (lambda q, k, v: lambda: tessera.attention(
    q, k, v, cu_seqlens=cu(dev, 0, 8, 16), max_seqlen=(8, 8, 8)))(*qkv(dev, varlen=True)))
case("api-cu-seqlens-three-tensors", CU)(lambda dev: (lambda q, k, v: lambda: tessera.attention(
    q, k, v, cu_seqlens=(cu(dev, 0, 8, 16),) * 3))(*qkv(dev, varlen=True)))
_register_varlen("cu-seqlens-past-packed-length", CU, (0, 8, 20))
_register_varlen("cu-seqlens-far-past-packed-length", CU, (0, 8, 1 << 30))
_register_varlen("cu-seqlens-decreasing", CU, (0, 10, 6, 16))
_register_varlen("cu-seqlens-negative", CU, (0, -4, 16))
_register_varlen("cu-seqlens-longer-than-max-seqlen", CU, (0, 4, 16), max_seqlen=8)
_register_varlen("cu-seqlens-k-past-packed-length", CU, (0, 8, 16), offsets_k=(0, 8, 17))
_register_varlen("cu-seqlens-q-k-different-lengths", CU, (0, 8, 16), offsets_k=(0, 16))
_register_varlen("cu-seqlens-single-entry", CU, (0,), offsets_k=(0,))
_register_varlen("cu-seqlens-not-starting-at-0", CU, (2, 8, 16))


for _name, _kw, _api, _op in (
    # 4-D tensors together with cu_seqlens
    ("4d-with-cu-seqlens", ["cu_seqlens", "varlen", "3-D", "q"],
     lambda d: dict(cu_seqlens=cu(d, 0, 1, 2)),
     lambda d: dict(cu_seqlens_q=cu(d, 0, 1, 2), cu_seqlens_k=cu(d, 0, 1, 2))),
    ("cu-seqlens-2d", CU,
     lambda d: dict(cu_seqlens=cu(d, 0, 8, 16).view(1, 3)),
     lambda d: dict(cu_seqlens_q=cu(d, 0, 8, 16).view(1, 3), cu_seqlens_k=cu(d, 0, 8, 16).view(1, 3))),
    ("cu-seqlens-q-only", CU,
     None,
     lambda d: dict(cu_seqlens_q=cu(d, 0, 8, 16))),
):
    if _name == "4d-with-cu-seqlens":
        def _b_api(dev, _api=_api):
            q, k, v = qkv(dev, B=2, N=1)
            return lambda: tessera.attention(q, k, v, **_api(dev))

        def _b_op(dev, _op=_op):
            q, k, v = qkv(dev, B=2, N=1)
            return lambda: OP()(q, k, v, **_op(dev))
    else:
        _b_api, _b_op = _varlen_case(_api or (lambda d: {}), _op)
    if _api is not None:
        case(f"api-{_name}", _kw)(_b_api)
    case(f"op-{_name}", _kw)(_b_op)


# --- the raw backward op ---------------------------------------------------------------------------
def _bwd_case(change):
    """attention_bwd(dout, dlse, q, k, v, out, lse) with one of its tensors replaced by `change`."""
    def build(dev):
        q, k, v = qkv(dev, B=2, N=8, H=2, D=16)
        out, lse = OP()(q, k, v)
        args = dict(dout=torch.ones_like(out), dlse=None, q=q, k=k, v=v, out=out, lse=lse)
        args.update(change(args))
        return lambda: torch.ops.tessera.attention_bwd(args["dout"], args["dlse"], args["q"], args["k"], args["v"],
                                                       args["out"], args["lse"])
    return build


for _name, _kw, _change in (
    ("bwd-lse-short", ["lse"], lambda a: dict(lse=a["lse"][:, :, :-1].contiguous())),
    ("bwd-lse-long", ["lse"], lambda a: dict(lse=torch.zeros(2, 2, 4000, device=a["q"].device))),
    ("bwd-lse-empty", ["lse"], lambda a: dict(lse=torch.zeros(0, device=a["q"].device))),
    ("bwd-lse-transposed-shape", ["lse"], lambda a: dict(lse=a["lse"].transpose(1, 2).contiguous())),
    ("bwd-lse-float16", ["lse"], lambda a: dict(lse=a["lse"].half())),
    ("bwd-out-short", ["out"], lambda a: dict(out=a["out"][:, :-1].contiguous(),
                                              dout=torch.ones_like(a["out"][:, :-1]))),
    ("bwd-out-empty", ["out"], lambda a: dict(out=a["out"][:0].contiguous(), dout=torch.ones_like(a["out"][:0]))),
    ("bwd-out-wrong-head-dim", ["out"], lambda a: dict(out=torch.zeros(2, 8, 2, 32, device=a["q"].device),
                                                       dout=torch.zeros(2, 8, 2, 32, device=a["q"].device))),
    ("bwd-out-wrong-dtype", ["out", "dtype"], lambda a: dict(out=a["out"].to(torch.bfloat16),
                                                             dout=torch.ones_like(a["out"]).to(torch.bfloat16))),
    ("bwd-dout-short", ["dout", "grad"], lambda a: dict(dout=torch.ones_like(a["out"][:, :-1]))),
    ("bwd-dlse-short", ["dlse", "lse"], lambda a: dict(dlse=torch.ones_like(a["lse"][:, :, :-1]))),
):
    case(f"op-{_name}", _kw)(_bwd_case(_change))


CASE_NAMES = sorted(CASES)


# ----------------------------------------------------------------------------- child side


def child_main(name, device):
    """Run one case in this (child) process and print its reply."""
    from subproc import REPLY_PREFIX
    poison_uninitialized_memory()
    build, _, _ = CASES[name]
    try:
        call = build(torch.device(device))
    except Exception as e:  # the test's own setup failed: say so, it is not a verdict on the op
        reply = dict(setup_error=f"{type(e).__name__}: {e}")
    else:
        try:
            res = call()
        except Exception as e:
            reply = dict(raised=True, type=type(e).__name__, allowed=isinstance(e, ALLOWED_ERRORS), msg=str(e))
        else:
            shapes = [tuple(t.shape) for t in (res if isinstance(res, (tuple, list)) else [res])
                      if isinstance(t, torch.Tensor)]
            reply = dict(raised=False, returned=str(shapes))
    print(REPLY_PREFIX + json.dumps(reply), flush=True)


def _child_code(name, device):
    return f"import test_invalid\ntest_invalid.child_main({name!r}, {str(device)!r})\n"


# ----------------------------------------------------------------------------- parent side


@pytest.fixture(scope="session")
def invalid_results(request, device):
    """Runs the children of every selected case of this module, two at a time, on first use."""
    cache = {}
    selected = [item.callspec.params["name"] for item in request.session.items
                if getattr(item, "module", None) is not None and item.module.__name__ == __name__
                and hasattr(item, "callspec") and "name" in item.callspec.params]
    wanted = [n for n in selected if CASES[n][2] in (None, device.type)]

    def run(name):
        return name, run_child(_child_code(name, device), timeout=180)

    # two at a time on a 2-core machine, up to 8 on a bigger one ($TESSERA_TEST_JOBS overrides)
    jobs = int(os.environ.get("TESSERA_TEST_JOBS", max(2, min(8, os.cpu_count() or 2))))
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for name, res in pool.map(run, wanted):
            cache[name] = res

    def get(name):
        if name not in cache:
            cache[name] = run(name)[1]
        return cache[name]
    return get


@pytest.mark.parametrize("name", CASE_NAMES)
def test_invalid_argument_raises(name, device, invalid_results):
    _, keywords, needs = CASES[name]
    if needs is not None and device.type != needs:
        pytest.skip(f"needs a {needs} device")
    res = invalid_results(name)
    problem = res.problem()
    assert problem is None, f"[{name}] {problem}"
    r = res.reply
    assert "setup_error" not in r, f"[{name}] the test's setup failed: {r.get('setup_error')}"
    assert r["raised"], f"[{name}] invalid arguments were accepted (returned {r['returned']})"
    assert r["allowed"], f"[{name}] raised {r['type']} (not ValueError/TypeError/RuntimeError): {r['msg']}"
    assert names_argument(r["msg"], keywords), \
        f"[{name}] the message does not name the argument (one of {keywords}): {r['type']}: {r['msg']}"


# ----------------------------------------------------------------------------- scale = 0

SCALE_ZERO_CODE = """
import torch, tessera
from conftest import ALLOWED_ERRORS, names_argument, reference_attention, check_close, poison_uninitialized_memory
poison_uninitialized_memory()
g = torch.Generator().manual_seed(1)
q, k, v = (torch.randn(1, 6, 2, 8, generator=g).to({dev!r}) for _ in range(3))
try:
    out = tessera.attention(q, k, v, scale=0.0)
except ALLOWED_ERRORS as e:
    reply(dict(raised=True, ok=names_argument(str(e), ['scale']), msg=str(e)))
else:
    ref, _ = reference_attention(q, k, v, scale=0.0)
    reply(dict(raised=False, msg=check_close('out', out, ref, 1e-4 if q.dtype == torch.float32 else 2e-2)))
"""


def test_scale_zero_is_rejected_or_honoured(device):
    """scale=0.0 is either rejected (naming scale) or means what it says: every score 0, a uniform average
    of v. Silently replacing it by the default 1/sqrt(D) is neither."""
    res = run_child(SCALE_ZERO_CODE.format(dev=str(device)))
    assert res.problem() is None, res.problem()
    r = res.reply
    if r["raised"]:
        assert r["ok"], f"scale=0.0 raised without naming scale: {r['msg']}"
    else:
        assert r["msg"] is None, f"scale=0.0 accepted but the result is not the uniform average: {r['msg']}"
