// plot_matches (plot.hpp): two images side by side and a line per match.
#include "sfm/plot.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>

#include "image/decode_cv2.hpp"
#include "image/resize.hpp"
#include "match/h5.hpp"
#include "superpoint_rt/colmap.hpp"
#include "superpoint_rt/errors.hpp"
#include "superpoint_rt/image.hpp"

namespace superpoint_rt::sfm {
namespace fs = std::filesystem;
namespace {

[[noreturn]] void invalid(const std::string& msg) {
  throw Error(ErrorKind::InvalidArgument, "plot-matches: " + msg);
}

struct Rgb {
  std::uint8_t r, g, b;
};

/// hloc's visualization.cm_RdGn: red at 0, green at 1, linear between.
Rgb red_to_green(float x) {
  const float t = std::clamp(std::isfinite(x) ? x : 0.f, 0.f, 1.f);
  return {static_cast<std::uint8_t>(std::lround(255 * (1 - t))), static_cast<std::uint8_t>(std::lround(255 * t)), 0};
}

class Canvas {
 public:
  Canvas(int w, int h) : w_(w), h_(h), px_(static_cast<std::size_t>(w) * static_cast<std::size_t>(h) * 3, 255) {}
  int width() const { return w_; }
  int height() const { return h_; }
  std::uint8_t* row(int y) { return px_.data() + static_cast<std::size_t>(y) * static_cast<std::size_t>(w_) * 3; }
  void blend(int x, int y, Rgb c, double a) {
    if (x < 0 || y < 0 || x >= w_ || y >= h_ || a <= 0) return;
    std::uint8_t* p = row(y) + static_cast<std::size_t>(x) * 3;
    const double k = std::min(a, 1.0);
    p[0] = static_cast<std::uint8_t>(std::lround(p[0] + (c.r - p[0]) * k));
    p[1] = static_cast<std::uint8_t>(std::lround(p[1] + (c.g - p[1]) * k));
    p[2] = static_cast<std::uint8_t>(std::lround(p[2] + (c.b - p[2]) * k));
  }
  /// Xiaolin Wu's anti-aliased line: along the major axis, each step covers the two pixels the line passes between.
  void line(double x0, double y0, double x1, double y1, Rgb c, double alpha) {
    const bool steep = std::abs(y1 - y0) > std::abs(x1 - x0);
    if (steep) {
      std::swap(x0, y0);
      std::swap(x1, y1);
    }
    if (x0 > x1) {
      std::swap(x0, x1);
      std::swap(y0, y1);
    }
    const double grad = x1 - x0 > 0 ? (y1 - y0) / (x1 - x0) : 0.0;
    for (long x = std::lround(x0); x <= std::lround(x1); ++x) {
      const double y = y0 + grad * (static_cast<double>(x) - x0);
      const double fy = std::floor(y), f = y - fy;
      const int xi = static_cast<int>(x), yi = static_cast<int>(fy);
      if (steep) {
        blend(yi, xi, c, alpha * (1 - f));
        blend(yi + 1, xi, c, alpha * f);
      } else {
        blend(xi, yi, c, alpha * (1 - f));
        blend(xi, yi + 1, c, alpha * f);
      }
    }
  }
  void disc(double cx, double cy, double r, Rgb c) {
    for (int y = static_cast<int>(std::floor(cy - r - 1)); y <= static_cast<int>(std::ceil(cy + r + 1)); ++y)
      for (int x = static_cast<int>(std::floor(cx - r - 1)); x <= static_cast<int>(std::ceil(cx + r + 1)); ++x) {
        const double dx = x - cx, dy = y - cy, d = std::sqrt(dx * dx + dy * dy);  // not hypot: glibc 2.35
        blend(x, y, c, std::clamp(r + 0.5 - d, 0.0, 1.0));                        // a one-pixel soft edge
      }
  }
  Image image() && {
    Image im;
    im.width = w_;
    im.height = h_;
    im.format = PixelFormat::RGB;
    im.pixels = std::move(px_);
    return im;
  }

 private:
  int w_, h_;
  std::vector<std::uint8_t> px_;
};

/// The image as its features were extracted: the stored pixels (hloc's read_image), or the EXIF-rotated ones when
/// the feature file's image_size is their size.
Image load_as_features(const std::string& path, std::int64_t width, std::int64_t height) {
  const std::vector<std::uint8_t> bytes = read_file(path);
  Image im =
      image::decode_image_cv2(bytes, path, kDefaultMaxPixels, image::Cv2Read::Color, image::Cv2Orientation::Ignore);
  if (im.width == width && im.height == height) return im;
  const std::string stored = std::to_string(im.width) + "x" + std::to_string(im.height);
  im = image::decode_image_cv2(bytes, path, kDefaultMaxPixels, image::Cv2Read::Color, image::Cv2Orientation::Apply);
  if (im.width == width && im.height == height) return im;
  invalid(path + " is " + stored + " (" + std::to_string(im.width) + "x" + std::to_string(im.height) +
          " with its EXIF orientation), not the features' image_size " + std::to_string(width) + "x" +
          std::to_string(height));
}

/// Pastes `im` scaled to out_w x out_h (Pillow's bilinear, per channel) at column x0.
void paste(Canvas& c, const Image& im, int out_w, int out_h, int x0) {
  const image::ResizePlan plan(im.width, im.height, out_w, out_h);
  image::ResizeScratch scratch;
  std::vector<std::uint8_t> plane(static_cast<std::size_t>(out_w) * static_cast<std::size_t>(out_h));
  for (int ch = 0; ch < 3; ++ch) {
    image::resize_plane(plan, im.pixels.data() + ch, std::ptrdiff_t{im.width} * 3, 3, plane.data(), scratch);
    for (int y = 0; y < out_h; ++y) {
      std::uint8_t* dst = c.row(y) + static_cast<std::size_t>(x0) * 3 + static_cast<std::size_t>(ch);
      const std::uint8_t* src = plane.data() + static_cast<std::size_t>(y) * static_cast<std::size_t>(out_w);
      for (int x = 0; x < out_w; ++x) dst[3 * static_cast<std::size_t>(x)] = src[x];
    }
  }
}

/// The verified inliers of (name0, name1) in a COLMAP database, as [i0, i1] pairs of the two images' keypoints.
std::set<std::pair<std::uint32_t, std::uint32_t>> read_inliers(const MatchPlotOptions& o, std::size_t n0,
                                                               std::size_t n1) {
  sqlite3* db = nullptr;
  struct Close {
    sqlite3*& db;
    ~Close() { sqlite3_close(db); }
  } close{db};
  if (!fs::exists(o.database)) throw Error(ErrorKind::NotFound, "plot-matches: no database " + o.database);
  if (sqlite3_open_v2(o.database.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK)
    throw Error(ErrorKind::Io, "plot-matches: cannot open " + o.database + ": " + sqlite3_errmsg(db));
  const auto query = [&](const char* sql, auto&& bind, auto&& row) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db, sql, -1, &s, nullptr) != SQLITE_OK) {
      sqlite3_finalize(s);
      invalid(o.database + " is not a COLMAP database (" + sqlite3_errmsg(db) + ")");
    }
    bind(s);
    const int rc = sqlite3_step(s);
    const bool found = rc == SQLITE_ROW;
    if (found) row(s);
    sqlite3_finalize(s);
    return found;
  };
  std::int64_t ids[2] = {0, 0};
  for (int k = 0; k < 2; ++k) {
    const std::string& name = k ? o.name1 : o.name0;
    if (!query(
            "SELECT image_id FROM images WHERE name = ?;",
            [&](sqlite3_stmt* s) { sqlite3_bind_text(s, 1, name.c_str(), -1, SQLITE_TRANSIENT); },
            [&](sqlite3_stmt* s) { ids[k] = sqlite3_column_int64(s, 0); }))
      throw Error(ErrorKind::NotFound, "plot-matches: image " + name + " is not in " + o.database);
  }
  std::set<std::pair<std::uint32_t, std::uint32_t>> out;
  const bool swapped = ids[0] > ids[1];
  const bool found = query(
      "SELECT rows, cols, data FROM two_view_geometries WHERE pair_id = ?;",
      [&](sqlite3_stmt* s) { sqlite3_bind_int64(s, 1, colmap_pair_id(ids[0], ids[1])); },
      [&](sqlite3_stmt* s) {
        const std::int64_t rows = sqlite3_column_int64(s, 0), cols = sqlite3_column_int64(s, 1);
        const void* data = sqlite3_column_blob(s, 2);
        const std::int64_t bytes = sqlite3_column_bytes(s, 2);
        if (rows < 0 || static_cast<std::uint64_t>(rows) > std::max(n0, n1) || (rows > 0 && cols != 2) ||
            bytes != rows * cols * 4 || (rows > 0 && !data))
          invalid(o.database + ": the inliers of (" + o.name0 + ", " + o.name1 +
                  ") are not a (K, 2) uint32 array of "
                  "at most " +
                  std::to_string(std::max(n0, n1)) + " rows");
        std::vector<std::uint32_t> v(static_cast<std::size_t>(rows) * 2);
        if (rows > 0) std::memcpy(v.data(), data, v.size() * 4);
        for (std::size_t k = 0; k < v.size(); k += 2) {
          const std::uint32_t i0 = swapped ? v[k + 1] : v[k], i1 = swapped ? v[k] : v[k + 1];
          if (i0 >= n0 || i1 >= n1)
            invalid(o.database + ": an inlier of (" + o.name0 + ", " + o.name1 + ") is not a keypoint of the features");
          out.emplace(i0, i1);
        }
      });
  if (!found)
    throw Error(ErrorKind::NotFound, "plot-matches: " + o.database + " has no verified geometry for (" + o.name0 +
                                         ", " + o.name1 +
                                         "); run pycolmap.verify_matches (or colmap "
                                         "matches_importer) first");
  return out;
}

}  // namespace

MatchPlotReport plot_matches(const MatchPlotOptions& o) {
  if (o.height != 0 && (o.height < 16 || o.height > kMaxPlotHeight))
    invalid("height " + std::to_string(o.height) + " is out of range (16.." + std::to_string(kMaxPlotHeight) +
            ", 0 = automatic)");
  matching::detail::KeypointRecord kp[2];
  {
    const matching::detail::FeatureReader features(o.features);
    kp[0] = features.keypoints(o.name0);
    kp[1] = features.keypoints(o.name1);
  }
  // The scores colour the lines only without a database.
  const PairMatches m = matching::detail::MatchReader(o.matches)
                            .read(o.name0, o.name1, o.database.empty(), std::array{kp[0].size(), kp[1].size()})
                            .matches;
  Image im[2];
  for (int k = 0; k < 2; ++k)
    im[k] = load_as_features((fs::path(o.images) / (k ? o.name1 : o.name0)).string(), kp[k].width, kp[k].height);
  MatchPlotReport report;
  std::set<std::pair<std::uint32_t, std::uint32_t>> inliers;
  if (!o.database.empty()) inliers = read_inliers(o, kp[0].size(), kp[1].size());

  const int h = o.height ? o.height : std::min({im[0].height, im[1].height, kDefaultPlotHeight});
  const int gap = std::max(4, h / 100);
  int w[2];
  for (int k = 0; k < 2; ++k)
    w[k] = std::max(1, static_cast<int>(std::lround(im[k].width * (static_cast<double>(h) / im[k].height))));
  const std::int64_t total_w = std::int64_t{w[0]} + gap + w[1];
  if (total_w * h > kMaxPlotPixels)
    invalid("a " + std::to_string(total_w) + "x" + std::to_string(h) + " picture is over the limit of " +
            std::to_string(kMaxPlotPixels) + " pixels (give a smaller height)");
  Canvas c(static_cast<int>(total_w), h);
  paste(c, im[0], w[0], h, 0);
  paste(c, im[1], w[1], h, w[0] + gap);
  // Keypoint x (pixel centres at integers) in the scaled image: (x + 0.5) * (out / in) - 0.5, per axis.
  const auto at = [&](int k, std::int32_t i) {
    const double sx = static_cast<double>(w[k]) / im[k].width, sy = static_cast<double>(h) / im[k].height;
    return std::pair{(kp[k].xy[2 * i] + 0.5) * sx - 0.5 + (k ? w[0] + gap : 0), (kp[k].xy[2 * i + 1] + 0.5) * sy - 0.5};
  };
  const double r = std::max(1.5, h / 400.0);
  const std::size_t n = m.pairs.size();
  const auto good = [&](std::size_t i) {
    if (o.database.empty()) return m.scores[i];
    const auto [i0, i1] = m.pairs[i];  // keypoint indices, checked >= 0
    return inliers.count({static_cast<std::uint32_t>(i0), static_cast<std::uint32_t>(i1)}) ? 1.f : 0.f;
  };
  long verified = 0;
  if (!o.database.empty())
    for (std::size_t i = 0; i < n; ++i) verified += good(i) > 0;
  // An even spread of max_lines matches; rejected (or low-score) ones first, so that the inliers are drawn on top.
  const std::size_t shown = o.max_lines && o.max_lines < n ? o.max_lines : n;
  std::vector<std::size_t> order(shown);
  for (std::size_t k = 0; k < shown; ++k) order[k] = k * n / shown;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return good(a) < good(b); });
  for (const std::size_t i : order) {
    const float g = good(i);
    const Rgb col = red_to_green(g);
    const auto [x0, y0] = at(0, m.pairs[i][0]);
    const auto [x1, y1] = at(1, m.pairs[i][1]);
    // Matches COLMAP rejected stay visible but recede: fainter lines, smaller dots.
    const bool rejected = !o.database.empty() && g == 0;
    c.line(x0, y0, x1, y1, col, rejected ? 0.25 : 0.9);
    c.disc(x0, y0, rejected ? r * 0.6 : r, col);
    c.disc(x1, y1, rejected ? r * 0.6 : r, col);
  }
  report.matches = n;
  report.drawn = shown;
  report.inliers = o.database.empty() ? -1 : verified;
  report.width = c.width();
  report.height = c.height();
  const Image out = std::move(c).image();
  write_png(o.output, out.view());
  return report;
}

}  // namespace superpoint_rt::sfm
