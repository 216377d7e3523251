#include "attention_case.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <sstream>

#include "tessera/attention/half.h"
#include "tessera/attention/layout.h"

namespace tessera::test {
namespace {

using attention::BiasTerm;

const float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Strides {
  int64_t batch, row, head;
};

int64_t rows_of(const Case& c, bool is_q) {
  const auto& lens = is_q ? c.varlen_q : c.varlen_k;
  if (!lens.empty()) return std::accumulate(lens.begin(), lens.end(), int64_t{0});
  return int64_t(c.batch) * (is_q ? c.nq : c.nk);
}

// Strides of a [B, N, H, D] tensor under the case's layout; returns the element count to allocate.
int64_t layout(const Case& c, int n, int heads, int d, bool varlen, Strides* s) {
  const int64_t rows = varlen ? 0 : n;
  if (c.bhnd_layout && !varlen) {
    s->row = d;
    s->head = int64_t(n) * d;
    s->batch = int64_t(heads) * n * d;
    return s->batch * c.batch;
  }
  const int pad_h = c.padded_strides ? 3 : 0, pad_r = c.padded_strides ? 5 : 0, pad_b = c.padded_strides ? 7 : 0;
  s->head = d + pad_h;
  s->row = int64_t(heads) * s->head + pad_r;
  if (varlen) {
    s->batch = 0;
    return 0;  // caller sizes by total rows
  }
  s->batch = rows * s->row + pad_b;
  return s->batch * c.batch;
}

void fill_tensor(std::vector<uint8_t>& buf, DType t, std::mt19937_64& rng, bool poison) {
  const int esz = attention::dtype_size(t);
  const int64_t n = int64_t(buf.size()) / esz;
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int64_t i = 0; i < n; ++i) attention::store_from_float(buf.data(), i, t, poison ? kNaN : nd(rng));
}

double rel_error(const std::vector<double>& got, const std::vector<double>& ref, bool* nan) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i])) *nan = true;
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  if (den == 0) return std::sqrt(num);
  return std::sqrt(num / den);
}

// Gathers a [rows, H, D] tensor through its strides into dense doubles.
std::vector<double> gather(const Problem& pr, const void* base, int heads, int d, bool is_q, int64_t bs,
                           int64_t rs, int64_t hs) {
  const AttentionParams& p = pr.p;
  std::vector<double> out;
  out.reserve(size_t(rows_of(pr.c, is_q)) * heads * d);
  for (int b = 0; b < p.batch; ++b) {
    const attention::SeqSpan sp = attention::seq_span(p, b);
    const int n = is_q ? sp.nq : sp.nk;
    const int64_t row0 = is_q ? sp.q0 : sp.k0;
    for (int i = 0; i < n; ++i)
      for (int h = 0; h < heads; ++h)
        for (int x = 0; x < d; ++x)
          out.push_back(attention::load_as_float(base, attention::row_offset(p, b, row0, i, h, bs, rs, hs) + x, p.dtype));
  }
  return out;
}

}  // namespace

double tolerance(DType t) {
  switch (t) {
    case DType::f32: return 1e-5;
    case DType::f16: return 4e-3;
    case DType::bf16: return 2e-2;
  }
  return 0;
}

std::string describe(const Case& c) {
  std::ostringstream os;
  os << c.name << " [B=" << c.batch << " Nq=" << c.nq << " Nk=" << c.nk << " Hq=" << c.hq << " Hkv=" << c.hkv
     << " D=" << c.d << " Dv=" << (c.dv < 0 ? c.d : c.dv) << " dtype=" << attention::dtype_name(c.dtype)
     << " causal=" << c.causal << " window=(" << c.window_left << "," << c.window_right << ") bias=" << int(c.bias)
     << " alibi=" << c.alibi << " varlen=" << !c.varlen_q.empty() << " dropout=" << c.dropout << " dlse=" << c.dlse
     << " padded=" << c.padded_strides << " bhnd=" << c.bhnd_layout << "]";
  return os.str();
}

void poison_outputs(Problem& pr) {
  std::mt19937_64 rng(0);
  fill_tensor(pr.o, pr.p.dtype, rng, true);
  fill_tensor(pr.dq, pr.p.dtype, rng, true);
  fill_tensor(pr.dk, pr.p.dtype, rng, true);
  fill_tensor(pr.dv, pr.p.dtype, rng, true);
  std::fill(pr.lse.begin(), pr.lse.end(), kNaN);
  for (auto& g : pr.bias_grad) std::fill(g.begin(), g.end(), kNaN);
}

Problem make_problem(const Case& c0, uint64_t seed) {
  Problem pr;
  pr.c = c0;
  Case& c = pr.c;
  if (c.dv < 0) c.dv = c.d;
  pr.seed = seed ? seed : (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
  std::mt19937_64 rng(pr.seed);
  AttentionParams& p = pr.p;
  const bool varlen = !c.varlen_q.empty();
  if (varlen) {
    c.batch = int(c.varlen_q.size());
    c.nq = *std::max_element(c.varlen_q.begin(), c.varlen_q.end());
    c.nk = *std::max_element(c.varlen_k.begin(), c.varlen_k.end());
    pr.cu_q.assign(1, 0);
    pr.cu_k.assign(1, 0);
    for (size_t b = 0; b < c.varlen_q.size(); ++b) {
      pr.cu_q.push_back(pr.cu_q.back() + c.varlen_q[b]);
      pr.cu_k.push_back(pr.cu_k.back() + c.varlen_k[b]);
    }
    p.cu_seqlens_q = pr.cu_q.data();
    p.cu_seqlens_k = pr.cu_k.data();
    p.total_q = pr.cu_q.back();
    p.total_k = pr.cu_k.back();
  }
  p.dtype = c.dtype;
  p.batch = c.batch;
  p.seqlen_q = c.nq;
  p.seqlen_k = c.nk;
  p.heads_q = c.hq;
  p.heads_kv = c.hkv;
  p.head_dim = c.d;
  p.head_dim_v = c.dv;
  p.scale = c.scale != 0.f ? c.scale : 1.f / std::sqrt(float(c.d));
  p.causal = c.causal;
  p.window_left = c.window_left;
  p.window_right = c.window_right;
  p.num_threads = c.threads;

  const int esz = attention::dtype_size(c.dtype);
  auto alloc = [&](std::vector<uint8_t>& buf, int n, int heads, int d, bool is_q, int64_t* bs, int64_t* rs,
                   int64_t* hs) {
    Strides s{};
    int64_t elems = layout(c, n, heads, d, varlen, &s);
    if (varlen) elems = rows_of(c, is_q) * s.row;
    buf.assign(size_t(elems) * esz, 0);
    *bs = s.batch;
    *rs = s.row;
    *hs = s.head;
  };
  alloc(pr.q, c.nq, c.hq, c.d, true, &p.q_batch_stride, &p.q_row_stride, &p.q_head_stride);
  alloc(pr.k, c.nk, c.hkv, c.d, false, &p.k_batch_stride, &p.k_row_stride, &p.k_head_stride);
  alloc(pr.v, c.nk, c.hkv, c.dv, false, &p.v_batch_stride, &p.v_row_stride, &p.v_head_stride);
  alloc(pr.o, c.nq, c.hq, c.dv, true, &p.o_batch_stride, &p.o_row_stride, &p.o_head_stride);
  alloc(pr.dout, c.nq, c.hq, c.dv, true, &p.do_batch_stride, &p.do_row_stride, &p.do_head_stride);
  alloc(pr.dq, c.nq, c.hq, c.d, true, &p.dq_batch_stride, &p.dq_row_stride, &p.dq_head_stride);
  alloc(pr.dk, c.nk, c.hkv, c.d, false, &p.dk_batch_stride, &p.dk_row_stride, &p.dk_head_stride);
  alloc(pr.dv, c.nk, c.hkv, c.dv, false, &p.dv_batch_stride, &p.dv_row_stride, &p.dv_head_stride);
  fill_tensor(pr.q, c.dtype, rng, false);
  fill_tensor(pr.k, c.dtype, rng, false);
  fill_tensor(pr.v, c.dtype, rng, false);
  fill_tensor(pr.dout, c.dtype, rng, false);
  p.q = pr.q.data();
  p.k = pr.k.data();
  p.v = pr.v.data();
  p.o = pr.o.data();
  p.dout = pr.dout.data();
  p.dq = pr.dq.data();
  p.dk = pr.dk.data();
  p.dv = pr.dv.data();

  pr.lse.assign(size_t(attention::lse_numel(p)), 0.f);
  p.lse = pr.lse.data();
  std::normal_distribution<float> nd(0.f, 1.f);
  if (c.dlse) {
    pr.dlse.resize(pr.lse.size());
    for (auto& x : pr.dlse) x = nd(rng);
    p.dlse = pr.dlse.data();
  }

  // ---- bias terms ----
  const int64_t NN = int64_t(c.nq) * c.nk;
  auto add_term = [&](int batch_mod, int head_mod, int64_t bs, int64_t hs, int64_t rs, int64_t elems, float stddev,
                      float mask_value, double mask_prob) {
    const int t = p.num_bias++;
    pr.bias[t].resize(size_t(elems));
    std::uniform_real_distribution<double> u(0, 1);
    for (auto& x : pr.bias[t]) x = u(rng) < mask_prob ? mask_value : stddev * nd(rng);
    BiasTerm& bt = p.bias[t];
    bt.ptr = pr.bias[t].data();
    bt.dtype = DType::f32;
    bt.batch_mod = batch_mod;
    bt.head_mod = head_mod;
    bt.batch_stride = bs;
    bt.head_stride = hs;
    bt.row_stride = rs;
    if (c.bias_grad) {
      pr.bias_grad[t].assign(size_t(elems), 0.f);
      bt.grad = pr.bias_grad[t].data();
    }
  };
  const float ninf = -std::numeric_limits<float>::infinity();
  switch (c.bias) {
    case BiasKind::none: break;
    case BiasKind::full: add_term(c.batch, c.hq, c.hq * NN, NN, c.nk, c.batch * c.hq * NN, 1.f, 0, 0); break;
    case BiasKind::head_shared: add_term(1, c.hq, 0, NN, c.nk, c.hq * NN, 1.f, 0, 0); break;
    case BiasKind::batch_only: add_term(c.batch, 1, NN, 0, c.nk, c.batch * NN, 1.f, 0, 0); break;
    case BiasKind::key_padding: add_term(c.batch, 1, c.nk, 0, 0, int64_t(c.batch) * c.nk, 1.f, ninf, 0.2); break;
    case BiasKind::swin:
      add_term(1, c.hq, 0, NN, c.nk, c.hq * NN, 0.5f, 0, 0);
      add_term(c.swin_windows, 1, NN, 0, c.nk, c.swin_windows * NN, 0.f, -100.f, 0.3);
      break;
    case BiasKind::neg_inf_rows: {
      add_term(c.batch, c.hq, c.hq * NN, NN, c.nk, c.batch * c.hq * NN, 1.f, 0, 0);
      for (int64_t bh = 0; bh < int64_t(c.batch) * c.hq; ++bh)
        for (int i = 0; i < c.nq; i += 3)
          for (int j = 0; j < c.nk; ++j) pr.bias[0][bh * NN + int64_t(i) * c.nk + j] = ninf;
      break;
    }
  }
  if (c.alibi) {
    std::uniform_real_distribution<float> u(0.05f, 1.f);
    pr.alibi.resize(size_t(c.alibi == 2 ? c.batch : 1) * c.hq);
    for (auto& x : pr.alibi) x = u(rng);
    p.alibi_slopes = pr.alibi.data();
    p.alibi_batch_stride = c.alibi == 2 ? c.hq : 0;
  }
  if (c.dropout > 0.f) {
    p.dropout_p = c.dropout;
    p.dropout_seed = rng();
    p.dropout_offset = rng() >> 20;
  }
  poison_outputs(pr);
  return pr;
}

Errors compare_forward(const Problem& pr, const attention::reference::Result& ref) {
  Errors e;
  const AttentionParams& p = pr.p;
  const auto o = gather(pr, p.o, p.heads_q, p.head_dim_v, true, p.o_batch_stride, p.o_row_stride, p.o_head_stride);
  e.o = rel_error(o, ref.o, &e.has_nan);
  // lse: -inf where the reference has -inf, relative error elsewhere
  std::vector<double> got, want;
  for (size_t i = 0; i < pr.lse.size(); ++i) {
    if (std::isnan(pr.lse[i])) e.has_nan = true;
    if (std::isinf(ref.lse[i])) {
      if (!(std::isinf(pr.lse[i]) && pr.lse[i] < 0)) {
        e.lse = std::max(e.lse, 1.0);
        e.detail += " lse[" + std::to_string(i) + "] should be -inf;";
      }
      continue;
    }
    got.push_back(pr.lse[i]);
    want.push_back(ref.lse[i]);
  }
  e.lse = std::max(e.lse, rel_error(got, want, &e.has_nan));
  return e;
}

Errors compare_backward(const Problem& pr, const attention::reference::Result& ref) {
  Errors e = compare_forward(pr, ref);
  const AttentionParams& p = pr.p;
  e.dq = rel_error(gather(pr, p.dq, p.heads_q, p.head_dim, true, p.dq_batch_stride, p.dq_row_stride, p.dq_head_stride),
                   ref.dq, &e.has_nan);
  e.dk = rel_error(gather(pr, p.dk, p.heads_kv, p.head_dim, false, p.dk_batch_stride, p.dk_row_stride, p.dk_head_stride),
                   ref.dk, &e.has_nan);
  e.dv = rel_error(gather(pr, p.dv, p.heads_kv, p.head_dim_v, false, p.dv_batch_stride, p.dv_row_stride, p.dv_head_stride),
                   ref.dv, &e.has_nan);
  for (int t = 0; t < p.num_bias; ++t) {
    if (!p.bias[t].grad) continue;
    std::vector<double> g(pr.bias_grad[t].begin(), pr.bias_grad[t].end());
    e.dbias[t] = rel_error(g, ref.dbias[t], &e.has_nan);
  }
  return e;
}

}  // namespace tessera::test
