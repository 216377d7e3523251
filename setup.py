"""The `tessera` Python package: Tessera's attention op (torch.ops.tessera.*) built with
torch.utils.cpp_extension against the torch of this environment, from the same attention/
sources CMake builds (this file lists no sources of its own).

    pip install --no-build-isolation .

CUDA kernels are built when this torch has CUDA and nvcc is found (CUDA_HOME); otherwise
the CPU path alone. Build options (environment): TESSERA_CUDA_ARCHS, the CUDA architectures
(default "80;90a": sm_90a holds the Hopper kernels); MAX_JOBS, parallel compile jobs.
"""
import glob
import os
import re
import subprocess

import torch
from setuptools import setup
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension

ROOT = os.path.dirname(os.path.abspath(__file__))
A = "attention"


def rel(pattern):
    return sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, pattern), recursive=True))


def version():
    text = open(os.path.join(ROOT, "CMakeLists.txt")).read()
    return re.search(r"project\(tessera VERSION ([0-9.]+)", text).group(1)


CXX_FLAGS = ["-O3", "-std=c++17", "-fopenmp", "-Wno-unused-parameter", "-Wno-psabi"]
INCLUDES = [os.path.join(ROOT, A, "include"), os.path.join(ROOT, A), os.path.join(ROOT, A, "cuda"),
            os.path.join(ROOT, A, "torch", "include")]


def shared_cxx_runtime_flags():
    """As cmake/SharedCxxRuntime.cmake: a GCC without a libstdc++.so to link (a relocated toolchain)
    would embed libstdc++.a into the op, whose second C++ runtime crashes inside torch processes."""
    cxx = os.environ.get("CXX", "c++")
    try:
        found = subprocess.run([cxx, "-print-file-name=libstdc++.so"], capture_output=True, text=True,
                               check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return []
    return [] if os.path.isabs(found) else ["-nostdlib++", "-l:libstdc++.so.6"]


def cuda_archs():
    if torch.version.cuda is None or CUDA_HOME is None or not os.path.exists(os.path.join(CUDA_HOME, "bin", "nvcc")):
        return []
    return [a for a in os.environ.get("TESSERA_CUDA_ARCHS", "80;90a").replace(",", ";").split(";") if a]


def extension():
    # The CPU kernels (cpu/kernels_<isa>.cpp) name their instruction sets in target pragmas: no per-file flags.
    sources = rel(f"{A}/src/*.cpp") + rel(f"{A}/cpu/*.cpp") + rel(f"{A}/torch/*.cpp")
    archs = cuda_archs()
    macros = []
    link = ["-fopenmp"] + shared_cxx_runtime_flags()
    if not archs:
        return CppExtension("tessera._C", sources, include_dirs=INCLUDES, extra_compile_args=CXX_FLAGS,
                            extra_link_args=link)
    macros = [("TESSERA_WITH_CUDA", "1"), ("TESSERA_TORCH_CUDA", "1")]
    if "90a" in archs:
        macros.append(("TESSERA_SM90A", "1"))
    nvcc = ["-O3", "-std=c++17", "--expt-relaxed-constexpr", "-lineinfo",
            # torch's defaults hide the half / bfloat16 operators the kernels use
            "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__", "-U__CUDA_NO_HALF2_OPERATORS__",
            "-U__CUDA_NO_BFLOAT16_CONVERSIONS__"]
    for a in archs:
        nvcc += ["-gencode", f"arch=compute_{a},code=sm_{a}"]
    return CUDAExtension("tessera._C", sources + rel(f"{A}/cuda/**/*.cu"), include_dirs=INCLUDES, define_macros=macros,
                         extra_compile_args={"cxx": CXX_FLAGS, "nvcc": nvcc}, extra_link_args=link)


setup(
    name="tessera",
    version=version(),
    description="Exact fused tiled attention (CPU and CUDA) for PyTorch, with Swin bias gradients and varlen",
    package_dir={"": "python"},
    packages=["tessera"],
    ext_modules=[extension()],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
    options={"build": {"build_base": "build/python"}},
    python_requires=">=3.9",
    install_requires=["torch"],
    zip_safe=False,
)
