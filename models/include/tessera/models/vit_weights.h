// Tile-encoder checkpoints as users download them, into the one ViT:
// timm state dicts as they are (UNI, UNI2-h, Virchow2, H-optimus-0,
// Prov-GigaPath), Hugging Face Dinov2Model ones (Phikon-v2) converted to
// timm's names; a position table of another grid is resampled as timm's
// checkpoint filter does.
#pragma once

#include <string>
#include <vector>

#include "tessera/models/safetensors.h"
#include "tessera/models/state_dict.h"
#include "tessera/models/vit.h"

namespace tessera::models {

// transformers' Dinov2Model keys -> timm VisionTransformer keys:
//   embeddings.{cls_token, position_embeddings, patch_embeddings.projection}
//     -> cls_token, pos_embed, patch_embed.proj
//   encoder.layer.N.attention.attention.{query,key,value} -> blocks.N.attn.qkv (rows q, k, v)
//   encoder.layer.N.attention.output.dense -> blocks.N.attn.proj
//   encoder.layer.N.layer_scale{1,2}.lambda1 -> blocks.N.ls{1,2}.gamma
//   encoder.layer.N.mlp.{fc1,fc2} (or the SwiGLU FFN's weights_in / weights_out) -> blocks.N.mlp.{fc1,fc2}
//   encoder.layer.N.norm{1,2} -> blocks.N.norm{1,2}, layernorm -> norm
// embeddings.mask_token (used in pre-training only) is dropped; other keys
// pass unchanged, so a strict load names them. A query/key/value without its
// two siblings is an error naming it.
StateDict dinov2_hf_to_timm(StateDict state);

// A checkpoint (keys already remapped) in the model's own names and shapes:
// hf_dinov2 keys converted (the model then takes the checkpoint's position
// grid, as Dinov2Model interpolates from it per input); a timm pos_embed of
// another grid resampled to the model's (timm's checkpoint filter).
StateDict adapt_vit_checkpoint(StateDict state, VisionTransformerImpl& model);

// load_weights for the ViT, through adapt_vit_checkpoint.
LoadReport load_vit_weights(VisionTransformerImpl& model, const std::vector<std::string>& files,
                            const KeyMapping& mapping = {}, bool strict = true);
// apply_weights for the ViT (what read_weights read from `files`), through adapt_vit_checkpoint.
LoadReport apply_vit_weights(VisionTransformerImpl& model, StateDict state, const std::vector<std::string>& files,
                             bool strict = true);

}  // namespace tessera::models
