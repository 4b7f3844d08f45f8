// Fuzz harness: hloc's HDF5 files as `superpoint-rt match`, `colmap`, `plot-matches` and `pairs` read them
// (src/match/h5.hpp): the bytes are opened as a file image in memory (util::h5::open_image, HDF5's core driver: no
// disk), once as a features file and once as a matches file (a file may be both: the readers ignore groups they do
// not ask for, and one input then reaches the keypoint-count checks of the match reader, as the COLMAP export does).
//   features: FeatureReader's listing (hloc's list_h5_names: the walk over every object, its bounds), then for each
//             image (at most kMaxNames) has, shape, read (the dim-major -> rows transpose, float16 widening) and
//             keypoints (keypoints + image_size);
//   matches:  the listing existing_pairs makes (dataset_parents) with has_pair, then for each pair group MatchReader's
//             find + read both ways, with scores, and with the keypoint counts of the features when it has them.
// Properties checked besides the sanitizers: HDF5's error printing stays off; a listed image is has(); shape() and
// read() agree and stay within the limits; keypoints are finite, image sizes in [1, kMaxImageSide]; a listed pair
// group is has_pair(); matches are within their images' keypoints, scores one per match, and a pair read in the other
// order gives the same matches swapped.
// Inputs with a group of compact link storage or a damaged local heap are left out before the readers see them:
// libhdf5 1.10.8 crashes or loops on those (has_compact_group, has_bad_local_heap, fuzz/README.md). After each input no
// HDF5 identifier may be left open. Each dataset is limited to kFuzzMaxValues values (the readers' max_values), so that
// one execution stays small: a declared shape over it takes the limit path, which is one of the paths under test.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fuzz_util.hpp"
#include "match/h5.hpp"
#include "superpoint_rt/match.hpp"

using namespace superpoint_rt;
using matching::detail::FeatureReader;
using matching::detail::MatchReader;

namespace {

constexpr std::int64_t kFuzzMaxValues = std::int64_t{1} << 16;
constexpr std::size_t kMaxNames = 16;

// libhdf5 1.10.8 frees uninitialised pointers when it lists a group whose links are stored compactly (link messages
// in its object header) and whose link count disagrees with those messages (fuzz/README.md): every reader that lists
// such a file crashes inside libhdf5, h5py's too, and nothing in HDF5's API tells the count of messages apart from the
// count. The harness leaves such inputs out, found without listing a compact group: each group's storage type comes
// from H5Gget_info (which reads the count only), and children are listed from old-style (symbol table) and dense
// groups only, in native order (no table is built). At most one group per kMinLinkBytes of input, as the readers.
bool has_compact_group(hid_t file, std::size_t size) {
  std::vector<std::string> todo{"/"};
  std::set<haddr_t> seen;
  for (std::size_t budget = size / util::h5::kMinLinkBytes + 1; !todo.empty(); --budget) {
    if (budget == 0) return true;
    const std::string group = todo.back();
    todo.pop_back();
    H5G_info_t info;
    if (H5Gget_info_by_name(file, group.c_str(), &info, H5P_DEFAULT) < 0) continue;
    if (info.storage_type == H5G_STORAGE_TYPE_COMPACT) return true;
    std::vector<std::string> children;
    const auto collect = [](hid_t, const char* name, const H5L_info_t* li, void* out) -> herr_t {
      if (li->type == H5L_TYPE_HARD) static_cast<std::vector<std::string>*>(out)->emplace_back(name);
      return 0;
    };
    if (H5Literate_by_name(file, group.c_str(), H5_INDEX_NAME, H5_ITER_NATIVE, nullptr, collect, &children,
                           H5P_DEFAULT) < 0)
      continue;
    for (const std::string& c : children) {
      const std::string path = (group == "/" ? group : group + "/") + c;
      H5O_info_t oi;
      if (path.size() > util::h5::kMaxObjectPathBytes) continue;
      if (H5Oget_info_by_name2(file, path.c_str(), &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0) continue;
      if (oi.type == H5O_TYPE_GROUP && seen.insert(oi.addr).second) todo.push_back(path);
    }
  }
  return false;
}

// libhdf5 1.10.8 also trusts a local heap's header (the name heap of an old-style group: hloc's files have them): a
// data segment larger than the file is allocated, and copied into unchecked when that fails (SIGSEGV on the null
// pointer); a free list that loops is followed forever, allocating (fuzz/README.md). The harness leaves out inputs
// with such a heap, found by its "HEAP" signature and read as h5py writes it (8-byte lengths and offsets, base address
// 0): a check of the bytes, which may also leave out a valid input whose raw data holds "HEAP" or a message-like
// pattern (at no cost here; the readers cannot do the same, they would refuse valid files).
bool has_bad_local_heap(const std::uint8_t* data, std::size_t size) {
  const auto u64 = [&](std::uint64_t at) {
    std::uint64_t v;
    std::memcpy(&v, data + at, sizeof v);  // little-endian, as the file
    return v;
  };
  for (std::size_t p = 0; p + 32 <= size; ++p) {
    if (std::memcmp(data + p, "HEAP", 4) != 0) continue;
    const std::uint64_t segment = u64(p + 8), addr = u64(p + 24);
    if (segment > size || addr > size - segment) return true;
    // The free list: blocks (offset of the next, size) inside the segment; H5HL_FREE_NULL (1) or undefined ends it.
    std::uint64_t at = u64(p + 16);
    for (std::uint64_t steps = 0; at != 1 && at != ~std::uint64_t{0}; ++steps) {
      if (steps > segment / 16 || at > segment || segment - at < 16) return true;
      if (u64(addr + at + 8) > segment - at) return true;
      at = u64(addr + at);
    }
  }
  // A group's symbol-table message (type 0x0011, 16 bytes: B-tree address, then local heap address; found by its
  // version-1 message header) must name a heap: libhdf5 reads one at any address it names, the undefined address
  // (all ones) included, and copies it from null there (SIGSEGV; regressions/h5/crash-074fcfb1...).
  static constexpr std::uint8_t kStabHeader[4] = {0x11, 0x00, 0x10, 0x00};
  for (std::size_t p = 0; p + 24 <= size; ++p) {
    if (std::memcmp(data + p, kStabHeader, sizeof kStabHeader) != 0) continue;
    const std::uint64_t heap = u64(p + 16);
    if (heap > size - 4 || std::memcmp(data + heap, "HEAP", 4) != 0) return true;
  }
  return false;
}

// Whether the input is one fuzz_features / fuzz_matches may hand to the readers (see has_bad_local_heap and
// has_compact_group; SPRT_FUZZ_VERBOSE=1 says when it is not).
bool listable(const std::uint8_t* data, std::size_t size) {
  static const bool verbose = std::getenv("SPRT_FUZZ_VERBOSE") != nullptr;
  if (has_bad_local_heap(data, size)) {
    if (verbose) std::fprintf(stderr, "left out: a local heap libhdf5 would not survive\n");
    return false;
  }
  bool ok = false;
  sprt_fuzz::ok([&] {
    const util::h5::Hid file = util::h5::open_image(data, size, "fuzz-precheck.h5");
    ok = !has_compact_group(file.get(), size);
    if (!ok && verbose) std::fprintf(stderr, "left out: a compact group\n");
  });
  return ok;
}

void check_quiet() {
  H5E_auto2_t func = nullptr;
  void* data = nullptr;
  H5Eget_auto2(H5E_DEFAULT, &func, &data);
  FUZZ_CHECK(func == nullptr, "HDF5's error printing is on");
}

// The keypoint count of each image whose keypoints read, by its name with '/' made '-' (as in a pair group).
std::map<std::string, std::size_t> fuzz_features(const std::uint8_t* data, std::size_t size) {
  std::map<std::string, std::size_t> counts;
  std::optional<FeatureReader> f;
  const bool opened = sprt_fuzz::ok(
      [&] { f.emplace(util::h5::open_image(data, size, "fuzz-features.h5"), "fuzz-features.h5", kFuzzMaxValues); });
  check_quiet();
  if (!opened) return counts;
  const auto& names = f->names();
  FUZZ_CHECK(std::is_sorted(names.begin(), names.end()), "names are not sorted");
  for (std::size_t k = 0; k < names.size() && k < kMaxNames; ++k) {
    const std::string& name = names[k];
    FUZZ_CHECK(!name.empty() && name.size() <= util::h5::kMaxObjectPathBytes, "name of %zu bytes", name.size());
    FUZZ_CHECK(f->has(name), "listed name '%s' is not has()", name.c_str());
    std::pair<int, std::size_t> shape{0, 0};
    if (sprt_fuzz::ok([&] { shape = f->shape(name); })) {
      const auto [dim, n] = shape;
      FUZZ_CHECK(dim >= 1 && dim <= kMaxDescriptorDim, "dim %d", dim);
      FUZZ_CHECK(static_cast<std::int64_t>(n) * dim <= kFuzzMaxValues, "%zu x %d values", n, dim);
      matching::detail::DescriptorRecord r;
      if (sprt_fuzz::ok([&] { r = f->read(name); })) {
        FUZZ_CHECK(r.dim == dim && r.n == n, "read (%d, %zu), shape (%d, %zu)", r.dim, r.n, dim, n);
        FUZZ_CHECK(r.values.size() == n * static_cast<std::size_t>(dim), "%zu values", r.values.size());
      }
    }
    matching::detail::KeypointRecord kp;
    if (sprt_fuzz::ok([&] { kp = f->keypoints(name); })) {
      FUZZ_CHECK(kp.xy.size() % 2 == 0 && static_cast<std::int64_t>(kp.xy.size()) <= kFuzzMaxValues, "%zu values",
                 kp.xy.size());
      for (const float v : kp.xy) FUZZ_CHECK(std::isfinite(v), "a keypoint coordinate %g", static_cast<double>(v));
      for (const std::int64_t side : {kp.width, kp.height})
        FUZZ_CHECK(side >= 1 && side <= matching::detail::kMaxImageSide, "image side %lld",
                   static_cast<long long>(side));
      // Keyed as the image appears in a pair group's name (names_to_pair makes its '/' '-').
      std::string key = name;
      std::replace(key.begin(), key.end(), '/', '-');
      counts[key] = kp.size();
    }
  }
  FUZZ_CHECK(!f->has(std::string(kMaxPairNameBytes + 1, 'x')), "an unlisted name is has()");
  return counts;
}

void check_matches(const PairMatches& m, bool with_scores, const std::optional<std::array<std::size_t, 2>>& sizes) {
  FUZZ_CHECK(with_scores ? m.scores.size() == m.pairs.size() : m.scores.empty(), "%zu scores for %zu matches",
             m.scores.size(), m.pairs.size());
  for (const auto& [i, j] : m.pairs) {
    FUZZ_CHECK(i >= 0 && j >= 0, "match (%d, %d)", i, j);
    if (sizes)
      FUZZ_CHECK(static_cast<std::size_t>(i) < (*sizes)[0] && static_cast<std::size_t>(j) < (*sizes)[1],
                 "match (%d, %d) of images with %zu and %zu keypoints", i, j, (*sizes)[0], (*sizes)[1]);
  }
}

void fuzz_matches(const std::uint8_t* data, std::size_t size, const std::map<std::string, std::size_t>& counts) {
  std::optional<MatchReader> m;
  std::set<std::string> keys;
  const bool opened = sprt_fuzz::ok([&] {
    util::h5::Hid file = util::h5::open_image(data, size, "fuzz-matches.h5");
    // existing_pairs' listing, on this file.
    for (auto& k : util::h5::dataset_parents(file.get(), "fuzz-matches.h5")) keys.insert(std::move(k));
    m.emplace(std::move(file), "fuzz-matches.h5", kFuzzMaxValues);
  });
  check_quiet();
  if (!opened) return;
  std::size_t done = 0;
  for (const std::string& key : keys) {
    if (done++ == kMaxNames) break;
    // names_to_pair(a, b) = a + '/' + b with the names' own '/' made '-': a key of one '/' is a pair.
    const auto slash = key.find('/');
    const std::string a = key.substr(0, slash), b = slash == std::string::npos ? key : key.substr(slash + 1);
    if (key.find('/', slash + 1) == std::string::npos && slash != std::string::npos)
      FUZZ_CHECK(matching::detail::has_pair(keys, a, b), "listed pair group '%s' is not has_pair", key.c_str());
    PairMatches ab, ba;
    const bool ok_ab = sprt_fuzz::ok([&] { ab = m->read(a, b, true).matches; });
    if (ok_ab) check_matches(ab, true, std::nullopt);
    const bool ok_ba = sprt_fuzz::ok([&] { ba = m->read(b, a, false).matches; });
    if (ok_ba) check_matches(ba, false, std::nullopt);
    const auto fab = m->find(a, b), fba = m->find(b, a);
    if (ok_ab && ok_ba && fab && fba && fab->first == fba->first) {
      FUZZ_CHECK(ab.pairs.size() == ba.pairs.size(), "%zu matches one way, %zu the other", ab.pairs.size(),
                 ba.pairs.size());
      for (std::size_t i = 0; i < ab.pairs.size(); ++i)
        FUZZ_CHECK(ab.pairs[i][0] == ba.pairs[i][1] && ab.pairs[i][1] == ba.pairs[i][0], "match %zu differs", i);
    }
    // The COLMAP export's read: with the keypoint counts of both images (or counts that cannot fit, when the features
    // are not in this file: the shape check's refusal).
    const auto ca = counts.find(a), cb = counts.find(b);
    const std::array<std::size_t, 2> sizes = {ca != counts.end() ? ca->second : 1, cb != counts.end() ? cb->second : 1};
    PairMatches sized;
    if (sprt_fuzz::ok([&] { sized = m->read(a, b, true, sizes).matches; })) check_matches(sized, true, sizes);
  }
}

}  // namespace

// libhdf5 allocates some structures at the size their header in the file states before it reads them (a local heap
// of a v1 group, metadata cache entries): a few bytes can ask for terabytes. In a process of ours malloc returns null
// (more than the address space) or untouched overcommitted pages, which libhdf5 frees when the read past the file's
// end fails: an Error, not a crash. Under AddressSanitizer such a malloc aborts instead, so the harness restores the
// plain behaviour (null), and scripts/fuzz.sh lifts libFuzzer's malloc limit for it (its RSS limit stays). Options
// given in $ASAN_OPTIONS still apply. See fuzz/README.md.
extern "C" __attribute__((used)) const char* __asan_default_options() {
  return "allocator_may_return_null=1";
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (!listable(data, size)) {
    // Still an Error, never a crash, when HDF5 cannot open it at all.
    sprt_fuzz::ok([&] { util::h5::open_image(data, size, "fuzz-features.h5"); });
    return 0;
  }
  const auto counts = fuzz_features(data, size);
  fuzz_matches(data, size, counts);
  // Every identifier the readers opened is closed (HDF5 keeps its own caches; an identifier left open is ours).
  const ssize_t open_ids = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
  FUZZ_CHECK(open_ids == 0, "%zd HDF5 identifiers left open", open_ids);
  return 0;
}
