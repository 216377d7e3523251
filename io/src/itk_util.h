// Private glue between ITK images and tessera::io::Volume (never in a public
// header, so users of tessera_io need no ITK headers).
#pragma once

#include <itkImage.h>
#include <itkImageRegionConstIterator.h>
#include <itkMacro.h>

#include <cstring>
#include <stdexcept>
#include <string>

#include "tessera/io/volume.h"

namespace tessera::io::detail {

// Registers only the IO factories we build for (NIfTI, NRRD, MetaImage,
// GDCM) once per process; we do not rely on ITK_USE_FILE's generated
// auto-registration so the list of formats stays explicit.
void register_itk_io_factories();

// ITK exception text spans several lines with source locations; the CLI
// wants one line, so keep the description and join its lines.
std::string one_line(const std::string& text);
std::string describe(const itk::ExceptionObject& e);

template <class T> using Image3 = itk::Image<T, 3>;

template <class T> Volume volume_from_itk(const Image3<T>* img, const std::string& source) {
  Volume v;
  v.source = source;
  v.pixel_type = pixel_type_of<T>();
  const auto region = img->GetLargestPossibleRegion();
  for (unsigned a = 0; a < 3; ++a) {
    v.geometry.size[a] = static_cast<std::int64_t>(region.GetSize()[a]);
    v.geometry.spacing[a] = img->GetSpacing()[a];
    v.geometry.origin[a] = img->GetOrigin()[a];
    for (unsigned c = 0; c < 3; ++c) v.geometry.direction[a][c] = img->GetDirection()[a][c];
  }
  const std::size_t n = static_cast<std::size_t>(v.geometry.voxel_count());
  v.bytes.resize(n * sizeof(T));
  std::memcpy(v.bytes.data(), img->GetBufferPointer(), n * sizeof(T));
  return v;
}

template <class T> typename Image3<T>::Pointer itk_from_volume(const Volume& v) {
  auto img = Image3<T>::New();
  typename Image3<T>::RegionType region;
  typename Image3<T>::SpacingType spacing;
  typename Image3<T>::PointType origin;
  typename Image3<T>::DirectionType direction;
  for (unsigned a = 0; a < 3; ++a) {
    region.SetSize(a, static_cast<itk::SizeValueType>(v.geometry.size[a]));
    region.SetIndex(a, 0);
    spacing[a] = v.geometry.spacing[a];
    origin[a] = v.geometry.origin[a];
    for (unsigned c = 0; c < 3; ++c) direction[a][c] = v.geometry.direction[a][c];
  }
  img->SetRegions(region);
  img->SetSpacing(spacing);
  img->SetOrigin(origin);
  img->SetDirection(direction);
  img->Allocate();
  std::memcpy(img->GetBufferPointer(), v.data<T>(), v.bytes.size());
  return img;
}

}  // namespace tessera::io::detail
