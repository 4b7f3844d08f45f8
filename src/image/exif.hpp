// EXIF orientation as OpenCV 4.6's imgcodecs reads and applies it (exif.cpp ExifReader, loadsave.cpp
// ApplyExifOrientation), for the cv2-exact decoders (decode_cv2.hpp).
#pragma once

#include <cstdint>
#include <span>

#include "superpoint_rt/image.hpp"

namespace superpoint_rt::image {

/// The Orientation (0x0112) value OpenCV 4.6's ExifReader::parseExif finds in `tiff` (a TIFF header and IFD0: what
/// follows "Exif\0\0" in a JPEG APP1 segment, a PNG eXIf chunk, a TIFF file), or 0 when it finds none.
/// Same rules as OpenCV, quirks included: byte order "II" little-endian, anything else big-endian; the tag mark must
/// be 42; only IFD0 is read; the value is the 16-bit field at entry offset 8 whatever its type or count; the FIRST
/// Orientation entry counts; entries are parsed in order and the parse stops at the first entry OpenCV fails to
/// read (a string, rational or value out of bounds), so an Orientation entry after such an entry is not seen.
/// Every read is bounds-checked first: never reads outside `tiff`, whatever it holds.
std::uint16_t exif_orientation_cv2(std::span<const std::uint8_t> tiff) noexcept;

/// `im` transformed as OpenCV's ApplyExifOrientation does for `orientation` (1 none, 2 flip horizontally, 3 rotate
/// 180, 4 flip vertically, 5 transpose, 6 rotate 90 clockwise, 7 transverse, 8 rotate 90 counter-clockwise); any
/// other value leaves the image as it is. One pass over the pixels (none for 1): 2-4 in place, 5-8 into a second
/// buffer of the same size (the memory of a transposed result is twice its size while it is made).
Image apply_exif_orientation(Image im, int orientation);

}  // namespace superpoint_rt::image
