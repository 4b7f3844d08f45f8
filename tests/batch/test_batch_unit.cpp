// Unit tests of src/batch/: float16 rounding against numpy, image listing (folders, globs, image lists, names),
// sharding, argument checks. The end-to-end tests (HDF5 layout read with h5py, SIGKILL, merge, Dask, Python) are in
// test_batch.py.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "batch/batch.hpp"
#include "common/test_util.hpp"
#include "match/h5.hpp"
#include "util/half.hpp"

namespace fs = std::filesystem;
using namespace superpoint_rt;

namespace {

void touch(const std::string& path) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << "x";
}

std::vector<std::string> names(const std::vector<batch::ImageEntry>& v) {
  std::vector<std::string> out;
  for (const auto& e : v) out.push_back(e.name);
  return out;
}

}  // namespace

TEST(Half, MatchesNumpyAstypeFloat16) {
  const std::string py = sprt_test::python_with(false);
  ASSERT_FALSE(py.empty()) << "no python3 with numpy (set $SUPERPOINT_RT_PYTHON)";
  // Every 257th float bit pattern (all exponents, signs, NaN/inf, subnormals) plus the exact rounding boundaries
  // around every half value (halfway points round to even).
  std::vector<std::uint32_t> bits;
  for (std::uint64_t u = 0; u <= 0xffffffffull; u += 257) bits.push_back(static_cast<std::uint32_t>(u));
  const auto half_to_float = [](std::uint32_t x) {  // finite, non-negative half bits -> exact float
    const std::uint32_t e = (x >> 10) & 31u, m = x & 1023u;
    return e == 0 ? std::ldexp(static_cast<float>(m), -24)
                  : std::ldexp(static_cast<float>(m | 1024u), static_cast<int>(e) - 25);
  };
  for (std::uint32_t h = 0; h < 0x7c00u; ++h) {
    const float a = half_to_float(h), b = half_to_float(h + 1);
    const float mid = a + (b - a) / 2;  // exact in float32
    std::uint32_t m;
    std::memcpy(&m, &mid, 4);
    for (std::uint32_t d = 0; d < 5; ++d)
      for (const std::uint32_t sign : {0u, 0x80000000u}) bits.push_back((m + d - 2u) | sign);
  }
  sprt_test::TempDir dir;
  std::vector<std::uint8_t> raw(bits.size() * 4);
  std::memcpy(raw.data(), bits.data(), raw.size());
  sprt_test::write_bytes(dir.file("in.f32"), raw);
  std::string log;
  const std::string cmd = py + " -c \"import numpy as np; np.fromfile('" + dir.file("in.f32") +
                          "', dtype='<f4').astype(np.float16).view('<u2').tofile('" + dir.file("out.f16") + "')\"";
  ASSERT_EQ(sprt_test::run_command(cmd, &log), 0) << log;
  const auto out = sprt_test::read_bytes(dir.file("out.f16"));
  ASSERT_EQ(out.size(), bits.size() * 2);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < bits.size(); ++i) {
    float x;
    std::memcpy(&x, &bits[i], 4);
    std::uint16_t want;
    std::memcpy(&want, out.data() + 2 * i, 2);
    const std::uint16_t got = util::float_to_half(x);
    const bool both_nan =
        (want & 0x7c00u) == 0x7c00u && (want & 0x3ffu) && (got & 0x7c00u) == 0x7c00u && (got & 0x3ffu);
    if (got != want && !both_nan && bad++ < 10)
      ADD_FAILURE() << "x bits " << std::hex << bits[i] << " got " << got << " numpy " << want;
  }
  EXPECT_EQ(bad, 0u);
}

TEST(List, FoldersGlobsNamesAndImageLists) {
  sprt_test::TempDir d;
  const std::string root = d.file("root");
  touch(root + "/b/2.JPG");
  touch(root + "/b/1.png");
  touch(root + "/a.webp");
  touch(root + "/c/d/e.tiff");
  touch(root + "/notes.txt");
  batch::ListSpec s;
  s.inputs = {root};
  EXPECT_EQ(names(batch::list_images(s)), (std::vector<std::string>{"a.webp", "b/1.png", "b/2.JPG", "c/d/e.tiff"}));
  s.globs = {"b/*"};
  EXPECT_EQ(names(batch::list_images(s)), (std::vector<std::string>{"b/1.png", "b/2.JPG"}));
  s.globs = {"*.txt"};
  EXPECT_EQ(names(batch::list_images(s)), (std::vector<std::string>{"notes.txt"}));
  // a sub-folder with the image root above it keeps the full relative names
  batch::ListSpec sub;
  sub.inputs = {root + "/c"};
  EXPECT_EQ(names(batch::list_images(sub)), (std::vector<std::string>{"d/e.tiff"}));
  sub.image_root = root;
  EXPECT_EQ(names(batch::list_images(sub)), (std::vector<std::string>{"c/d/e.tiff"}));
  touch(d.file("outside/x.png"));
  sub.inputs = {d.path()};
  EXPECT_THROW(batch::list_images(sub), Error);  // outside the root
  // files: the file name, or the path relative to the root
  batch::ListSpec f;
  f.inputs = {root + "/b/1.png", root + "/c/d/e.tiff"};
  EXPECT_EQ(names(batch::list_images(f)), (std::vector<std::string>{"1.png", "e.tiff"}));
  f.image_root = root;
  EXPECT_EQ(names(batch::list_images(f)), (std::vector<std::string>{"b/1.png", "c/d/e.tiff"}));
  // duplicate names are refused with both paths
  batch::ListSpec dup;
  touch(d.file("other/1.png"));
  dup.inputs = {root + "/b/1.png", d.file("other/1.png")};
  try {
    batch::list_images(dup);
    ADD_FAILURE() << "duplicate names accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("other/1.png"), std::string::npos) << e.what();
  }
  // an image list is relative to the root; comments and blank lines are skipped; ".." is refused
  std::ofstream(d.file("list.txt")) << "# comment\nb/2.JPG\n\r\n./a.webp\r\n";
  batch::ListSpec l;
  l.image_list = d.file("list.txt");
  l.image_root = root;
  const auto v = batch::list_images(l);
  EXPECT_EQ(names(v), (std::vector<std::string>{"a.webp", "b/2.JPG"}));
  EXPECT_EQ(fs::path(v[1].path), fs::path(root) / "b/2.JPG");
  std::ofstream(d.file("bad.txt")) << "../x.png\n";
  l.image_list = d.file("bad.txt");
  EXPECT_THROW(batch::list_images(l), Error);
  l.image_list = d.file("missing.txt");
  EXPECT_THROW(batch::list_images(l), Error);
}

TEST(Shard, PartitionIsDeterministicAndComplete) {
  std::vector<batch::ImageEntry> all;
  for (int i = 0; i < 103; ++i) all.push_back({"img" + std::to_string(1000 + i), ""});
  for (int n : {1, 2, 3, 7, 103, 200}) {
    std::multiset<std::string> seen;
    for (int i = 0; i < n; ++i) {
      const auto s = batch::shard(all, i, n);
      EXPECT_LE(s.size(), all.size() / static_cast<std::size_t>(n) + 1);
      for (const auto& e : s) seen.insert(e.name);
      EXPECT_EQ(names(s), names(batch::shard(all, i, n)));
    }
    EXPECT_EQ(seen.size(), all.size()) << n;
    EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()).size(), all.size()) << n;
  }
  EXPECT_EQ(batch::parse_shard("3/8"), (std::pair<int, int>{3, 8}));
  for (const char* bad : {"8/8", "-1/2", "1", "1/0", "a/b", "1/2x", "1/", "/2", "0/1000001"})
    EXPECT_THROW(batch::parse_shard(bad), Error) << bad;
}

namespace {

// A result of n keypoints with distinct values (keypoints on the network grid of a 640x480 image).
Features fake_features(std::size_t n, float seed) {
  Features f;
  f.image_size = {480, 640};
  f.network_size = {480, 640};
  f.has_descriptors = true;
  for (std::size_t i = 0; i < n; ++i) {
    f.keypoints.push_back(static_cast<float>(i % 640));
    f.keypoints.push_back(static_cast<float>(i % 480));
    f.scores.push_back(seed + static_cast<float>(i));
    for (int k = 0; k < f.descriptor_dim; ++k) f.descriptors.push_back(seed * 1000 + static_cast<float>(i * 256 + k));
  }
  return f;
}

}  // namespace

// hloc stores descriptors as (256, N): the blocked transposition gives every value its place, for N below, at and
// above the block size and not a multiple of it.
TEST(ToHloc, TransposesDescriptorsForEveryKeypointCount) {
  for (std::size_t n : {0u, 1u, 15u, 16u, 17u, 37u, 100u}) {
    const Features f = fake_features(n, 3);
    const batch::HlocFeatures h = batch::to_hloc(f);
    ASSERT_EQ(h.descriptors.size(), 256 * n);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t k = 0; k < 256; ++k) ASSERT_EQ(h.descriptors[k * n + i], f.descriptors[i * 256 + k]) << n;
  }
}

// The end of a run: start_final merges the parts (and the existing output) into <output>.tmp, which takes the images
// added before and after it (a name already there is replaced), and finish renames it over the output. A writer
// destroyed before finish leaves no <output>.tmp and the old output as it was.
TEST(PartWriter, TheLastImagesGoStraightIntoTheMergedOutput) {
  sprt_test::TempDir dir;
  const std::string out = dir.file("f.h5"), parts = out + ".parts";
  {
    batch::PartWriter w(parts, false);
    w.add("a.jpg", fake_features(5, 1));
    w.add("b.jpg", fake_features(6, 2));
    EXPECT_EQ(w.commit(), 2u);
    w.add("c.jpg", fake_features(7, 3));  // pending when the merge starts
    w.start_final(batch::part_files(out), out);
    EXPECT_TRUE(w.finishing());
    EXPECT_THROW(w.commit(), Error);
    w.add("b.jpg", fake_features(9, 4));  // replaces the part's b.jpg
    w.add("d.jpg", fake_features(3, 5));
    EXPECT_EQ(w.finish(), 4u);
  }
  EXPECT_FALSE(fs::exists(out + ".tmp"));
  const std::vector<std::string> want = {"a.jpg", "b.jpg", "c.jpg", "d.jpg"};
  const std::vector<std::size_t> sizes = {5, 9, 7, 3};
  const std::vector<float> seeds = {1, 4, 3, 5};
  const auto check_output = [&] {
    matching::detail::FeatureReader r(out);
    ASSERT_EQ(r.names(), want);
    for (std::size_t i = 0; i < want.size(); ++i) {
      const matching::detail::DescriptorRecord d = r.read(want[i]);
      EXPECT_EQ(d.n, sizes[i]) << want[i];
      const Features f = fake_features(sizes[i], seeds[i]);
      EXPECT_EQ(d.values, f.descriptors) << want[i];
    }
  };
  check_output();
  {
    batch::PartWriter w(out + ".parts2", false);
    w.start_final({}, out);  // the existing output is copied in
    w.add("e.jpg", fake_features(2, 6));
  }  // destroyed unfinished: the output is as it was
  EXPECT_FALSE(fs::exists(out + ".tmp"));
  check_output();
}
