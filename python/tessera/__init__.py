"""Tessera's exact fused attention for PyTorch.

    import tessera
    out = tessera.attention(q, k, v, causal=True)        # q, k, v: [B, N, H, D]
    tessera.patch(model)                                 # timm ViT / MONAI SwinUNETR in place

The op is also reachable as ``torch.ops.tessera.attention`` once this package is imported.
"""
from ._ops import attention, library_path
from .patch import patch

__all__ = ["attention", "patch", "library_path"]
__version__ = "0.1.0"
