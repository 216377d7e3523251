# Sourced: carried_sources prints a digest of the sources the GPU test and bench binaries are built from
# (attention/, tests/gpu/, bench/attention_cuda_bench.cu), so that binaries built elsewhere are used only on the
# tree they were built from (make_carried_binaries.sh writes it beside them, gpu_check.sh compares);
# unpack_carried DIR unpacks them (.gpu_carry/bin/binaries.tar.xz) into DIR; untar_xz ARCHIVE DIR any .tar.xz.
carried_sources() {
  find attention tests/gpu bench/attention_cuda_bench.cu -type f \( -name '*.cu' -o -name '*.cuh' -o -name '*.h' \
    -o -name '*.cpp' -o -name '*.inc' -o -name 'CMakeLists.txt' \) | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16
}
# tar needs the xz program, which the GPU machine may lack; Python's lzma does the same.
untar_xz() {
  mkdir -p "$2"
  tar -C "$2" -xJf "$1" 2>/dev/null ||
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter="tar")' "$1" "$2"
}
unpack_carried() {
  [ -f .gpu_carry/bin/binaries.tar.xz ] && untar_xz .gpu_carry/bin/binaries.tar.xz "$1"
}
