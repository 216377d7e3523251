// Entry points of the CUDA backend, called by src/attention.cpp after
// validate(). Plain C++: no CUDA types leak out of attention/cuda/.
#pragma once

#include <cstddef>
#include <string>

#include "tessera/attention/params.h"

namespace tessera::attention::cuda {

void forward(const AttentionParams& p);
void backward(const AttentionParams& p);
size_t backward_workspace_bytes(const AttentionParams& p);
bool available();
std::string device_name(int device);

}  // namespace tessera::attention::cuda
