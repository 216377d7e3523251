# Sourced: carried_sources prints a digest of the sources the GPU test and bench binaries are built from
# (attention/, tests/gpu/, bench/attention_cuda_bench.cu), so that binaries built elsewhere are used only on the
# tree they were built from (make_carried_binaries.sh writes it beside them, gpu_check.sh compares).
carried_sources() {
  find attention tests/gpu bench/attention_cuda_bench.cu -type f \( -name '*.cu' -o -name '*.cuh' -o -name '*.h' \
    -o -name '*.cpp' -o -name '*.inc' -o -name 'CMakeLists.txt' \) | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16
}
