#include "tessera/io/features_h5.h"

#include <hdf5.h>

#include <algorithm>
#include <stdexcept>

#include "tessera/io/atomic_file.h"

namespace tessera::io {
namespace {

// HDF5 prints its own error stack to stderr by default; we report one line
// ourselves, so silence it while we work and restore the caller's handler.
class QuietHdf5 {
 public:
  QuietHdf5() {
    H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~QuietHdf5() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

// Closes any HDF5 identifier with the right function.
class Id {
 public:
  Id(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Id() {
    if (id_ >= 0) close_(id_);
  }
  Id(const Id&) = delete;
  Id& operator=(const Id&) = delete;
  operator hid_t() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

void need(bool ok, const std::string& path, const std::string& what) {
  if (!ok) throw std::runtime_error(path + ": " + what);
}

void attr_i64(hid_t obj, const char* name, std::int64_t v, const std::string& path) {
  Id space(H5Screate(H5S_SCALAR), H5Sclose);
  Id a(H5Acreate2(obj, name, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  need(a.ok() && H5Awrite(a, H5T_NATIVE_INT64, &v) >= 0, path, std::string("cannot write attribute ") + name);
}

void attr_f64(hid_t obj, const char* name, double v, const std::string& path) {
  Id space(H5Screate(H5S_SCALAR), H5Sclose);
  Id a(H5Acreate2(obj, name, H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  need(a.ok() && H5Awrite(a, H5T_NATIVE_DOUBLE, &v) >= 0, path, std::string("cannot write attribute ") + name);
}

void attr_str(hid_t obj, const char* name, const std::string& v, const std::string& path) {
  // Variable-length UTF-8 string, what h5py writes for a Python str.
  Id type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type, H5T_VARIABLE);
  H5Tset_cset(type, H5T_CSET_UTF8);
  Id space(H5Screate(H5S_SCALAR), H5Sclose);
  Id a(H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  const char* p = v.c_str();
  need(a.ok() && H5Awrite(a, type, &p) >= 0, path, std::string("cannot write attribute ") + name);
}

// Two-dimensional, chunked, extendable along rows like Trident's datasets.
void write_2d(hid_t file, const char* name, hid_t file_type, hid_t mem_type, const void* data, std::int64_t rows,
              std::int64_t cols, const std::string& path) {
  const hsize_t dims[2] = {static_cast<hsize_t>(rows), static_cast<hsize_t>(cols)};
  const hsize_t maxdims[2] = {H5S_UNLIMITED, static_cast<hsize_t>(cols)};
  const hsize_t chunk[2] = {static_cast<hsize_t>(std::max<std::int64_t>(1, std::min<std::int64_t>(rows, 1024))),
                            static_cast<hsize_t>(cols)};
  Id space(H5Screate_simple(2, dims, maxdims), H5Sclose);
  Id dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  need(space.ok() && dcpl.ok() && H5Pset_chunk(dcpl, 2, chunk) >= 0, path, std::string("cannot lay out ") + name);
  Id ds(H5Dcreate2(file, name, file_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT), H5Dclose);
  need(ds.ok(), path, std::string("cannot create dataset ") + name);
  if (rows > 0) need(H5Dwrite(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0, path,
                     std::string("cannot write dataset ") + name);
}

std::int64_t read_i64_attr(hid_t obj, const char* name) {
  if (H5Aexists(obj, name) <= 0) return 0;
  Id a(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  std::int64_t v = 0;
  return a.ok() && H5Aread(a, H5T_NATIVE_INT64, &v) >= 0 ? v : 0;
}

double read_f64_attr(hid_t obj, const char* name) {
  if (H5Aexists(obj, name) <= 0) return 0;
  Id a(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  double v = 0;
  return a.ok() && H5Aread(a, H5T_NATIVE_DOUBLE, &v) >= 0 ? v : 0;
}

std::string read_str_attr(hid_t obj, const char* name) {
  if (H5Aexists(obj, name) <= 0) return "";
  Id a(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  Id ftype(H5Aget_type(a), H5Tclose);
  if (H5Tget_class(ftype) != H5T_STRING) return "";
  if (H5Tis_variable_str(ftype) > 0) {
    // Read with the file's own type: HDF5 will not convert UTF-8 to ASCII.
    char* p = nullptr;
    if (H5Aread(a, ftype, &p) < 0 || !p) return "";
    std::string s = p;
    H5free_memory(p);
    return s;
  }
  std::string s(H5Tget_size(ftype), '\0');
  if (H5Aread(a, ftype, s.data()) < 0) return "";
  return s.substr(0, s.find('\0'));
}

}  // namespace

void write_patch_features(const std::string& path, const PatchFeatures& f) {
  if (f.n < 0 || f.dim <= 0) throw std::invalid_argument(path + ": features need n >= 0 and dim > 0");
  if (f.coords.size() != static_cast<std::size_t>(f.n * 2))
    throw std::invalid_argument(path + ": coords hold " + std::to_string(f.coords.size()) + " values, expected n*2 = " +
                                std::to_string(f.n * 2));
  if (f.features.size() != static_cast<std::size_t>(f.n * f.dim))
    throw std::invalid_argument(path + ": features hold " + std::to_string(f.features.size()) +
                                " values, expected n*dim = " + std::to_string(f.n * f.dim));
  if (f.patch_size <= 0 || f.patch_size_level0 <= 0)
    throw std::invalid_argument(path + ": patch_size and patch_size_level0 must be positive");
  QuietHdf5 quiet;
  write_atomically(path, [&](const std::string& tmp) {
    Id file(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    need(file.ok(), path, "cannot create HDF5 file");
    write_2d(file, "coords", H5T_STD_I64LE, H5T_NATIVE_INT64, f.coords.data(), f.n, 2, path);
    write_2d(file, "features", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, f.features.data(), f.n, f.dim, path);
    {
      Id coords(H5Dopen2(file, "coords", H5P_DEFAULT), H5Dclose);
      attr_i64(coords, "patch_size", f.patch_size, path);
      attr_i64(coords, "patch_size_level0", f.patch_size_level0, path);
      attr_i64(coords, "level0_width", f.level0_width, path);
      attr_i64(coords, "level0_height", f.level0_height, path);
      attr_f64(coords, "target_mpp", f.target_mpp, path);
      attr_f64(coords, "level0_mpp", f.level0_mpp, path);
      if (f.target_mpp > 0) attr_f64(coords, "target_magnification", 10.0 / f.target_mpp, path);
      if (f.level0_mpp > 0) attr_f64(coords, "level0_magnification", 10.0 / f.level0_mpp, path);
      attr_str(coords, "name", f.name, path);
      Id features(H5Dopen2(file, "features", H5P_DEFAULT), H5Dclose);
      attr_str(features, "encoder", f.encoder, path);
      attr_str(features, "name", f.name, path);
    }
    need(H5Fflush(file, H5F_SCOPE_GLOBAL) >= 0, path, "cannot flush HDF5 file");
  });
}

PatchFeatures read_patch_features(const std::string& path) {
  QuietHdf5 quiet;
  if (H5Fis_hdf5(path.c_str()) <= 0) throw std::runtime_error(path + ": not a readable HDF5 file");
  Id file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  need(file.ok(), path, "cannot open HDF5 file");
  need(H5Lexists(file, "coords", H5P_DEFAULT) > 0, path, "no 'coords' dataset");
  need(H5Lexists(file, "features", H5P_DEFAULT) > 0, path, "no 'features' dataset");
  Id coords(H5Dopen2(file, "coords", H5P_DEFAULT), H5Dclose);
  Id feats(H5Dopen2(file, "features", H5P_DEFAULT), H5Dclose);
  need(coords.ok() && feats.ok(), path, "cannot open datasets");
  auto shape = [&](hid_t ds, const char* name) {
    Id space(H5Dget_space(ds), H5Sclose);
    hsize_t dims[2] = {0, 0};
    need(H5Sget_simple_extent_ndims(space) == 2, path, std::string("'") + name + "' is not two-dimensional");
    H5Sget_simple_extent_dims(space, dims, nullptr);
    return std::pair<std::int64_t, std::int64_t>(static_cast<std::int64_t>(dims[0]), static_cast<std::int64_t>(dims[1]));
  };
  const auto [cn, cw] = shape(coords, "coords");
  const auto [fn, fd] = shape(feats, "features");
  need(cw == 2, path, "'coords' must have 2 columns, has " + std::to_string(cw));
  need(cn == fn, path, "'coords' has " + std::to_string(cn) + " rows but 'features' " + std::to_string(fn));
  PatchFeatures f;
  f.n = cn;
  f.dim = fd;
  f.coords.resize(static_cast<std::size_t>(cn * 2));
  f.features.resize(static_cast<std::size_t>(fn * fd));
  // HDF5 converts int32 (CLAM) and float16/64 on read into our types.
  if (cn > 0) {
    need(H5Dread(coords, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, f.coords.data()) >= 0, path,
         "cannot read 'coords'");
    need(H5Dread(feats, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, f.features.data()) >= 0, path,
         "cannot read 'features'");
  }
  f.patch_size = read_i64_attr(coords, "patch_size");
  f.patch_size_level0 = read_i64_attr(coords, "patch_size_level0");
  f.level0_width = read_i64_attr(coords, "level0_width");
  f.level0_height = read_i64_attr(coords, "level0_height");
  f.target_mpp = read_f64_attr(coords, "target_mpp");
  f.level0_mpp = read_f64_attr(coords, "level0_mpp");
  f.name = read_str_attr(coords, "name");
  f.encoder = read_str_attr(feats, "encoder");
  return f;
}

}  // namespace tessera::io
