#include "tessera/train/pretrained.h"

#include <stdexcept>

#include "tessera/models/safetensors.h"

namespace tessera::train {

models::LoadReport load_pretrained_encoder(models::SwinUNETRImpl& net, const std::string& path, const std::string& keys) {
  models::KeyMapping km;
  if (keys == "ssl") km = models::swin_unetr_ssl_key_mapping();
  else if (keys == "research") km = models::swin_unetr_research_key_mapping();
  else if (keys != "monai") throw std::invalid_argument("pretrained key layout must be monai, ssl or research, got " + keys);
  models::StateDict sd = models::remap_keys(models::safetensors::load(path), km);
  for (auto it = sd.begin(); it != sd.end();)
    it = it->first.rfind("swinViT.", 0) == 0 ? std::next(it) : sd.erase(it);
  if (sd.empty()) throw std::runtime_error(path + ": no swinViT.* encoder weights after the `" + keys + "` key mapping");
  models::LoadReport report;
  try {
    report = models::load_state_dict(net, sd, /*strict=*/false);
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
  if (!report.unexpected.empty()) throw std::runtime_error(path + ": encoder weights the model lacks: " + report.summary());
  return report;
}

}  // namespace tessera::train
