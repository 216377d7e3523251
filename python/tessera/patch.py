"""tessera.patch(model): the attention of timm ViT blocks and MONAI Swin UNETR windows on Tessera's op,
in place. Weights, parameters and module structure stay as they are; only the forward of the attention
modules changes, so state dicts and optimisers are unaffected."""
import types

import torch

from ._ops import attention


def _timm_attention_forward(self, x, attn_mask=None, is_causal=False):
    # timm.layers.Attention.forward with SDPA replaced; q, k, v stay [B, N, H, D] (no permutes).
    B, N, _ = x.shape
    head_dim = getattr(self, "head_dim", None) or self.qkv.out_features // (3 * self.num_heads)
    gate = self.gate(x).sigmoid() if getattr(self, "gate", None) is not None else None
    q, k, v = self.qkv(x).reshape(B, N, 3, self.num_heads, head_dim).unbind(2)
    q, k = self.q_norm(q), self.k_norm(k)
    p = self.attn_drop.p if self.training else 0.0
    x = attention(q, k, v, mask=attn_mask, causal=is_causal, dropout_p=p, scale=self.scale)
    x = x.reshape(B, N, self.num_heads * head_dim)
    x = self.norm(x) if hasattr(self, "norm") else x
    if gate is not None:
        x = x * gate
    return self.proj_drop(self.proj(x))


def _monai_window_attention_forward(self, x, mask):
    # monai.networks.nets.swin_unetr.WindowAttention.forward: the relative-position bias [H, n, n] and
    # the shift mask [nW, n, n] go in as two broadcast terms (windows are batch-major: window w of
    # image i is batch entry i * nW + w, which reads mask slice w), so the table's gradient flows.
    b, n, c = x.shape
    h = self.num_heads
    q, k, v = self.qkv(x).reshape(b, n, 3, h, c // h).unbind(2)
    index = self.relative_position_index.clone()[:n, :n].reshape(-1)
    rel = self.relative_position_bias_table[index].reshape(n, n, -1).permute(2, 0, 1)
    term = None if mask is None else mask.unsqueeze(1)
    p = self.attn_drop.p if self.training else 0.0
    x = attention(q, k, v, bias=rel, mask=term, dropout_p=p, scale=self.scale).reshape(b, n, c)
    return self.proj_drop(self.proj(x))


def _kind(module):
    cls = type(module)
    if cls.__name__ == "Attention" and cls.__module__.startswith("timm.") and \
            isinstance(getattr(module, "qkv", None), torch.nn.Linear):
        return _timm_attention_forward
    if cls.__name__ == "WindowAttention" and cls.__module__.startswith("monai.networks.nets.swin_unetr"):
        return _monai_window_attention_forward
    return None


def patch(model):
    """Swap the attention of timm ``VisionTransformer`` blocks (``timm.layers.Attention``) and MONAI
    ``SwinUNETR`` window attention (``WindowAttention``) for Tessera's op, in place.

    Returns the number of modules patched (0 when the model has none of them). Patching twice is harmless.
    Works under ``torch.compile`` and autocast; dropout, masks and the Swin bias gradient are kept.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"tessera.patch: expected a torch.nn.Module, got {type(model).__name__}")
    count = 0
    for module in model.modules():
        forward = _kind(module)
        if forward is not None:
            module.forward = types.MethodType(forward, module)
            count += 1
    return count
