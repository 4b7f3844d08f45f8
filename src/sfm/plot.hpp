// A picture of the matches of one image pair (superpoint-rt plot-matches): the two images side by side at one height,
// a line between the keypoints of every match. Lines are coloured by the match score from red (0) to green (1), as
// hloc's visualization.cm_RdGn; with a COLMAP database that has been verified (two_view_geometries), by the
// verification instead: the inliers green, the matches it rejected red.
//
// Coordinates: keypoints in hloc's convention (the centre of the top-left pixel is (0, 0)), drawn on the image as the
// feature file's image_size says it was read: the stored pixels, or the EXIF-rotated ones when the features were
// extracted with the orientation applied.
//
// Thread-safety: reentrant (the HDF5 reads take the library's HDF5 lock).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace superpoint_rt::sfm {

struct MatchPlotOptions {
  std::string features, matches;  // hloc feature and match files
  std::string images;             // the image folder (names as in the feature file)
  std::string name0, name1;       // the pair
  std::string output;             // PNG
  std::string database;           // optional: a verified COLMAP database (colour by its inliers)
  int height = 0;                 // output height in pixels (0: the smaller image's height, at most kDefaultHeight)
  std::size_t max_lines = 0;      // draw at most this many matches, evenly spread over the list (0: all)
};
inline constexpr int kMaxPlotHeight = 4096;
inline constexpr int kDefaultPlotHeight = 900;
/// The largest picture written (width x height).
inline constexpr std::int64_t kMaxPlotPixels = std::int64_t{64} << 20;

struct MatchPlotReport {
  std::size_t matches = 0;  // matches of the pair
  std::size_t drawn = 0;    // lines drawn (max_lines)
  long inliers = -1;        // verified inliers among the matches (-1 without a database)
  int width = 0, height = 0;
};

/// Draws and writes the picture. Errors (superpoint_rt::Error): NotFound for a missing image, pair or database row,
/// InvalidArgument for a height out of range, a picture over kMaxPlotPixels, an image whose size is not the feature
/// file's image_size (nor its transpose), a database whose inliers are not indices of the keypoints; Io for files.
MatchPlotReport plot_matches(const MatchPlotOptions& options);

}  // namespace superpoint_rt::sfm
