"""The op inside models as users run them: torch.compile with the op in the graph, and
tessera.patch on timm's ViT-B/16 and MONAI's SwinUNETR (fs48) against the unpatched models
(bf16 outputs; one training step's gradients in fp32). CUDA only, with torch >= 2.4; timm and
MONAI must be importable (the GPU machine has timm; MONAI's source is put on PYTHONPATH)."""
import contextlib
import copy
import importlib.util
import os

import pytest
import torch

import tessera

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
# the model comparisons run once, in the suite's CUDA pass (TESSERA_TEST_DEVICE=cuda)
cuda_pass = pytest.mark.skipif(not os.environ.get("TESSERA_TEST_DEVICE", "cpu").startswith("cuda"),
                               reason="model comparisons run in the CUDA pass (TESSERA_TEST_DEVICE=cuda)")
compile_ok = pytest.mark.skipif(not hasattr(torch.library, "register_fake"), reason="needs torch >= 2.4")


def rel_err(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


@compile_ok
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=cuda)])
def test_compile_fullgraph_forward_backward(device):
    torch.manual_seed(0)
    dt = torch.float32 if device == "cpu" else torch.bfloat16
    q, k, v = (torch.randn(2, 77, 4, 32, device=device, dtype=dt, requires_grad=True) for _ in range(3))
    bias = torch.randn(4, 77, 77, device=device, dtype=dt, requires_grad=True)

    def f(q, k, v, bias):
        return tessera.attention(q, k, v, bias=bias, causal=True).float().square().sum()

    grads_eager = torch.autograd.grad(f(q, k, v, bias), (q, k, v, bias))
    compiled = torch.compile(f, fullgraph=True)
    loss = compiled(q, k, v, bias)
    grads = torch.autograd.grad(loss, (q, k, v, bias))
    tol = 1e-5 if dt == torch.float32 else 1e-2
    assert rel_err(loss, f(q, k, v, bias)) < tol
    for g, ge in zip(grads, grads_eager):
        assert rel_err(g, ge) < tol


def _need(module):
    return pytest.mark.skipif(importlib.util.find_spec(module) is None, reason=f"{module} is not installed")


@contextlib.contextmanager
def _no_tf32():
    # fp32 means fp32: TF32 convolutions (cuDNN's default) would put 1e-3 rounding into both models
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def _grad_errors(ref, pat, x, loss_fn, autocast, x_other=None):
    """Worst relative error over the parameters' gradients of one training step (pat on x_other, or x),
    and its parameter."""
    with contextlib.nullcontext() if autocast else _no_tf32():
        grads = []
        for m, xin in ((ref, x), (pat, x if x_other is None else x_other)):
            m.train()
            m.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
                loss_fn(m(xin).float()).backward()
            grads.append({n: p.grad.clone() for n, p in m.named_parameters() if p.grad is not None})
    g_ref, g_pat = grads
    assert g_ref.keys() == g_pat.keys()
    errors = {n: rel_err(g_pat[n], g_ref[n]) for n in g_ref}
    worst = max(errors, key=errors.get)
    return errors[worst], worst


def _compare(model, make_input, patched_count_min, loss_fn):
    """Unpatched vs patched copy: the bf16-autocast forward, and one training step's gradients in fp32
    (both exact: they must agree to the model's own rounding sensitivity, measured as the unpatched
    model's gradients for an input moved by 1e-7 relative) and in bf16 (reported)."""
    torch.manual_seed(0)
    ref = model.cuda()
    pat = copy.deepcopy(ref)
    n = tessera.patch(pat)
    assert n >= patched_count_min
    x = make_input()
    ref.eval(), pat.eval()
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        out_ref, out_pat = ref(x), pat(x)
    fwd = rel_err(out_pat.float(), out_ref.float())
    g32, n32 = _grad_errors(ref, pat, x, loss_fn, autocast=False)
    floor, nfloor = _grad_errors(ref, ref, x, loss_fn, autocast=False, x_other=x * (1 + 1e-7))
    g16, n16 = _grad_errors(ref, pat, x, loss_fn, autocast=True)
    print(f"\n{type(model).__name__}: patched {n}, bf16 forward rel err {fwd:.2e}, worst grad rel err "
          f"fp32 {g32:.2e} ({n32}; the model's own fp32 sensitivity {floor:.2e}, {nfloor}), bf16 {g16:.2e} ({n16})")
    return fwd, g32 / (4 * floor + 1e-5), pat, x


@cuda
@cuda_pass
@_need("timm")
def test_patch_timm_vit_b16():
    import timm
    model = timm.create_model("vit_base_patch16_224", pretrained=False, num_classes=10)
    fwd, worst, pat, x = _compare(model, lambda: torch.randn(8, 3, 224, 224, device="cuda"), 12,
                                  lambda y: y.square().mean())
    assert fwd < 2e-2 and worst < 1.0  # worst: fp32 gradient error over 4x the model's floor
    if hasattr(torch.library, "register_fake"):  # the patched model compiles with the op in one graph
        pat.eval()
        compiled = torch.compile(pat, fullgraph=True)
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            assert rel_err(compiled(x).float(), pat(x).float()) < 2e-2


@cuda
@cuda_pass
@_need("monai")
def test_patch_monai_swin_unetr_fs48():
    from monai.networks.nets import SwinUNETR
    model = SwinUNETR(in_channels=1, out_channels=14, feature_size=48)
    fwd, worst, pat, _ = _compare(model, lambda: torch.randn(1, 1, 96, 96, 96, device="cuda"), 8,
                                  lambda y: y.square().mean())
    assert fwd < 2e-2 and worst < 1.0  # worst: fp32 gradient error over 4x the model's floor
    table = [p for n, p in pat.named_parameters() if n.endswith("relative_position_bias_table")]
    assert table and all(t.grad is not None and t.grad.abs().sum() > 0 for t in table)
