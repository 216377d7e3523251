"""Which libraries travel to the GPU machine, and how (see tools/gpu/make_app_carry.sh).

Every library the `tessera` CLI loads falls in one of four groups:
  SYSTEM  the GPU machine has it (Ubuntu 24.04 with CUDA's compilers and Python): same soname as
          Debian 12, a newer version. Never carried.
  SKIP    not from Debian: LibTorch (the device's torch wheel), the CUDA runtime (the device's toolkit),
          Tessera's own, yaml-cpp (carried by make_gpu_carry.sh), spdlog/fmt (the device build turns spdlog off).
  STUBS   linked but never called on Tessera's paths: carried as stubs (stubs.py says why).
  real    everything else reachable through NEEDED from the CLI: carried from Debian's packages.
"""
import re

ARCH = "x86_64-linux-gnu"

SYSTEM = {
    # C and C++ runtimes
    "libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "libresolv.so.2",
    "ld-linux-x86-64.so.2", "libstdc++.so.6", "libgcc_s.so.1", "libgomp.so.1", "libatomic.so.1",
    # what Ubuntu's python3 and base system link
    "libz.so.1", "liblzma.so.5", "libzstd.so.1", "libbz2.so.1.0", "libexpat.so.1", "libffi.so.8",
    "libsqlite3.so.0", "libcrypto.so.3", "libssl.so.3", "libuuid.so.1", "libmount.so.1",
    "libblkid.so.1", "libselinux.so.1", "libpcre2-8.so.0",
}

SKIP = re.compile(r"^lib(torch|c10|cudart|tessera|yaml-cpp|spdlog|fmt)[._-]")

STUBS = {
    # FFmpeg: external codecs (Tessera decodes with FFmpeg's own H.264/MPEG-4/AAC/... decoders and
    # writes its sample video with the native mpeg4 encoder; not libx264, with which `video --report`
    # re-encodes for browsers), protocols, demuxer helpers, hardware
    "libaom.so.3", "libcodec2.so.1.0", "libdav1d.so.6", "libgsm.so.1", "libjxl.so.0.7", "libjxl_threads.so.0.7",
    "libmp3lame.so.0", "libopus.so.0", "librav1e.so.0", "libshine.so.3", "libspeex.so.1", "libSvtAv1Enc.so.1",
    "libtheoraenc.so.1", "libtheoradec.so.1", "libtwolame.so.0", "libvorbis.so.0", "libvorbisenc.so.2",
    "libvpx.so.7", "libx265.so.199", "libxvidcore.so.4", "libzvbi.so.0", "libsnappy.so.1",
    "librsvg-2.so.2", "libwebpmux.so.3", "libsoxr.so.0",
    "libopenmpt.so.0", "libchromaprint.so.1", "libbluray.so.2", "libgnutls.so.30",
    "librabbitmq.so.4", "librist.so.4", "libsrt-gnutls.so.1.5", "libssh-gcrypt.so.4", "libzmq.so.5",
    "libva.so.2", "libva-drm.so.2", "libva-x11.so.2", "libvdpau.so.1", "libmfx.so.1", "libOpenCL.so.1",
    "libdrm.so.2",
    # (not libgme: FFmpeg probes every file it opens with gme_identify_header and dereferences the
    # string it returns, which a stub's 0 would crash; the real one is 130 kB)
    # libxml2: FFmpeg's DASH/IMF demuxers and OpenSlide's XML-based vendors (Philips, Ventana),
    # not Aperio SVS or TIFF; Debian's needs ICU 72 (9 MB)
    "libxml2.so.2",
    # X11 and fonts: cairo (under OpenSlide) paints tiles into memory images only
    "libX11.so.6", "libxcb.so.1", "libxcb-render.so.0", "libxcb-shm.so.0", "libXrender.so.1", "libXext.so.6",
    "libfontconfig.so.1", "libfreetype.so.6",
    # OpenCV: GDAL and OpenEXR codecs, OpenGL interop, LAPACK (no cv::solve/SVD in Tessera)
    "libgdal.so.32", "libOpenEXR-3_1.so.30", "libGLX.so.0", "libblas.so.3", "liblapack.so.3",
    # HDF5's S3 driver (ROS3); the local build also links curl through HDF5's compiler wrapper
    "libcurl.so.4", "libcurl-gnutls.so.4",
}

# Headers, CMake configs, pkg-config files and link-time .so names for what io/CMakeLists.txt
# looks for; pkgconf because the GPU machine may have no pkg-config.
DEV_PACKAGES = [
    "libinsighttoolkit5-dev", "libgdcm-dev", "libopencv-dev", "libopencv-core-dev", "libopencv-imgproc-dev",
    "libopencv-imgcodecs-dev", "libavcodec-dev", "libavformat-dev", "libavutil-dev", "libswscale-dev",
    "libswresample-dev", "libhdf5-dev", "libopenslide-dev", "libtiff-dev", "zlib1g-dev", "zlib1g",
    "pkgconf-bin", "libpkgconf3",
]
# ITK's config loads its HDF5 module, which asks for HDF5's C++ library too (REQUIRED), though
# Tessera never links it.
EXTRA_ROOTS = ["libhdf5_serial_cpp.so.103"]
# ITKConfig.cmake loads every module's file, and those of ITKDCMTK and ITKMINC require DCMTK and
# libminc (find_package ... REQUIRED). Tessera uses neither module and they do not travel: the
# carried module files skip those calls.
DROP_FINDS = ["DCMTK", "LIBMINC"]
CMAKE_DIRS = ["usr/lib/cmake/ITK-5.2", f"usr/lib/{ARCH}/gdcm-3.0", f"usr/lib/{ARCH}/cmake/opencv4"]
PC_FILES = ["openslide", "libavformat", "libavcodec", "libswscale", "libavutil", "libswresample"]
TOOLS = ["usr/bin/pkgconf"]
# Libraries the build links by file but the machine provides at run time (ITK's targets name
# libz.so): the file travels under its full version name only, so the loader still takes the
# machine's own copy.
LINK_ONLY = ["libz.so"]
