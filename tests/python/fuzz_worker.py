"""Randomized argument fuzz of tessera.attention: the cases, the check of one case, and the worker loop.

A case is fully determined by its seed (and the device): make_spec(seed) draws the arguments as plain
values, build(spec) makes the tensors, run_case(seed) calls the op and judges it:
  * expect "valid":   the call must succeed and match reference_attention (float64) in out and lse, and
                      for a subset also in the gradients of q, k, v, bias and a float mask;
  * expect "invalid": the call must raise ValueError/TypeError/RuntimeError whose message names the
                      argument that is wrong (at most one wrong argument per case);
  * expect "either":  combinations the API leaves open (causal with window_right > 0, a float64 bias):
                      a proper error naming the argument, or a correct result.
Valid calls must also leave every input tensor unchanged. About 15% of the cases call the raw
torch.ops.tessera.attention instead of tessera.attention; the gradient cases hand the backward a dense,
a transposed or an expanded (out.sum()) upstream gradient.

Usage (from anywhere; the device defaults to $TESSERA_TEST_DEVICE or cpu):
  python fuzz_worker.py --worker               seeds on stdin, one reply line each (test_fuzz.py's pool)
  python fuzz_worker.py --describe 123         what case 123 is
  python fuzz_worker.py --run 123 [456 ...]    run cases here and print the verdicts: a reproducer
"""
import argparse
import json
import os
import random
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from conftest import (ALLOWED_ERRORS, check_close, fwd_tol, grad_tol, names_argument,  # noqa: E402
                      poison_uninitialized_memory, reference_attention)
from subproc import REPLY_PREFIX  # noqa: E402

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16,
          "float64": torch.float64, "int32": torch.int32, "int64": torch.int64}
DTYPE_WORDS = ["dtype", "float32", "float16", "bfloat16", "float64", "double", "int32", "int64", "scalar type"]
HEAD_DIM_WORDS = ["head dim", "head_dim", "headdim", "head dimension"]

# Invalid-argument kinds and the words one of which the error message must contain.
BAD_KINDS = {
    "hq_not_multiple_of_hkv": ["head"],
    "head_dim": HEAD_DIM_WORDS,
    "head_dim_v": HEAD_DIM_WORDS + ["v"],
    "k_head_dim": HEAD_DIM_WORDS + ["k"],
    "dtype": DTYPE_WORDS,
    "dtype_mismatch": DTYPE_WORDS,
    "bias_shape": ["bias"],
    "bias_rank": ["bias"],
    "mask_shape": ["mask"],
    "alibi": ["alibi"],
    "window": ["window"],
    "dropout": ["dropout"],
    "scale_nan": ["scale"],
    "kv_length": ["k", "v", "length", "sequence"],
    "batch": ["batch"],
    "cu_seqlens": ["cu_seqlens", "max_seqlen"],
    "varlen_4d": ["cu_seqlens", "varlen", "3-D", "q"],
    "device": ["device", "cpu", "cuda"],
}


def _divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def make_spec(seed, device_type="cpu"):
    """The arguments of case `seed` as plain values (no tensors)."""
    r = random.Random(seed)
    s = {"seed": seed}
    kinds = [k for k in BAD_KINDS if k != "device" or device_type == "cuda"]
    bad = r.choice(kinds) if r.random() < 0.2 else None
    s["varlen"] = bad in ("cu_seqlens", "varlen_4d") or (bad not in ("batch",) and r.random() < 0.3)

    # dtypes
    if bad == "dtype":
        dt = r.choice(["float64", "int32", "int64"])
    elif device_type == "cuda":
        dt = r.choices(["float32", "bfloat16", "float16"], [0.3, 0.35, 0.35])[0]
    else:
        dt = r.choices(["float32", "bfloat16", "float16"], [0.8, 0.1, 0.1])[0]
    s["dtype"] = dt
    s["k_dtype"] = s["v_dtype"] = dt
    if bad == "dtype_mismatch":
        s[r.choice(["k_dtype", "v_dtype"])] = r.choice([d for d in ("float32", "bfloat16", "float16") if d != dt])

    # heads and head dims
    hkv = r.randint(1, 3)
    hq = hkv * r.choice([1, 1, 2, 3, 4])
    if bad == "hq_not_multiple_of_hkv":
        hkv = r.randint(2, 4)
        hq = hkv * r.randint(1, 3) + r.randint(1, hkv - 1)
    d = r.choice([r.randint(1, 96), r.randint(1, 96), r.choice([8, 16, 32, 64, 96])])
    dv = d if r.random() < 0.6 else r.randint(1, 96)
    dk = d
    if bad == "head_dim":
        d = dk = r.choice([0, r.randint(257, 300)])
        if d > 256:
            dv = min(dv, 64)
    elif bad == "head_dim_v":
        dv = r.choice([0, r.randint(257, 300)])
    elif bad == "k_head_dim":
        dk = d + r.randint(1, 8) if (d == 1 or r.random() < 0.5) else r.randint(1, d - 1)
    s.update(hq=hq, hkv=hkv, d=d, dk=dk, dv=dv)

    # sequence geometry
    if not s["varlen"]:
        B = r.randint(1, 3)
        nq = r.randint(1, 70)
        nk = nq if r.random() < 0.5 else r.randint(1, 70)
        # keep the work small: 2 CPU cores run 2,000 cases in about 3 minutes
        while B * hq * nq * nk * max(d, dv, 1) > 2_000_000 and B > 1:
            B -= 1
        while B * hq * nq * nk * max(d, dv, 1) > 2_000_000:
            nq, nk = max(1, nq // 2), max(1, nk // 2)
        s.update(batch=B, nq=nq, nk=nk)
    else:
        nseq = r.randint(1, 4)
        lq = [0 if r.random() < 0.1 else r.randint(1, 40) for _ in range(nseq)]
        same = r.random() < 0.5
        lk = list(lq) if same else [0 if r.random() < 0.1 else r.randint(1, 40) for _ in range(nseq)]
        cu_q = [0]
        cu_k = [0]
        for a, b in zip(lq, lk):
            cu_q.append(cu_q[-1] + a)
            cu_k.append(cu_k[-1] + b)
        total_q, total_k = cu_q[-1], cu_k[-1]
        form = r.choice(["single", "tuple"]) if same else "tuple"
        mq, mk = max(lq), max(lk)
        ms_form = r.choice([None, None, "int", "tuple"])
        max_seqlen = None
        if ms_form == "int":
            max_seqlen = max(mq, mk) + r.choice([0, 0, r.randint(1, 3)])
            mq = mk = max_seqlen
        elif ms_form == "tuple":
            max_seqlen = (mq + r.choice([0, r.randint(1, 3)]), mk + r.choice([0, r.randint(1, 3)]))
            mq, mk = max_seqlen
        if bad == "cu_seqlens":
            how = r.choice(["past_end", "decreasing", "max_too_short", "lengths_differ", "negative"])
            if how == "decreasing" and nseq < 2:
                how = "past_end"
            if how == "max_too_short" and max(max(lq), max(lk)) == 0:
                how = "past_end"
            target = cu_q if (form == "single" or r.random() < 0.5) else cu_k
            if how == "past_end":
                target[-1] += r.randint(1, 5)
            elif how == "decreasing":
                b = r.randint(1, nseq - 1)
                target[b] = target[b + 1] + r.randint(1, 3)
            elif how == "negative":
                target[1] = -r.randint(1, 5)
            elif how == "lengths_differ":
                form = "tuple"
                cu_k.append(cu_k[-1])
            elif how == "max_too_short":
                longest = max(max(lq), max(lk))
                max_seqlen = r.randint(0, longest - 1)
                if r.random() < 0.5 and max(lq) > 0 and max(lk) > 0:
                    max_seqlen = (r.randint(0, max(lq) - 1), max(lk)) if r.random() < 0.5 else \
                        (max(lq), r.randint(0, max(lk) - 1))
                mq, mk = (max_seqlen, max_seqlen) if isinstance(max_seqlen, int) else max_seqlen
            s["cu_bad"] = how
        s.update(batch=nseq, cu_q=cu_q, cu_k=cu_k, total_q=total_q, total_k=total_k, cu_form=form,
                 max_seqlen=max_seqlen, nq=mq, nk=mk, lq=lq, lk=lk)
        if form == "single" and cu_q != cu_k:
            s["cu_k"] = list(s["cu_q"])
    if bad == "kv_length":
        s["v_extra_rows"] = r.randint(1, 3)
    if bad == "batch":
        s["kv_batch"] = s["batch"] + r.randint(1, 2)
    s["layout"] = r.choices(["contiguous", "transposed", "strided", "broadcast"], [0.7, 0.12, 0.1, 0.08])[0]
    s["amp"] = r.choice([1.0, 1.0, 1.0, 3.0])

    B, nq, nk = s["batch"], s["nq"], s["nk"]

    # bias and mask
    def term_shape(kind):
        form = r.choice(["2d", "2d_row", "3d", "4d"])
        hdim = r.choice([hq, 1])
        qdim = r.choice([nq, nq, 1])
        if form == "2d":
            shape = [nq, nk]
        elif form == "2d_row":
            shape = [1, nk]
        elif form == "3d":
            shape = [hdim, qdim, nk]
        else:
            shape = [r.choice(_divisors(B)), hdim, qdim, nk]
        if bad == kind + "_shape":
            dims = {"key": len(shape) - 1, "query": len(shape) - 2}
            if len(shape) >= 3:
                dims["head"] = len(shape) - 3
            if len(shape) == 4 and B < 6:
                dims["batch"] = 0
            which = r.choice(sorted(dims))
            i = dims[which]
            if which == "key":
                shape[i] = nk + r.randint(1, 3)
            elif which == "query":
                # neither nq nor 1 (a query dimension of 1 broadcasts, which is valid)
                shape[i] = max(nq, 1) + r.randint(1, 3) if (nq <= 2 or r.random() < 0.5) else r.randint(2, nq - 1)
            elif which == "head":
                shape[i] = hq + r.randint(1, 2)
            else:
                shape[i] = r.choice([b for b in range(2, B + 6) if B % b != 0])
            s[kind + "_bad_dim"] = which
        return form, shape

    if r.random() < 0.3 or bad in ("bias_shape", "bias_rank"):
        form, shape = term_shape("bias")
        if bad == "bias_rank":
            shape = [nk] if r.random() < 0.5 else [1, B, hq, nq, nk]
            form = f"{len(shape)}d"
        float_dts = ["float32", "bfloat16", "float16"] if dt in ("float32", "bfloat16", "float16") else ["float32"]
        bdt = dt if dt in float_dts and r.random() < 0.7 else r.choice(float_dts)
        if r.random() < 0.03 and bad is None:
            bdt = "float64"  # not in the API's list: rejected (naming bias) or honoured
        s["bias"] = dict(form=form, shape=shape, dtype=bdt, amp=r.choice([0.5, 2.0, 5.0]),
                         layout=r.choices(["contiguous", "transposed", "expanded"], [0.8, 0.1, 0.1])[0])
    if r.random() < 0.3 or bad == "mask_shape":
        form, shape = term_shape("mask")
        kind = r.choice(["bool", "bool", "float_inf", "float_neg", "float_randn"])
        mdt = "bool" if kind == "bool" else (dt if dt in ("float32", "bfloat16", "float16") else "float32")
        s["mask"] = dict(form=form, shape=shape, kind=kind, dtype=mdt, p_keep=r.uniform(0.4, 0.95),
                         dead_row=r.random() < 0.15,
                         layout=r.choices(["contiguous", "transposed"], [0.9, 0.1])[0])

    # alibi
    if r.random() < 0.15 or bad == "alibi":
        shape = [hq] if r.random() < 0.6 else [B, hq]
        if bad == "alibi":
            shape = r.choice([[hq + 1], [B + 1, hq], [B, hq + 1], [1, 1, hq]])
        s["alibi"] = shape

    # masking options
    s["causal"] = r.random() < 0.3
    s["window"] = [-1, -1]
    if r.random() < 0.25:
        s["window"] = [r.choice([-1, r.randint(0, 40)]), r.choice([-1, r.randint(0, 40)])]
    if bad == "window":
        s["window"][r.randint(0, 1)] = r.randint(-10, -2)
    s["scale"] = None
    if r.random() < 0.2:
        s["scale"] = r.uniform(0.05, 1.5) * (-1 if r.random() < 0.1 else 1)
    if bad == "scale_nan":
        s["scale"] = float("nan")
    s["dropout_p"] = None
    if bad == "dropout":
        s["dropout_p"] = r.choice([1.5, -0.1, 2.0, float("nan")])
    elif r.random() < 0.1:
        s["dropout_p"] = 0.0  # with a seed: must be exactly the no-dropout result
        s["dropout_seed"] = r.randint(1, 10**6)
    s["return_lse"] = r.random() < 0.5
    s["deterministic"] = r.random() < 0.2
    if bad == "device":
        s["on_cpu"] = r.choice(["k", "v"] + (["bias"] if "bias" in s else []) + (["alibi"] if "alibi" in s else []))
    if bad == "varlen_4d":
        s["varlen_4d"] = True

    # what must happen
    if bad is not None:
        s["expect"], s["bad"] = "invalid", bad
    elif (s["causal"] and s["window"][1] > 0) or ("bias" in s and s["bias"]["dtype"] == "float64"):
        s["expect"] = "either"
        s["either_words"] = (["window", "causal"] if s["causal"] and s["window"][1] > 0 else []) + \
                            (["bias"] if "bias" in s and s["bias"]["dtype"] == "float64" else [])
    else:
        s["expect"] = "valid"
    s["grad"] = s["expect"] != "invalid" and r.random() < 0.3
    # how the upstream gradient reaches the op's backward: dense, a transposed view, or expanded (out.sum())
    s["upstream"] = r.choice(["random", "random", "transposed", "sum"])
    # through the raw op (torch.ops.tessera.attention) instead of tessera.attention; boolean masks are the
    # package's business (the raw op takes additive terms only)
    s["via"] = "op" if r.random() < 0.15 and s.get("mask", {}).get("kind") != "bool" else "api"
    s["threads"] = r.choice([1, 1, 2])  # 2: the op's intra-op parallel path
    return s


def describe(s):
    parts = [f"seed={s['seed']}", f"expect={s['expect']}" + (f"({s['bad']})" if "bad" in s else "")]
    if s["varlen"]:
        parts.append(f"varlen cu_q={s['cu_q']} cu_k={s['cu_k']} form={s['cu_form']} max_seqlen={s['max_seqlen']}"
                     + (f" bad={s['cu_bad']}" if "cu_bad" in s else "") + (" 4-D" if s.get("varlen_4d") else ""))
    else:
        parts.append(f"B={s['batch']} Nq={s['nq']} Nk={s['nk']}")
    parts.append(f"Hq={s['hq']} Hkv={s['hkv']} D={s['d']} Dk={s['dk']} Dv={s['dv']}")
    parts.append(f"dtype={s['dtype']}" + (f" k:{s['k_dtype']} v:{s['v_dtype']}" if s["k_dtype"] != s["dtype"]
                                          or s["v_dtype"] != s["dtype"] else ""))
    parts.append(f"layout={s['layout']}")
    if s["causal"]:
        parts.append("causal")
    if s["window"] != [-1, -1]:
        parts.append(f"window={tuple(s['window'])}")
    if "bias" in s:
        b = s["bias"]
        parts.append(f"bias={b['form']}{b['shape']}:{b['dtype']}:{b['layout']}"
                     + (f" bad_dim={s['bias_bad_dim']}" if "bias_bad_dim" in s else ""))
    if "mask" in s:
        m = s["mask"]
        parts.append(f"mask={m['form']}{m['shape']}:{m['kind']}:{m['dtype']}:{m['layout']}"
                     + (" dead_row" if m["dead_row"] else "")
                     + (f" bad_dim={s['mask_bad_dim']}" if "mask_bad_dim" in s else ""))
    if "alibi" in s:
        parts.append(f"alibi={s['alibi']}")
    if s["scale"] is not None:
        parts.append(f"scale={s['scale']:.4g}")
    if s["dropout_p"] is not None:
        parts.append(f"dropout_p={s['dropout_p']}")
    for key in ("v_extra_rows", "kv_batch", "on_cpu"):
        if key in s:
            parts.append(f"{key}={s[key]}")
    if s["return_lse"]:
        parts.append("return_lse")
    if s["deterministic"]:
        parts.append("deterministic")
    if s["grad"]:
        parts.append(f"grad(upstream={s['upstream']})")
    if s["via"] == "op":
        parts.append("via=torch.ops.tessera.attention")
    return " ".join(parts)


# ----------------------------------------------------------------------------- tensors


def _randn(g, shape, dtype, device, layout, amp=1.0):
    """A random tensor of `shape` with the given memory layout (same values for every layout)."""
    base = torch.randn(*shape, generator=g, dtype=torch.float64) * amp
    if dtype.is_floating_point:
        base = base.to(dtype)
    else:
        base = (base * 3).round().to(dtype)
    if layout == "transposed" and len(shape) >= 2:
        # same values, the first two dimensions swapped in memory: unusual strides, last dim contiguous
        t = base.transpose(0, 1).contiguous().to(device).transpose(0, 1)
    elif layout == "broadcast" and len(shape) >= 3:
        # one batch element and one head, expanded: batch and head strides 0 (varlen: head stride 0)
        small = list(shape)
        small[-2] = 1
        if len(shape) == 4:
            small[0] = 1
        t = base[tuple(slice(0, n) for n in small)].to(device).expand(*shape)
    elif layout == "strided":
        # last dimension not contiguous (stride 2)
        wide = torch.zeros(*shape[:-1], 2 * shape[-1], dtype=dtype)
        wide[..., ::2] = base
        t = wide.to(device)[..., ::2]
    else:
        t = base.to(device)
    return t


def build(s, device):
    """The call's tensors and keyword arguments: (q, k, v, kwargs)."""
    g = torch.Generator().manual_seed(s["seed"])
    dev = torch.device(device)
    dt, kdt, vdt = DTYPES[s["dtype"]], DTYPES[s["k_dtype"]], DTYPES[s["v_dtype"]]
    B, hq, hkv = s["batch"], s["hq"], s["hkv"]
    if s["varlen"]:
        qshape = [s["total_q"], hq, s["d"]]
        kshape = [s["total_k"], hkv, s["dk"]]
        vshape = [s["total_k"] + s.get("v_extra_rows", 0), hkv, s["dv"]]
        if s.get("varlen_4d"):
            qshape, kshape, vshape = ([1] + x for x in (qshape, kshape, vshape))
    else:
        kb = s.get("kv_batch", B)
        qshape = [B, s["nq"], hq, s["d"]]
        kshape = [kb, s["nk"], hkv, s["dk"]]
        vshape = [kb, s["nk"] + s.get("v_extra_rows", 0), hkv, s["dv"]]
    on_cpu = s.get("on_cpu")
    q = _randn(g, qshape, dt, dev, s["layout"], s["amp"])
    k = _randn(g, kshape, kdt, "cpu" if on_cpu == "k" else dev, s["layout"], s["amp"])
    v = _randn(g, vshape, vdt, "cpu" if on_cpu == "v" else dev, s["layout"])
    kw = {}
    if "bias" in s:
        b = s["bias"]
        bdev = "cpu" if on_cpu == "bias" else dev
        shape = b["shape"]
        if b["layout"] == "expanded" and len(shape) >= 2:
            small = [1] + shape[1:]
            t = _randn(g, small, DTYPES[b["dtype"]], bdev, "contiguous", b["amp"]).expand(*shape)
        else:
            t = _randn(g, shape, DTYPES[b["dtype"]], bdev, b["layout"], b["amp"])
        kw["bias"] = t
    if "mask" in s:
        m = s["mask"]
        shape = m["shape"]
        keep = torch.rand(*shape, generator=g) < m["p_keep"]
        if m["dead_row"] and len(shape) >= 2 and shape[-2] > 0:
            keep[..., shape[-2] // 2 if shape[-2] > 1 else 0, :] = False
        if m["kind"] == "bool":
            t = keep
        elif m["kind"] == "float_inf":
            t = torch.zeros(*shape, dtype=torch.float64).masked_fill(~keep, float("-inf"))
        elif m["kind"] == "float_neg":
            # Swin's -100 (a larger finite value such as -1e4 costs fp32 its precision: -1e4 + s has an ulp of 1e-3)
            t = torch.zeros(*shape, dtype=torch.float64).masked_fill(~keep, -100.0)
        else:
            t = torch.randn(*shape, generator=g, dtype=torch.float64)
        t = t.to(DTYPES[m["dtype"]] if m["dtype"] != "bool" else torch.bool)
        if m["layout"] == "transposed" and len(shape) >= 2:
            t = t.transpose(-1, -2).contiguous().transpose(-1, -2)
        kw["mask"] = t.to(dev)
    if "alibi" in s:
        kw["alibi_slopes"] = (torch.rand(*s["alibi"], generator=g) * 0.5).to("cpu" if on_cpu == "alibi" else dev)
    if s["causal"]:
        kw["causal"] = True
    if s["window"] != [-1, -1]:
        kw["window"] = tuple(s["window"])
    if s["scale"] is not None:
        kw["scale"] = s["scale"]
    if s["dropout_p"] is not None:
        kw["dropout_p"] = s["dropout_p"]
        if "dropout_seed" in s:
            kw["seed"] = s["dropout_seed"]
    if s["varlen"]:
        cq = torch.tensor(s["cu_q"], dtype=torch.int32, device=dev)
        ck = torch.tensor(s["cu_k"], dtype=torch.int32, device=dev)
        kw["cu_seqlens"] = cq if s["cu_form"] == "single" else (cq, ck)
        if s["max_seqlen"] is not None:
            kw["max_seqlen"] = s["max_seqlen"] if isinstance(s["max_seqlen"], int) else tuple(s["max_seqlen"])
    if s["return_lse"]:
        kw["return_lse"] = True
    if s["deterministic"]:
        kw["deterministic"] = True
    return q, k, v, kw


# ----------------------------------------------------------------------------- one case


def _grad_inputs(q, k, v, kw):
    """The tensors whose gradients are checked: q, k, v, a floating bias and a floating mask."""
    names = ["q", "k", "v"]
    tensors = [q, k, v]
    for name in ("bias", "mask"):
        t = kw.get(name)
        if t is not None and t.dtype.is_floating_point:
            names.append(name)
            tensors.append(t)
    return names, tensors


def call_raw_op(q, k, v, kw):
    """The same call through torch.ops.tessera.attention (which always returns (out, lse))."""
    cu_q = cu_k = None
    if "cu_seqlens" in kw:
        cu = kw["cu_seqlens"]
        cu_q, cu_k = cu if isinstance(cu, tuple) else (cu, cu)
    ms = kw.get("max_seqlen", -1)
    mq, mk = ms if isinstance(ms, tuple) else (ms, ms)
    window = kw.get("window", (-1, -1))
    out, lse = torch.ops.tessera.attention(
        q, k, v, bias=kw.get("bias"), mask=kw.get("mask"), alibi_slopes=kw.get("alibi_slopes"), cu_seqlens_q=cu_q,
        cu_seqlens_k=cu_k, max_seqlen_q=mq, max_seqlen_k=mk, scale=kw.get("scale"), causal=kw.get("causal", False),
        window_left=window[0], window_right=window[1], dropout_p=kw.get("dropout_p", 0.0), seed=kw.get("seed", 0),
        deterministic=kw.get("deterministic", False))
    return (out, lse) if kw.get("return_lse") else out


def _snapshot(q, k, v, kw):
    """Copies of every tensor argument, to check afterwards that the op wrote into none of them."""
    tensors = {"q": q, "k": k, "v": v}
    for key, val in kw.items():
        if isinstance(val, torch.Tensor):
            tensors[key] = val
        elif isinstance(val, tuple) and all(isinstance(t, torch.Tensor) for t in val):
            tensors.update({f"{key}[{i}]": t for i, t in enumerate(val)})
    return {name: (t, t.detach().clone()) for name, t in tensors.items()}


def _modified(snap):
    return [name for name, (t, copy) in snap.items() if not torch.equal(t.detach(), copy)
            and not (t.is_floating_point() and torch.equal(t.detach().isnan(), copy.isnan())
                     and torch.equal(t.detach().nan_to_num(), copy.nan_to_num()))]


def check_case(s, device):
    """Returns None when case s behaves as the API says, else a description of what is wrong."""
    import tessera
    q, k, v, kw = build(s, device)
    names, inputs = _grad_inputs(q, k, v, kw)
    if s["grad"]:
        for t in inputs:
            t.requires_grad_(True)
    snap = _snapshot(q, k, v, kw)
    try:
        res = tessera.attention(q, k, v, **kw) if s["via"] == "api" else call_raw_op(q, k, v, kw)
    except Exception as e:  # noqa: BLE001  (judged below)
        words = BAD_KINDS[s["bad"]] if s["expect"] == "invalid" else s.get("either_words", [])
        if s["expect"] == "valid":
            return f"raised for valid arguments: {type(e).__name__}: {e}"
        if not isinstance(e, ALLOWED_ERRORS):
            return f"raised {type(e).__name__} (not ValueError/TypeError/RuntimeError): {e}"
        if not names_argument(str(e), words):
            return f"the error does not name the argument (one of {words}): {type(e).__name__}: {e}"
        return None
    if s["expect"] == "invalid":
        return f"invalid arguments ({s['bad']}) were accepted"

    out, lse = res if s["return_lse"] else (res, None)
    if s["return_lse"] != isinstance(res, tuple):
        return f"return_lse={s['return_lse']} but the op returned {type(res).__name__}"
    if out.dtype != q.dtype or out.device != q.device:
        return f"out is {out.dtype} on {out.device}, expected {q.dtype} on {q.device}"
    if lse is not None and (lse.dtype != torch.float32 or lse.device != q.device):
        return f"lse is {lse.dtype} on {lse.device}, expected float32 on {q.device}"

    # the reference, in float64, on float64 copies of the same values
    ref_inputs = [t.detach().to("cpu", torch.float64).requires_grad_(s["grad"]) for t in inputs]
    rkw = {key: kw[key] for key in ("causal", "window", "alibi_slopes", "scale", "cu_seqlens", "max_seqlen")
           if key in kw}
    rmap = dict(zip(names, ref_inputs))
    mask = rmap.get("mask", kw.get("mask"))
    ref_out, ref_lse = reference_attention(rmap["q"], rmap["k"], rmap["v"], bias=rmap.get("bias"), mask=mask, **rkw)

    # bias / mask values in bf16 / fp16 are exact in the fp32 computation: the tolerance is q's
    tol = fwd_tol(q.dtype, device)
    problems = [check_close("out", out, ref_out, tol)]
    if lse is not None:
        problems.append(check_close("lse", lse, ref_lse, tol))
    # rows that see no key are exactly 0 (not merely small)
    dead = ref_lse == float("-inf")
    dead_rows = dead.permute(0, 2, 1) if not s["varlen"] else dead.t()
    if bool(dead_rows.any()):
        got = out.detach().cpu()[dead_rows]
        if bool((got != 0).any()):
            problems.append(f"out of a fully masked row is not 0: {got[got != 0][:5].tolist()}")
    problems = [p for p in problems if p]
    if _modified(snap):
        problems.append(f"the forward modified its inputs: {_modified(snap)}")
    if problems or not s["grad"]:
        return "; ".join(problems) or None

    # gradients against the reference's autograd, for a random upstream gradient of out (and lse)
    gg = torch.Generator().manual_seed(s["seed"] + 1)
    if s["upstream"] == "sum":  # the op's backward gets an expanded (stride 0) gradient of out
        loss_ref, loss = ref_out.sum(), out.sum().double()
    elif s["upstream"] == "transposed":  # ... a transposed (non-contiguous) one
        g_t = torch.randn(*out.transpose(0, 1).shape, generator=gg, dtype=torch.float64)
        loss_ref = (ref_out.transpose(0, 1) * g_t).sum()
        loss = (out.double().transpose(0, 1) * g_t.to(out.device)).sum()
    else:
        g_out = torch.randn(*out.shape, generator=gg, dtype=torch.float64)
        loss_ref = (ref_out * g_out).sum()
        loss = (out.double() * g_out.to(out.device)).sum()
    if lse is not None:
        g_lse = torch.randn(*lse.shape, generator=gg, dtype=torch.float64)
        loss_ref = loss_ref + (ref_lse.masked_fill(dead, 0.0) * g_lse).sum()
        loss = loss + (lse.double().masked_fill(dead.to(lse.device), 0.0) * g_lse.to(lse.device)).sum()
    try:
        grads = torch.autograd.grad(loss, inputs, allow_unused=True)
    except Exception as e:  # noqa: BLE001
        return f"backward raised: {type(e).__name__}: {e}"
    ref_grads = torch.autograd.grad(loss_ref, ref_inputs, allow_unused=True)
    if _modified(snap):
        problems.append(f"the backward modified its inputs: {_modified(snap)}")
    for name, t, gr, rg in zip(names, inputs, grads, ref_grads):
        if rg is None:
            rg = torch.zeros(t.shape, dtype=torch.float64)
        if gr is None:
            problems.append(f"no gradient for {name}")
            continue
        # a bf16 / fp16 bias gets its gradient in its own dtype
        gtol = max(grad_tol(q.dtype, device), grad_tol(t.dtype if t.dtype != torch.float64 else q.dtype, device))
        problems.append(check_close(f"grad {name}", gr, rg, gtol))
    return "; ".join(p for p in problems if p) or None


def run_case(seed, device):
    """The verdict on case `seed` as a JSON-able dict: ok, the case's description, and what went wrong."""
    s = make_spec(seed, torch.device(device).type)
    try:
        torch.set_num_threads(s["threads"])
        problem = check_case(s, device)
        return dict(seed=seed, ok=problem is None, expect=s["expect"], grad=s["grad"], problem=problem)
    except Exception:  # noqa: BLE001  a bug of the harness itself: report it, do not hide it
        return dict(seed=seed, ok=False, expect=s["expect"], grad=s["grad"],
                    problem="the fuzz harness itself failed:\n" + traceback.format_exc())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default=os.environ.get("TESSERA_TEST_DEVICE", "cpu"))
    ap.add_argument("--worker", action="store_true", help="read seeds from stdin, reply one line each")
    ap.add_argument("--describe", type=int, nargs="*", default=[])
    ap.add_argument("--run", type=int, nargs="*", default=[])
    args = ap.parse_args()
    poison_uninitialized_memory()
    for seed in args.describe:
        print(describe(make_spec(seed, torch.device(args.device).type)))
    for seed in args.run:
        print(describe(make_spec(seed, torch.device(args.device).type)), flush=True)
        print(json.dumps(run_case(seed, args.device)), flush=True)
    if args.worker:
        import tessera  # noqa: F401  (import once, before the first case)
        for line in sys.stdin:
            line = line.strip()
            if line:
                print(REPLY_PREFIX + json.dumps(run_case(int(line), args.device)), flush=True)


if __name__ == "__main__":
    main()
