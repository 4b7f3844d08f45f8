// match_files (superpoint_rt/match.hpp): hloc's match_features over files, with each image's descriptors read once
// and kept for all its pairs.
//
// Order: hloc matches the unique pairs in the order of a Python set; here they keep their order in the pairs file,
// unless the descriptors of all their images do not fit MatchFilesConfig::cache_mb: then the images are cut into
// tiles (in order of first appearance) of at most half the budget each, and the pairs are sorted stably by their
// pair of tiles, so that only two tiles are needed at a time and every image is read once per tile pair it is in.
// Each pair runs the matcher on all threads (row blocks of its similarity matrix, matcher.hpp); reading and writing
// happen between pairs.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <list>
#include <map>
#include <memory>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "batch/batch.hpp"
#include "match/h5.hpp"
#include "match/matcher.hpp"
#include "superpoint_rt/errors.hpp"

namespace superpoint_rt {
namespace {

namespace fs = std::filesystem;
using matching::detail::DescriptorRecord;
using matching::detail::FeatureReader;
using Clock = std::chrono::steady_clock;

// Part files are written every kCommitPairs pairs or kCommitSeconds seconds, whichever comes first.
constexpr std::size_t kCommitPairs = 256;
constexpr double kCommitSeconds = 30;

// One image of one features file.
struct ImageKey {
  int file;  // 0: features, 1: features_ref
  std::string name;
  bool operator<(const ImageKey& o) const { return std::tie(file, name) < std::tie(o.file, o.name); }
};

// One image as the matcher takes it: its descriptors (nearest neighbours), or LightGlue's first-layer input.
struct CachedImage {
  std::shared_ptr<const DescriptorRecord> descriptors;
  std::shared_ptr<const LightGlue::Prepared> prepared;
  std::size_t n = 0;
  int dim = 0;
  std::size_t bytes = 0;
};

// The images in memory, least recently used first out, within a byte budget (an image in use by the current pair
// stays alive through its shared_ptr even when dropped here).
class RecordCache {
 public:
  RecordCache(std::size_t budget, const FeatureReader* const readers[2], const LightGlue* lightglue, int threads)
      : budget_(budget), readers_(readers), lightglue_(lightglue), threads_(threads) {}

  std::shared_ptr<const CachedImage> get(const ImageKey& k) {
    if (auto it = index_.find(k); it != index_.end()) {
      lru_.splice(lru_.end(), lru_, it->second);
      return it->second->second;
    }
    auto rec = std::make_shared<const DescriptorRecord>(readers_[k.file]->read(k.name));
    auto img = std::make_shared<CachedImage>();
    img->n = rec->n;
    img->dim = rec->dim;
    if (lightglue_) {
      const FeatureReader& r = *readers_[k.file];
      if (rec->dim != lightglue_->input_dim())
        throw Error(ErrorKind::InvalidArgument, "'" + k.name + "' in " + r.path() + ": descriptors of dim " +
                                                    std::to_string(rec->dim) + "; the LightGlue weights (" +
                                                    lightglue_->source() + ") take " +
                                                    std::to_string(lightglue_->input_dim()));
      const matching::detail::KeypointRecord kp = r.keypoints(k.name);
      if (kp.size() != rec->n)
        throw Error(ErrorKind::InvalidArgument, "'" + k.name + "' in " + r.path() + ": " + std::to_string(kp.size()) +
                                                    " keypoints and " + std::to_string(rec->n) + " descriptors");
      img->prepared = lightglue_->prepare({kp.xy.data(), rec->values.data(), rec->n, rec->dim,
                                           static_cast<float>(kp.width), static_cast<float>(kp.height)},
                                          threads_);
      img->bytes = rec->n * static_cast<std::size_t>(lightglue_->descriptor_dim() + lightglue_->descriptor_dim() / 4) *
                   sizeof(float);  // the projected descriptors and the encoding (cos and sin of head_dim / 2)
    } else {
      img->descriptors = std::move(rec);
      img->bytes = img->descriptors->bytes();
    }
    ++reads_;
    bytes_ += img->bytes;
    lru_.emplace_back(k, img);
    index_[k] = std::prev(lru_.end());
    while (bytes_ > budget_ && lru_.size() > 2) {  // never the two of the current pair
      bytes_ -= lru_.front().second->bytes;
      index_.erase(lru_.front().first);
      lru_.pop_front();
    }
    return img;
  }
  std::size_t reads() const { return reads_; }

 private:
  using Entry = std::pair<ImageKey, std::shared_ptr<const CachedImage>>;
  std::size_t budget_, bytes_ = 0, reads_ = 0;
  const FeatureReader* const* readers_;
  const LightGlue* lightglue_;
  int threads_;
  std::list<Entry> lru_;
  std::map<ImageKey, std::list<Entry>::iterator> index_;
};

// The pairs in the order that reads each image once per tile pair (see the file comment).
void schedule(std::vector<ImagePair>& pairs, const FeatureReader* const readers[2], std::size_t budget) {
  std::map<ImageKey, std::size_t> order;  // first appearance
  std::vector<std::size_t> bytes;
  auto id = [&](int file, const std::string& name) {
    auto [it, added] = order.emplace(ImageKey{file, name}, order.size());
    if (added) {
      const auto [dim, n] = readers[file]->shape(name);
      bytes.push_back(static_cast<std::size_t>(dim) * n * sizeof(float));
    }
    return it->second;
  };
  std::vector<std::pair<std::size_t, std::size_t>> ids;
  ids.reserve(pairs.size());
  for (const auto& [a, b] : pairs) {
    const std::size_t ia = id(0, a);
    ids.emplace_back(ia, id(readers[1] == readers[0] ? 0 : 1, b));
  }
  std::size_t total = 0;
  for (auto b : bytes) total += b;
  if (total <= budget) return;
  std::vector<std::size_t> tile(bytes.size());
  std::size_t t = 0, in_tile = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (in_tile > 0 && in_tile + bytes[i] > budget / 2) {
      ++t;
      in_tile = 0;
    }
    in_tile += bytes[i];
    tile[i] = t;
  }
  std::vector<std::size_t> perm(pairs.size());
  for (std::size_t i = 0; i < perm.size(); ++i) perm[i] = i;
  auto tiles = [&](std::size_t p) {
    const std::size_t x = tile[ids[p].first], y = tile[ids[p].second];
    return std::pair{std::min(x, y), std::max(x, y)};
  };
  std::stable_sort(perm.begin(), perm.end(), [&](std::size_t p, std::size_t q) { return tiles(p) < tiles(q); });
  std::vector<ImagePair> sorted;
  sorted.reserve(pairs.size());
  for (std::size_t p : perm) sorted.push_back(std::move(pairs[p]));
  pairs = std::move(sorted);
}

void remove_parts(const std::vector<std::string>& parts, const std::string& output) {
  std::error_code ec;
  for (const auto& p : parts) fs::remove(p, ec);
  fs::remove(output + ".parts", ec);  // only when empty
}

}  // namespace

std::string MatchFilesReport::json() const {
  nlohmann::json j{{"listed", listed},           {"unique", unique},   {"skipped", skipped}, {"matched", matched},
                   {"images_read", images_read}, {"matches", matches}, {"seconds", seconds}};
  return j.dump(2);
}

MatchFilesReport match_files(const MatchFilesConfig& c) {
  const auto t0 = Clock::now();
  c.options.validate();
  if (c.lightglue) c.lightglue_options.validate();
  if (c.output.empty()) throw Error(ErrorKind::InvalidArgument, "match: no output file");
  std::error_code ec;
  if (!fs::exists(c.pairs, ec)) throw Error(ErrorKind::NotFound, "pairs file not found: " + c.pairs);
  MatchFilesReport report;
  const std::vector<ImagePair> listed = read_pairs(c.pairs);
  report.listed = listed.size();
  std::vector<ImagePair> pairs = unique_pairs(listed);
  report.unique = pairs.size();

  const FeatureReader features(c.features);
  std::unique_ptr<FeatureReader> ref;
  if (!c.features_ref.empty() && c.features_ref != c.features) ref = std::make_unique<FeatureReader>(c.features_ref);
  const FeatureReader* const readers[2] = {&features, ref ? ref.get() : &features};
  for (const auto& [a, b] : pairs)
    for (int side = 0; side < 2; ++side) {
      const std::string& n = side ? b : a;
      if (!readers[side]->has(n))
        throw Error(ErrorKind::NotFound, "pair (" + a + ", " + b + ") of " + c.pairs + ": image '" + n +
                                             "' is not in " + readers[side]->path());
    }

  if (!c.overwrite) {
    const std::set<std::string> present = matching::detail::existing_pairs(c.output);
    const std::size_t before = pairs.size();
    std::erase_if(pairs, [&](const ImagePair& p) { return matching::detail::has_pair(present, p.first, p.second); });
    report.skipped = before - pairs.size();
  }
  schedule(pairs, readers, c.cache_mb << 20);

  RecordCache cache(c.cache_mb << 20, readers, c.lightglue.get(), c.options.threads);
  matching::detail::Matcher matcher(c.options.threads);
  matching::detail::MatchPartWriter writer(c.output);
  auto last_commit = Clock::now();
  try {
    for (std::size_t p = 0; p < pairs.size(); ++p) {
      const auto& [a, b] = pairs[p];
      const auto ra = cache.get({0, a});
      const auto rb = cache.get({readers[1] == readers[0] ? 0 : 1, b});
      const std::string where = "pair (" + a + ", " + b + ")";
      if (ra->dim != rb->dim)
        throw Error(ErrorKind::InvalidArgument,
                    where + ": descriptors of dim " + std::to_string(ra->dim) + " and " + std::to_string(rb->dim));
      if (rb->n > static_cast<std::size_t>(kMaxMatchKeypoints))
        throw Error(ErrorKind::InvalidArgument,
                    where + ": '" + b + "' has " + std::to_string(rb->n) + " keypoints; hloc's matches0 is int16, so " +
                        "the second image of a pair may have at most " + std::to_string(kMaxMatchKeypoints));
      Matches m;
      if (c.lightglue) {
        LightGlueOptions lo = c.lightglue_options;
        lo.threads = c.options.threads;
        LightGlueMatches r = c.lightglue->match(*ra->prepared, *rb->prepared, lo);
        m.matches0 = std::move(r.matches0);
        m.scores0 = std::move(r.scores0);
      } else {
        m = matcher.match(ra->descriptors->view(), rb->descriptors->view(), c.options);
      }
      report.matches += m.count();
      writer.add(a, b, m);
      ++report.matched;
      const double since = std::chrono::duration<double>(Clock::now() - last_commit).count();
      if (writer.pending() >= kCommitPairs || since >= kCommitSeconds) {
        writer.commit();
        last_commit = Clock::now();
      }
      if (c.on_progress)
        c.on_progress(report.matched, pairs.size(), std::chrono::duration<double>(Clock::now() - t0).count());
    }
    writer.commit();
  } catch (...) {
    // What was matched is kept in a part file for the next run (it counts those pairs as done and merges them).
    try {
      writer.commit();
    } catch (...) {
    }
    throw;
  }
  report.images_read = cache.reads();
  const std::vector<std::string> parts = batch::part_files(c.output);
  if (!parts.empty()) {
    batch::merge_h5(parts, c.output, /*overwrite=*/c.overwrite, /*include_existing=*/true);
    remove_parts(parts, c.output);
  }
  report.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return report;
}

}  // namespace superpoint_rt
