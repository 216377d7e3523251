"""Fake (meta) kernels: output shapes and dtypes of the ops without running them, so that
torch.compile (FakeTensor tracing) can put the op in a graph. The C++ autograd kernel calls
attention_fwd / attention_bwd through the dispatcher, so tracing reaches these too."""
import torch


def _outputs(q, v, cu_seqlens_q):
    f32 = torch.float32
    if cu_seqlens_q is not None:  # packed [total, H, D]
        return (q.new_empty((q.shape[0], q.shape[1], v.shape[-1])),
                q.new_empty((q.shape[1], q.shape[0]), dtype=f32))
    return (q.new_empty((q.shape[0], q.shape[1], q.shape[2], v.shape[-1])),
            q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=f32))


def _fwd(q, k, v, bias=None, mask=None, alibi_slopes=None, cu_seqlens_q=None, cu_seqlens_k=None,
         max_seqlen_q=-1, max_seqlen_k=-1, scale=None, causal=False, window_left=-1, window_right=-1,
         dropout_p=0.0, seed=0, offset=0, deterministic=False):
    if q.dim() != (3 if cu_seqlens_q is not None else 4):
        raise ValueError(f"tessera.attention: q must be [B, N, H, D] or [total, H, D] with cu_seqlens, "
                         f"got shape {tuple(q.shape)}")
    return _outputs(q, v, cu_seqlens_q)


def _bwd(dout, dlse, q, k, v, out, lse, bias=None, mask=None, alibi_slopes=None, cu_seqlens_q=None,
         cu_seqlens_k=None, max_seqlen_q=-1, max_seqlen_k=-1, scale=None, causal=False, window_left=-1,
         window_right=-1, dropout_p=0.0, seed=0, offset=0, deterministic=False, bias_grad=False,
         mask_grad=False):
    def grad_of(term, wanted):
        if wanted and term is not None:
            return term.new_empty(term.shape)
        return q.new_empty((0,), dtype=torch.float32)  # the op's "not asked for"
    return (q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape),
            grad_of(bias, bias_grad), grad_of(mask, mask_grad))


def _register():
    register = getattr(torch.library, "register_fake", None) or getattr(torch.library, "impl_abstract", None)
    if register is None:  # torch < 2.2: no torch.compile support for custom ops anyway
        return
    register("tessera::attention")(_fwd)
    register("tessera::attention_fwd")(_fwd)
    register("tessera::attention_bwd")(_bwd)


_register()
