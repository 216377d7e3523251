// Invalid arguments raise tessera::attention::Error with a message that
// names the problem; nothing is computed.
#include <gtest/gtest.h>

#include <functional>

#include "attention_case.h"
#include "tessera/attention/attention.h"

namespace tessera::test {
namespace {

void expect_error(const std::function<void(Problem&)>& spoil, const std::string& fragment, bool backward = false) {
  Case c;
  c.name = "valid";
  c.batch = 2;
  c.nq = c.nk = 33;
  c.hq = 4;
  c.hkv = 2;
  c.d = 16;
  Problem pr = make_problem(c);
  ASSERT_NO_THROW(attention::forward(pr.p));
  spoil(pr);
  try {
    if (backward) attention::backward(pr.p);
    else attention::forward(pr.p);
    FAIL() << "expected an error containing '" << fragment << "'";
  } catch (const attention::Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(AttentionValidation, HeadsNotAMultiple) {
  expect_error([](Problem& pr) { pr.p.heads_kv = 3; }, "multiple of heads_kv");
}
TEST(AttentionValidation, HeadDimOutOfRange) {
  expect_error([](Problem& pr) { pr.p.head_dim = 0; }, "head_dim must be in");
  expect_error([](Problem& pr) { pr.p.head_dim = 257; }, "head_dim must be in");
  expect_error([](Problem& pr) { pr.p.head_dim_v = 300; }, "head_dim_v must be in");
}
TEST(AttentionValidation, BadStrides) {
  expect_error([](Problem& pr) { pr.p.k_row_stride = 0; }, "k row stride");
  expect_error([](Problem& pr) { pr.p.q_head_stride = 3; }, "q head stride");
  expect_error([](Problem& pr) { pr.p.v_batch_stride = -5; }, "v batch stride");
}
TEST(AttentionValidation, NullPointers) {
  expect_error([](Problem& pr) { pr.p.v = nullptr; }, "v is null");
  expect_error([](Problem& pr) { pr.p.lse = nullptr; }, "lse");
  expect_error([](Problem& pr) { pr.p.dq = nullptr; }, "dq is null", true);
}
TEST(AttentionValidation, WindowAndCausalInconsistent) {
  expect_error([](Problem& pr) { pr.p.causal = true; pr.p.window_right = 4; }, "causal attention cannot look right");
  expect_error([](Problem& pr) { pr.p.window_left = -3; }, "window sizes");
}
TEST(AttentionValidation, CuSeqlensNotIncreasing) {
  static std::vector<int32_t> cq, ck;
  expect_error(
      [](Problem& pr) {
        cq = {0, 20, 10};
        ck = {0, 20, 33};
        pr.p.cu_seqlens_q = cq.data();
        pr.p.cu_seqlens_k = ck.data();
        pr.p.total_q = 10;
        pr.p.total_k = 33;
      },
      "non-decreasing");
  expect_error(
      [](Problem& pr) {
        cq = {0, 20, 33};
        pr.p.cu_seqlens_q = cq.data();
        pr.p.cu_seqlens_k = nullptr;
      },
      "given together");
  expect_error(
      [](Problem& pr) {
        cq = {0, 20, 40};
        ck = {0, 20, 40};
        pr.p.cu_seqlens_q = cq.data();
        pr.p.cu_seqlens_k = ck.data();
        pr.p.total_q = 66;
        pr.p.total_k = 40;
      },
      "packed tensor has");
}
TEST(AttentionValidation, BiasBroadcastMustDivide) {
  static std::vector<float> bias(3 * 33 * 33);
  expect_error(
      [](Problem& pr) {
        pr.p.num_bias = 1;
        pr.p.bias[0].ptr = bias.data();
        pr.p.bias[0].batch_mod = 3;  // batch is 2
        pr.p.bias[0].batch_stride = 33 * 33;
        pr.p.bias[0].row_stride = 33;
      },
      "does not divide the batch");
}
TEST(AttentionValidation, PackedBiasOnlyOnCuda) {
  static std::vector<float> bias(33 * 33);
  alignas(16) static unsigned char packed[64];
  auto term = [](Problem& pr) {
    pr.p.num_bias = 1;
    pr.p.bias[0].ptr = bias.data();
    pr.p.bias[0].row_stride = 33;
  };
  expect_error([&](Problem& pr) { term(pr); pr.p.bias[0].packed = packed; }, "only the CUDA path");
  expect_error([&](Problem& pr) {
    term(pr);
    pr.p.device = attention::Device::cuda;
    pr.p.dtype = attention::DType::bf16;
    pr.p.bias[0].packed = packed + 4;
  }, "16-byte aligned");
}
TEST(AttentionValidation, DropoutRange) {
  expect_error([](Problem& pr) { pr.p.dropout_p = 1.f; }, "dropout_p");
}
TEST(AttentionValidation, CudaBatchLimit) {
  expect_error([](Problem& pr) {
    pr.p.device = attention::Device::cuda;
    pr.p.dtype = attention::DType::bf16;
    pr.p.batch = 70000;
  }, "65535");
}
// float32 runs on CUDA (the exact SIMT kernels): validation lets it through.
TEST(AttentionValidation, Float32OnCudaAccepted) {
  Case c;
  c.name = "f32_cuda";
  c.d = 16;
  Problem pr = make_problem(c);
  pr.p.device = attention::Device::cuda;
  EXPECT_NO_THROW(attention::validate(pr.p, false));
}

}  // namespace
}  // namespace tessera::test
