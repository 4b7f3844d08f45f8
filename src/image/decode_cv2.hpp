// Decoding exactly as OpenCV 4.6's cv2.imread / cv::imdecode does with IMREAD_GRAYSCALE or IMREAD_COLOR: the decode
// step of the hloc and LightGlue presets (../shared/SPEC.md §2b), whose tools read images with cv2.imread.
//
// Per format, what OpenCV 4.6 does and so what we do (tests/image/test_decode_cv2.py compares with cv2 itself):
//   JPEG  libjpeg-turbo with OpenCV's settings: Grayscale asks libjpeg for JCS_GRAYSCALE (the Y plane of a YCbCr
//         file, no colour conversion), Color for RGB (OpenCV's JCS_EXT_BGR, same values); 4-component (CMYK) files
//         are decoded as JCS_CMYK and converted with OpenCV's icvCvt_CMYK2BGR / icvCvt_CMYK2Gray (utils.cpp).
//         EXIF orientation from the FIRST APP1 segment (after its 6-byte "Exif\0\0" header, whatever it holds).
//   PNG   libpng with the transformations OpenCV sets (strip_16, strip_alpha, palette_to_rgb, expand gray 1/2/4-bit,
//         gray_to_rgb for Color, rgb_to_gray(error_action 1, 0.299, 0.587) for Grayscale), png_read_end, and EXIF
//         orientation from an eXIf chunk (before or after the image data).
//   TIFF  the pixels of our decoder (8-bit RGB/gray/palette: what libtiff's RGBA reader gives), oriented by the
//         file's own IFD0 Orientation tag: OpenCV 4.6's TIFF decoder does that itself, with or without
//         IMREAD_IGNORE_ORIENTATION.
//   BMP, WebP, PNM  the pixels of our decoders; no orientation (OpenCV has none for them). KNOWN DIFFERENCE, not yet
//         fixed: a PGM / PPM with maxval > 255 (16-bit samples): OpenCV keeps the high byte of the raw sample
//         (maxval 1000: 300 -> 1), our decoder scales to 0..255 as Pillow (300 -> 76).
//   GIF   OpenCV 4.6 cannot read GIF (cv2.imread returns None). Users of these presets expect a GIF to work as in
//         the other paths, so we decode its first frame with our decoder and convert it as below.
// Conversions for the formats OpenCV decodes itself: Grayscale from RGB is imgcodecs' 14-bit fixed point
// (R 4899 + G 9617 + B 1868 + 8192) >> 14 (icvCvt_BGR2Gray: BMP, TIFF, PNM, and GIF by our choice), except WebP,
// whose reader calls cvtColor(BGR2GRAY): 15-bit (R 9798 + G 19235 + B 3735 + 16384) >> 15. Color from gray
// replicates the plane.
// The orientation (values 1-8, exif.hpp) is applied after decoding, as ApplyExifOrientation, unless the caller asks
// for IMREAD_IGNORE_ORIENTATION (Cv2Orientation::Ignore: hloc's read_image since its #373), which imread honours for
// JPEG and PNG (TIFF: see above).
//
// Limits and errors are those of decode_image (image.hpp, docs/LIMITS.md): max_pixels is checked against the
// file's (unrotated) size before pixel memory is allocated (TooLarge), truncated / corrupt data is a DecodeError
// naming the input, unknown formats are UnsupportedFormat. DIFFERENCE from OpenCV: a truncated JPEG is refused (as
// decode_image refuses it) where OpenCV returns the decoded part over a gray rest; we never hand out invented pixels.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "superpoint_rt/image.hpp"

namespace superpoint_rt::image {

enum class Cv2Read { Grayscale, Color };
/// Apply: OpenCV's default (the EXIF orientation is applied). Ignore: with IMREAD_IGNORE_ORIENTATION (JPEG and PNG
/// then keep their stored pixels; a TIFF is still oriented, as OpenCV's TIFF decoder does).
enum class Cv2Orientation { Apply, Ignore };

/// What OpenCV 4.6 cv::imdecode(bytes, IMREAD_GRAYSCALE / IMREAD_COLOR [| IMREAD_IGNORE_ORIENTATION]) returns, which
/// is what cv2.imread returns for a file with these bytes. Grayscale -> PixelFormat::Gray u8; Color ->
/// PixelFormat::RGB u8 (OpenCV's BGR with the channels swapped, as hloc's / LightGlue's image[..., ::-1]).
Image decode_image_cv2(std::span<const std::uint8_t> bytes, const std::string& name, std::int64_t max_pixels,
                       Cv2Read mode, Cv2Orientation orientation);

// The per-format pieces (decode_jpeg.cpp, decode_png.cpp): the image as OpenCV decodes it, BEFORE the orientation,
// which is returned in *orientation (exif_orientation_cv2's value; 0 when there is none). Same errors as decode_jpeg /
// decode_png.
Image decode_jpeg_cv2(std::span<const std::uint8_t> bytes, const std::string& name, std::int64_t max_pixels,
                      Cv2Read mode, int* orientation);
Image decode_png_cv2(std::span<const std::uint8_t> bytes, const std::string& name, std::int64_t max_pixels,
                     Cv2Read mode, int* orientation);

/// OpenCV's 14-bit fixed-point luma of one RGB pixel: imgcodecs' own converters (utils.cpp icvCvt_BGR2Gray_8u_C3C1R,
/// icvCvt_BGRA2Gray, icvCvt_CMYK2Gray: cR, cG, cB with SCALE 14), used by the JPEG (CMYK), BMP, TIFF and PNM readers.
constexpr std::uint8_t cv2_gray(unsigned r, unsigned g, unsigned b) noexcept {
  return static_cast<std::uint8_t>((r * 4899u + g * 9617u + b * 1868u + 8192u) >> 14);
}

/// cvtColor(COLOR_BGR2GRAY)'s 15-bit fixed-point luma (imgproc color_rgb: R2Y 9798, G2Y 19235, B2Y 3735, shift 15),
/// which the WebP reader calls instead; it differs from cv2_gray by 1 for some pixels.
constexpr std::uint8_t cv2_gray15(unsigned r, unsigned g, unsigned b) noexcept {
  return static_cast<std::uint8_t>((r * 9798u + g * 19235u + b * 3735u + 16384u) >> 15);
}

}  // namespace superpoint_rt::image
