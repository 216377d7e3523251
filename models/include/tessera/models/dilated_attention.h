// LongNet's dilated attention (torchscale DilatedAttention as Prov-GigaPath
// runs it) on Tessera's fused op. Every (segment length w, dilation r) branch:
//
//  1. pads the sequence with zeros to a multiple of min(w, N) and cuts it into
//     segments of that length;
//  2. splits the heads into r contiguous groups (heads padded to a multiple of
//     r first, so a group has ceil(H / r) heads); group g takes positions
//     g, g + r, g + 2r, ... of every segment, the segment padded with zeros
//     to a multiple of r;
//  3. attends each sparse segment densely with the op, which also returns the
//     log-sum-exp. The zero padding takes part like any token: a padded key
//     scores 0 and carries a zero value (the reference passes an all-false
//     key padding mask);
//  4. writes each sparse output back where the reference's rearrange puts it:
//     output position s * ceil(w' / r) * r + t for sparse token t of segment s
//     (w' = min(w, N)). With several segments and w' not a multiple of r, that
//     is not where the query came from (the reference concatenates the
//     r-padded segments); we keep that, it is what the published weights saw.
//
// Branches are merged per (position, head) as softmax-weighted sums: weight
// exp(lse_b) / Σ exp(lse_b') over the branches whose sparse pattern covers
// that position for that head; a branch that does not cover it has weight 0
// (the reference fills its LSE with -1e8). The merged output is one softmax
// over all branches' keys together (a key two branches share counts twice).
//
// Memory: per branch, the gathered q/k/v and the sparse output and LSE
// (together the size of q/k/v), plus int64 index tensors of N·H entries; one
// dense [N, H, D] accumulator for the merge. No [N, N] buffer, no per-branch
// dense copy. A branch with r = 1 whose segments tile N exactly gathers and
// scatters through views.
#pragma once

#include <torch/types.h>

#include <vector>

namespace tessera::models {

struct DilatedAttentionOptions {
  std::vector<int64_t> segment_lengths;
  std::vector<int64_t> dilated_ratios;
  // false: the branch weights are computed from detached log-sum-exps, as the
  // reference does (under torch.no_grad); true: gradients flow through them.
  bool merge_weights_grad = true;
};

// q, k, v: [B, N, H, D] (one sequence per batch entry, all of length N).
// Returns [B, N, H, D] in q's dtype. Differentiable w.r.t. q, k and v.
torch::Tensor dilated_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                const DilatedAttentionOptions& options);

}  // namespace tessera::models
