// Image/label pairs for segmentation training, preprocessed once, the way
// `tessera segment` preprocesses at inference (so the trained model sees the
// same numbers there): reorient to RAS -> resample to the configured spacing
// (image trilinear, labels nearest) -> CT window to [0, 1] or z-score.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "tessera/io/volume.h"
#include "tessera/train/train_config.h"

namespace tessera::train {

struct SegCase {
  std::string name;
  at::Tensor image;       // float32 [1, X, Y, Z] (RAS, preprocessed)
  at::Tensor label;       // uint8 [X, Y, Z], same grid
  at::Tensor foreground;  // int64 flat indices of labelled voxels (for foreground-centred crops)
};

// Preprocesses one pair; throws naming `name` when the two grids disagree or
// a label exceeds `num_classes - 1`.
SegCase preprocess_case(const std::string& name, const io::Volume& image, const io::Volume& label,
                        const PreprocessConfig& pre, int64_t num_classes);

// Loads a split (folder, csv or phantom). Files are read with tessera::io
// (NIfTI, NRRD, MetaImage, DICOM folders), so a build without ITK can still
// train on phantoms. `progress(done, total)` is called after each case.
std::vector<SegCase> load_split(const DataSplit& split, const PreprocessConfig& pre, int64_t num_classes,
                                const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace tessera::train
