// `tessera convert IN... -o OUT.safetensors`: any checkpoint load_checkpoint
// reads (a PyTorch .pt/.pth/.bin/.ckpt, safetensors shards or an index) as one
// safetensors file, optionally cast to fp16/bf16/fp32 (floating tensors only).
// Written atomically, so bad input leaves no output; what was found (format,
// sub-dictionary, prefix, dtypes, skipped entries) is printed, or --json.
#include <nlohmann/json.hpp>

#include <iostream>
#include <map>

#include "commands.h"
#include "tessera/models/checkpoint.h"

namespace tessera::apps {

namespace {

namespace tm = tessera::models;
using json = nlohmann::ordered_json;

struct ConvertArgs {
  std::vector<std::string> inputs;
  std::string output, dtype, key;
  bool keep_prefix = false, json = false;
};

torch::ScalarType target_dtype(const std::string& name) {
  return name == "fp16" ? torch::kHalf : name == "bf16" ? torch::kBFloat16 : torch::kFloat;
}

json summarise(const ConvertArgs& a, const tm::CheckpointReport& r, const tm::StateDict& out) {
  std::map<std::string, std::size_t> dtypes;
  uint64_t elements = 0, bytes = 0;
  for (const auto& [name, t] : out) {
    ++dtypes[tm::safetensors::dtype_name(tm::safetensors::from_scalar_type(t.scalar_type(), name))];
    elements += static_cast<uint64_t>(t.numel());
    bytes += static_cast<uint64_t>(t.numel()) * t.element_size();
  }
  return {{"inputs", r.files},
          {"output", a.output},
          {"format", tm::checkpoint_format_name(r.format)},
          {"key", r.key},
          {"key_from_unwrap", r.key_from_unwrap},
          {"prefix_stripped", r.prefix},
          {"tensors", out.size()},
          {"elements", elements},
          {"bytes", bytes},
          {"dtypes", dtypes},
          {"skipped", r.skipped}};
}

void print_text(const json& j) {
  std::cout << "format      " << j["format"].get<std::string>() << " (" << j["inputs"].size() << " file"
            << (j["inputs"].size() == 1 ? "" : "s") << ")\n";
  if (!j["key"].get<std::string>().empty())
    std::cout << "took        '" << j["key"].get<std::string>() << "'"
              << (j["key_from_unwrap"].get<bool>() ? " (the one wrapper holding tensors)" : "") << "\n";
  if (!j["prefix_stripped"].get<std::string>().empty())
    std::cout << "stripped    '" << j["prefix_stripped"].get<std::string>() << "' from every name\n";
  std::cout << "tensors     " << j["tensors"].get<std::size_t>() << " (" << j["elements"].get<uint64_t>()
            << " elements, " << j["bytes"].get<uint64_t>() << " bytes:";
  for (const auto& [dtype, n] : j["dtypes"].items()) std::cout << " " << n.get<std::size_t>() << " " << dtype;
  std::cout << ")\n";
  const auto& skipped = j["skipped"];
  if (!skipped.empty()) {
    std::cout << "skipped     " << skipped.size() << ":";
    for (std::size_t i = 0; i < skipped.size() && i < 8; ++i) std::cout << (i ? ", " : " ") << skipped[i].get<std::string>();
    std::cout << (skipped.size() > 8 ? ", ..." : "") << "\n";
  }
  std::cout << "wrote       " << j["output"].get<std::string>() << "\n";
}

}  // namespace

void add_convert(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("convert", "Convert a PyTorch or safetensors checkpoint to one safetensors file");
  auto a = std::make_shared<ConvertArgs>();
  cmd->add_option("input", a->inputs, "Checkpoint: .pt/.pth/.bin/.ckpt (torch.save zip), .safetensors shards or an index")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", a->output, "Output .safetensors (written atomically)")->required();
  cmd->add_option("--dtype", a->dtype, "Cast floating tensors to fp16, bf16 or fp32 (default: as stored)")
      ->check(CLI::IsMember({"fp16", "bf16", "fp32"}));
  cmd->add_option("--key", a->key, "Sub-dictionary to take, '.' for nesting (default: the one wrapper such as "
                                   "state_dict or model, else everything)");
  cmd->add_flag("--keep-prefix", a->keep_prefix, "Keep a common module./model./... prefix on every name");
  cmd->add_flag("--json", a->json, "Print what was found as one JSON object");
  cmd->footer("Examples:\n"
              "  tessera convert pytorch_model.bin -o model.safetensors\n"
              "  tessera convert slide_encoder.pth -o gigapath_slide.safetensors --key model --dtype fp32\n"
              "  tessera convert model.safetensors.index.json -o model.safetensors --dtype bf16");
  cmd->callback([a, &exit_code] {
    tm::CheckpointOptions o;
    o.key = a->key;
    o.strip_prefix = !a->keep_prefix;
    tm::CheckpointReport report;
    tm::StateDict sd = tm::load_checkpoint(a->inputs, o, &report);
    if (!a->dtype.empty())
      for (auto& [name, t] : sd)
        if (t.is_floating_point()) t = t.to(target_dtype(a->dtype));
    tm::safetensors::save(a->output, sd, {{"format", "pt"}});
    const json j = summarise(*a, report, sd);
    if (a->json) std::cout << j.dump(2) << "\n";
    else print_text(j);
    exit_code = kOk;
  });
}

}  // namespace tessera::apps
