// write_colmap_database (superpoint_rt/colmap.hpp): hloc's reconstruction.py import (import_images with one camera
// per image or a single one, import_features, import_matches) from the feature, match and pair files into a COLMAP
// database.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "match/h5.hpp"
#include "sfm/colmap_db.hpp"
#include "superpoint_rt/colmap.hpp"
#include "superpoint_rt/errors.hpp"
#include "superpoint_rt/image.hpp"
#include "superpoint_rt/match.hpp"
#include "util/file.hpp"
#include "util/half.hpp"

namespace superpoint_rt {
namespace fs = std::filesystem;
namespace {

using matching::detail::KeypointRecord;
using matching::detail::MatchRecord;

[[noreturn]] void invalid(const std::string& msg) {
  throw Error(ErrorKind::InvalidArgument, msg);
}

void check_options(const ColmapOptions& o) {
  for (const auto& [value, name] : {std::pair{&o.features, "features"}, std::pair{&o.matches, "matches"},
                                    std::pair{&o.pairs, "pairs"}, std::pair{&o.database, "database"}})
    if (value->empty()) invalid(std::string("colmap: the ") + name + " file is required");
  std::error_code ec;
  for (const auto& [value, name] :
       {std::pair{&o.features, "features"}, std::pair{&o.matches, "matches"}, std::pair{&o.pairs, "pairs"}})
    if (!fs::exists(*value, ec))
      throw Error(ErrorKind::NotFound, std::string("colmap: no ") + name + " file " + *value);
  if (o.min_match_score && !std::isfinite(*o.min_match_score))
    invalid("colmap: min_match_score = " + std::to_string(*o.min_match_score) + " is not a finite number");
  if (fs::exists(o.database, ec) && !o.overwrite)
    invalid("colmap: the database " + o.database + " exists; set overwrite to replace it (CLI: --overwrite)");
  if (!o.images.empty() && !fs::is_directory(o.images, ec))
    throw Error(ErrorKind::NotFound, "colmap: the image folder " + o.images + " does not exist");
}

/// Bytes of an image file read for its header at first; a file whose header lies further (a TIFF's IFD may be at its
/// end) is read whole, up to kMaxImageFileBytes.
constexpr std::size_t kImageHeadBytes = std::size_t{16} << 20;
constexpr std::uint64_t kMaxImageFileBytes = std::uint64_t{1} << 30;

/// The image file of `name` in `folder`: a name that leaves the folder (absolute, or with a ".." component) is refused
/// (issue 32: `../../dev/zero` in a feature file was read until bad_alloc), and so is anything but a regular file.
std::string image_path(const std::string& folder, const std::string& name) {
  const fs::path n(name);
  bool up = n.is_absolute() || n.has_root_path() || name.find('\0') != std::string::npos;
  for (const fs::path& part : n) up = up || part == "..";
  if (up)
    invalid("colmap: the image name '" + name + "' leaves the image folder " + folder +
            " (an absolute path or a '..' component)");
  const std::string path = (fs::path(folder) / n).string();
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (st.type() == fs::file_type::not_found) throw Error(ErrorKind::NotFound, "colmap: no image file " + path);
  if (st.type() != fs::file_type::regular)
    invalid("colmap: the image " + path + " is not a regular file (a folder, a device or a pipe)");
  return path;
}

/// COLMAP's size of an image file: the stored width and height (its reader does not apply the EXIF orientation),
/// from its header: the first kImageHeadBytes of the file, or the whole file when its header lies further.
std::pair<std::int64_t, std::int64_t> stored_size(const std::string& path) {
  std::vector<std::uint8_t> head(kImageHeadBytes);
  std::size_t got = 0;
  {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) throw Error(ErrorKind::Io, "colmap: cannot open " + path);
    got = std::fread(head.data(), 1, head.size(), f);
    std::fclose(f);
  }
  head.resize(got);
  try {
    const ImageInfo info = probe_image(head, path);
    return {info.width, info.height};
  } catch (const Error&) {
    if (got < kImageHeadBytes) throw;  // the whole file was read
  }
  const ImageInfo info = probe_image(util::read_file(path, kMaxImageFileBytes), path);
  return {info.width, info.height};
}

/// hloc's `keypoints += 0.5` on the array as stored: a float16 array stays float16 (numpy adds in float32 and rounds
/// the sum to float16), a float32 array float32.
void add_colmap_origin(std::vector<float>& xy, bool half) {
  for (float& v : xy) v = half ? util::half_to_float(util::float_to_half(v + 0.5f)) : v + 0.5f;
}

/// hloc's `matches[scores > min_match_score]`: numpy compares a float16 array with a Python float in float16 (numpy
/// 1.x value-based casting and numpy 2's NEP 50 alike), so the threshold is rounded to the scores' type first.
void filter_by_score(MatchRecord& r, float threshold) {
  const float t = r.scores_half ? util::half_to_float(util::float_to_half(threshold)) : threshold;
  auto& m = r.matches;
  std::size_t k = 0;
  for (std::size_t i = 0; i < m.scores.size(); ++i)
    if (m.scores[i] > t) m.pairs[k++] = m.pairs[i];
  m.pairs.resize(k);
}

struct Camera {
  std::int64_t id = 0, width = 0, height = 0;
};

}  // namespace

std::string ColmapReport::json(const std::string& database) const {
  return nlohmann::json{{"database", database},
                        {"images", images},
                        {"cameras", cameras},
                        {"keypoints", keypoints},
                        {"pairs_listed", pairs_listed},
                        {"pairs_written", pairs_written},
                        {"pairs_duplicate", pairs_duplicate},
                        {"pairs_self", pairs_self},
                        {"matches", matches},
                        {"seconds", seconds}}
      .dump();
}

ColmapReport write_colmap_database(const ColmapOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  check_options(o);
  ColmapReport report;
  const std::vector<ImagePair> pairs = read_pairs(o.pairs);
  report.pairs_listed = pairs.size();

  const matching::detail::FeatureReader features(o.features);
  const std::vector<std::string> names = features.names();  // sorted: COLMAP's image ids follow the sorted names
  if (names.empty()) invalid("colmap: " + o.features + " holds no images");
  if (names.size() >= static_cast<std::size_t>(sfm::kColmapMaxNumImages))
    invalid("colmap: " + o.features + " holds more images than COLMAP's limit");
  std::map<std::string, std::int64_t> image_id;
  for (std::size_t i = 0; i < names.size(); ++i) image_id[names[i]] = static_cast<std::int64_t>(i) + 1;
  for (std::size_t i = 0; i < pairs.size(); ++i)
    for (const std::string* n : {&pairs[i].first, &pairs[i].second})
      if (!image_id.count(*n))
        throw Error(ErrorKind::NotFound, "colmap: " + o.pairs + " pair " + std::to_string(i + 1) + " (" +
                                             pairs[i].first + ", " + pairs[i].second + "): '" + *n + "' is not in " +
                                             o.features);

  const std::string tmp = o.database + "." + util::random_hex8() + ".tmp";
  try {
    sfm::ColmapDatabase db(tmp);
    std::vector<std::size_t> num_keypoints(names.size());
    Camera shared;
    for (std::size_t i = 0; i < names.size(); ++i) {
      const std::string& name = names[i];
      const std::int64_t id = static_cast<std::int64_t>(i) + 1;
      KeypointRecord kp = features.keypoints(name);
      if (!o.images.empty()) {
        const auto [w, h] = stored_size(image_path(o.images, name));
        if (w != kp.width || h != kp.height) {
          const std::string sizes = "image_size " + std::to_string(kp.width) + "x" + std::to_string(kp.height) +
                                    " in " + o.features + ", but the file is " + std::to_string(w) + "x" +
                                    std::to_string(h);
          if (w == kp.height && h == kp.width)
            invalid("colmap: " + name + ": " + sizes +
                    " as stored: its features were extracted with the EXIF orientation applied (exif_orientation), "
                    "and COLMAP reads the stored pixels. Extract again without it (the hloc presets' default), or "
                    "leave out the image folder to use the features' sizes");
          invalid("colmap: " + name + ": " + sizes + ": the features are of another image");
        }
      }
      Camera cam{id, kp.width, kp.height};
      if (o.single_camera && i > 0) {
        if (kp.width != shared.width || kp.height != shared.height)
          invalid("colmap: single_camera needs images of one size: " + name + " is " + std::to_string(kp.width) + "x" +
                  std::to_string(kp.height) + ", " + names[0] + " is " + std::to_string(shared.width) + "x" +
                  std::to_string(shared.height));
        cam = shared;
      } else {
        // COLMAP's ImageReader without an EXIF focal length: f = default_focal_length_factor (1.2) * max(W, H);
        // Camera::CreateFromModelId puts the principal point at the centre (W / 2, H / 2), k = 0.
        const double f = 1.2 * static_cast<double>(std::max(kp.width, kp.height));
        const double params[4] = {f, static_cast<double>(kp.width) / 2.0, static_cast<double>(kp.height) / 2.0, 0.0};
        db.add_camera(cam.id, sfm::kColmapSimpleRadial, cam.width, cam.height, params, false);
        db.add_rig(cam.id, cam.id);  // one rig per camera, the camera its reference sensor
        ++report.cameras;
        if (i == 0) shared = cam;
      }
      db.add_image(id, name, cam.id);
      db.add_frame(id, cam.id, id, cam.id);
      add_colmap_origin(kp.xy, kp.half);
      db.add_keypoints(id, kp.xy);
      num_keypoints[i] = kp.size();
      report.keypoints += num_keypoints[i];
    }
    report.images = names.size();

    const matching::detail::MatchReader matches(o.matches);
    std::unordered_set<std::int64_t> written;
    std::vector<std::uint32_t> blob;
    for (const auto& [name0, name1] : pairs) {
      const std::int64_t id0 = image_id.at(name0), id1 = image_id.at(name1);
      if (id0 == id1) {
        ++report.pairs_self;
        continue;
      }
      const std::int64_t pair_id = colmap_pair_id(id0, id1);
      if (!written.insert(pair_id).second) {
        ++report.pairs_duplicate;
        continue;
      }
      // hloc: `if min_match_score: matches = matches[scores > min_match_score]`, so 0 filters nothing.
      const bool by_score = o.min_match_score && *o.min_match_score != 0.0f;
      MatchRecord m = matches.read(name0, name1, by_score,
                                   std::array{num_keypoints[static_cast<std::size_t>(id0 - 1)],
                                              num_keypoints[static_cast<std::size_t>(id1 - 1)]});
      if (by_score) filter_by_score(m, *o.min_match_score);
      // The indices are checked keypoints of their images (>= 0); COLMAP's WriteMatches: the smaller image id's first.
      blob.clear();
      for (const auto& [i0, i1] : m.matches.pairs) {
        blob.push_back(static_cast<std::uint32_t>(id0 < id1 ? i0 : i1));
        blob.push_back(static_cast<std::uint32_t>(id0 < id1 ? i1 : i0));
      }
      db.add_matches(pair_id, blob);
      ++report.pairs_written;
      report.matches += m.matches.pairs.size();
    }
    db.commit();
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
  // A replaced database's write-ahead log and shared-memory files belong to the old content: SQLite would replay the
  // log into the new file.
  if (o.overwrite) {
    std::error_code ec;
    for (const char* suffix : {"-wal", "-shm", "-journal"}) fs::remove(o.database + suffix, ec);
  }
  util::rename_into_place(tmp, o.database);
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

}  // namespace superpoint_rt
