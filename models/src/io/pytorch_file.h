// PyTorch's zip checkpoints (torch.save since 1.6), the part of
// load_checkpoint that knows their layout: <name>/data.pkl (read by the
// restricted pickle reader), <name>/data/<key> storage records,
// <name>/byteorder, <name>/version. Private to models/.
#pragma once

#include <string>
#include <vector>

#include "tessera/models/checkpoint.h"
#include "tessera/models/zip_archive.h"

namespace tessera::models::pytorch {

// TorchScript archives (torch.jit.save) hold code/ and constants.pkl beside data.pkl.
bool is_torchscript(const std::vector<zip::Entry>& entries);
std::vector<zip::Entry> read_entries(const std::string& path);

// The tensors of one archive, picked by options.key / options.unwrap (no prefix stripping here).
StateDict load(const std::string& path, const CheckpointOptions& options, CheckpointReport* report);

}  // namespace tessera::models::pytorch
