// The long-sequence aggregator: one transformer over every token of a slide
// (tile embeddings at 2-D grid coordinates) or of a video (frame/clip
// embeddings at timestamps), 10k–100k+ tokens, several sequences packed into
// one varlen batch. Rotary position encoding makes attention depend on
// relative positions only, so a slide's tiles can sit anywhere on its grid.
// The same module serves slide embedding and the temporal video model.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include "tessera/models/linear.h"
#include <torch/nn/modules/normalization.h>

#include <string>

#include "tessera/models/transformer_layers.h"

namespace tessera::models {

enum class PositionEncoding { none, rope1d, rope2d };

struct AggregatorConfig {
  int64_t in_dim = 192;       // width of the incoming embeddings
  int64_t dim = 256;          // transformer width
  int64_t depth = 2;
  int64_t num_heads = 4;
  double mlp_ratio = 4.0;
  PositionEncoding position = PositionEncoding::rope2d;
  double rope_base = 100.0;   // wavelengths from 2π to 2π·base positions (grid cells or seconds)
  bool causal = false;        // temporal models that must not look ahead
  int64_t num_classes = 0;    // > 0 adds a per-token classification head (e.g. surgical phases)
  bool pooled_head = false;   // the head classifies each sequence's pooled embedding instead (e.g. a slide's subtype)
};

PositionEncoding parse_position_encoding(const std::string& name);

// Rotates q or k [total, H, head_dim] by their tokens' positions [total, P]
// (P = 1 for rope1d, 2 for rope2d: x then y): each position coordinate owns
// head_dim / P channels, split in halves rotated against each other
// (GPT-NeoX layout) at frequencies base^(-2i/m).
torch::Tensor apply_rope(const torch::Tensor& x, const torch::Tensor& positions, double base);

class AggregatorBlockImpl : public torch::nn::Module {
 public:
  AggregatorBlockImpl(const AggregatorConfig& cfg);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& positions, const torch::Tensor& cu_seqlens,
                        int64_t max_seqlen);

  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  Linear qkv{nullptr}, proj{nullptr};
  Mlp mlp{nullptr};

 private:
  AggregatorConfig cfg_;
};
TORCH_MODULE(AggregatorBlock);

struct AggregatorOutput {
  torch::Tensor tokens;  // [total, dim]: per-token outputs after the final norm
  torch::Tensor pooled;  // [B, dim]: mean of each sequence's tokens
  torch::Tensor logits;  // [total, num_classes] when the config has a head ([B, num_classes] with pooled_head)
};

class LongSequenceAggregatorImpl : public torch::nn::Module {
 public:
  explicit LongSequenceAggregatorImpl(const AggregatorConfig& cfg);
  // tokens [total, in_dim]; positions [total, P] float (grid cells or seconds),
  // ignored for PositionEncoding::none; cu_seqlens int32 [B + 1] (a single
  // sequence when undefined).
  AggregatorOutput forward(const torch::Tensor& tokens, const torch::Tensor& positions,
                           const torch::Tensor& cu_seqlens = {});
  const AggregatorConfig& config() const { return cfg_; }

  Linear embed{nullptr};
  torch::nn::ModuleList blocks{nullptr};
  torch::nn::LayerNorm norm{nullptr};
  Linear head{nullptr};

 private:
  AggregatorConfig cfg_;
};
TORCH_MODULE(LongSequenceAggregator);

// An aggregator travels as one safetensors file: its weights under their
// module names and its config as JSON in the metadata key "aggregator_config".
void save_aggregator(const std::string& path, LongSequenceAggregator& model);
LongSequenceAggregator load_aggregator(const std::string& path);

}  // namespace tessera::models
