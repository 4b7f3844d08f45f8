// superpoint-rt: a COLMAP database from hloc's feature, match and pair files, the import step of hloc's
// reconstruction.py (import_images + import_features + import_matches) without Python. COLMAP's geometric
// verification and mapper then run on it (pycolmap.verify_matches + pycolmap.incremental_mapping, or
// `colmap matches_importer` + `colmap mapper`); docs/SFM.md walks through the whole pipeline.
//
// The database is COLMAP 4's (src/colmap/scene/database_sqlite.cc, the schema pycolmap 4.x creates, user_version
// 4.2.1), written as COLMAP's own image reader and hloc's import write it:
//   - images: one per image of the feature file, image_id 1..N in sorted name order (COLMAP sorts the files it
//     imports), name = the feature file's name (the path relative to the image folder);
//   - cameras: SIMPLE_RADIAL (model 2), params [f, cx, cy, k] = [1.2 * max(W, H), W / 2, H / 2, 0] (COLMAP's
//     ImageReaderOptions default_focal_length_factor 1.2, Camera::CreateFromModelId), prior_focal_length 0; one per
//     image, or one shared by every image with `single_camera` (all images must then have the same size). COLMAP reads
//     a focal length from EXIF when the file has one; this export does not (see docs/SFM.md);
//   - rigs, frames: one rig per camera and one frame per image, as COLMAP 4's importer makes them;
//   - keypoints: (N, 2) float32, the stored keypoints + 0.5 (hloc's "COLMAP origin": COLMAP's pixel centres are at
//     +0.5), added in the stored type as numpy does (float16 files: the sum rounded to float16);
//   - matches: for each pair of the pair list (the first occurrence of an unordered pair), the (K, 2) uint32 indices
//     from hloc's get_matches (the entries of matches0 other than -1, optionally only those with a score above
//     min_match_score), under pair_id = id1 * 2147483647 + id2 with id1 < id2 (columns swapped when the pair's first
//     image has the larger id). Pairs of an image with itself are skipped;
//   - descriptors, two_view_geometries, pose_priors: empty (hloc's import writes no descriptors; verification writes
//     two_view_geometries).
// Image sizes come from the feature file's image_size; with `images`, each file must exist there and COLMAP's view
// of it (the stored size, EXIF orientation not applied) must equal it. An image extracted with its EXIF orientation
// applied has the transposed size and is refused: its keypoints are not in the frame COLMAP reads.
//
// The database is written to a temporary file next to `database` and renamed over it at the end (a failure leaves
// no partial database). Errors (superpoint_rt::Error): InvalidArgument for bad options, an existing database without
// `overwrite`, malformed or inconsistent inputs (each names the file, image or pair and the rule); NotFound for a
// missing file, image or pair; Io for file system and SQLite failures.
//
// Thread-safety: reentrant; calls writing different databases may run in parallel (their HDF5 reads take turns).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace superpoint_rt {

struct ColmapOptions {
  std::string features;                  // hloc feature file (.h5): keypoints and image_size per image
  std::string matches;                   // hloc match file (.h5): matches0 (and matching_scores0) per pair
  std::string pairs;                     // hloc pair list: "name0 name1" per line
  std::string database;                  // the COLMAP database to write (.db)
  std::string images;                    // the image folder (optional): checks each image's file and size
  bool single_camera = false;            // one camera for every image (COLMAP's --ImageReader.single_camera)
  std::optional<float> min_match_score;  // keep matches scoring above this (hloc's min_match_score; 0 = all, as hloc)
  bool overwrite = false;                // replace an existing database
};

/// What was written.
struct ColmapReport {
  std::size_t images = 0, cameras = 0;
  std::size_t keypoints = 0;        // over all images
  std::size_t pairs_listed = 0;     // lines of the pair list
  std::size_t pairs_written = 0;    // rows of the matches table
  std::size_t pairs_duplicate = 0;  // listed again, in either order (hloc writes the first)
  std::size_t pairs_self = 0;       // an image with itself (skipped)
  std::size_t matches = 0;          // over all pairs written
  double seconds = 0;
  /// {"database", "images", ...}: the fields above as JSON text.
  std::string json(const std::string& database) const;
};

/// Writes the database (see the file comment).
ColmapReport write_colmap_database(const ColmapOptions& options);

/// COLMAP's pair id of two image ids (Database::ImagePairToPairId): id1 * 2147483647 + id2 with id1 < id2.
constexpr std::int64_t colmap_pair_id(std::int64_t image_id1, std::int64_t image_id2) noexcept {
  return image_id1 > image_id2 ? image_id2 * 2147483647 + image_id1 : image_id1 * 2147483647 + image_id2;
}

}  // namespace superpoint_rt
