// The readers of hloc's HDF5 files (src/match/h5.hpp) on file images made here in memory (util::h5::open_image, the
// entry the fuzz harness fuzz/fuzz_h5.cpp uses): hloc's dim-major layout read back as rows, and the bounds every read
// checks before it allocates (value width, declared and chunk shapes whose product overflows, object paths, links and
// storage that would reach other files), each an Error naming the file, the dataset and the limit, with nothing
// printed by HDF5.
#include <gtest/gtest.h>

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "common/test_util.hpp"
#include "match/h5.hpp"
#include "superpoint_rt/errors.hpp"
#include "util/half.hpp"
#include "util/hdf5.hpp"

using namespace superpoint_rt;
using matching::detail::FeatureReader;
using matching::detail::MatchReader;
using util::h5::Hid;

namespace {

// The bytes of an HDF5 file that `fill` writes (HDF5's core driver, no backing store: nothing on the disk).
std::vector<std::uint8_t> file_image(const std::function<void(hid_t)>& fill) {
  std::lock_guard lock(util::h5::lock());
  static int seq = 0;
  Hid fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  EXPECT_GE(H5Pset_fapl_core(fapl.get(), std::size_t{1} << 16, 0), 0);
  const std::string name = "test-image-" + std::to_string(seq++) + ".h5";
  Hid f(H5Fcreate(name.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), H5Fclose);
  EXPECT_TRUE(f.ok());
  fill(f.get());
  EXPECT_GE(H5Fflush(f.get(), H5F_SCOPE_GLOBAL), 0);
  const ssize_t n = H5Fget_file_image(f.get(), nullptr, 0);
  EXPECT_GT(n, 0);
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(n));
  EXPECT_EQ(H5Fget_file_image(f.get(), bytes.data(), bytes.size()), n);
  return bytes;
}

// Creates `path` (intermediate groups too) with `dims` of `type`, chunked by `chunk` when given, and writes `data`
// when given.
void dataset(hid_t file, const std::string& path, hid_t type, const std::vector<hsize_t>& dims, const void* data,
             const std::vector<hsize_t>& chunk = {}, const std::vector<hsize_t>& maxdims = {}) {
  Hid space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), maxdims.empty() ? nullptr : maxdims.data()),
            H5Sclose);
  ASSERT_TRUE(space.ok());
  Hid dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  if (!chunk.empty()) {
    ASSERT_GE(H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data()), 0);
  }
  Hid lcpl = util::h5::intermediate_groups();
  Hid ds(H5Dcreate2(file, path.c_str(), type, space.get(), lcpl.get(), dcpl.get(), H5P_DEFAULT), H5Dclose);
  ASSERT_TRUE(ds.ok()) << path;
  if (data) {
    ASSERT_GE(H5Dwrite(ds.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), 0);
  }
}

FeatureReader features(const std::vector<std::uint8_t>& bytes,
                       std::int64_t max_values = matching::detail::kMaxRecordValues) {
  std::lock_guard lock(util::h5::lock());
  return FeatureReader(util::h5::open_image(bytes.data(), bytes.size(), "mem-features.h5"), "mem-features.h5",
                       max_values);
}

// The message of the Error `f` throws (of `kind`); fails the test when it throws nothing or another kind.
template <class F>
std::string error_of(F&& f, ErrorKind kind) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no Error";
  return {};
}

const std::int64_t kSize[2] = {640, 480};

}  // namespace

TEST(H5Files, DimMajorFloat16DescriptorsAndKeypointsReadAsRows) {
  // hloc's layout: descriptors (dim, n), keypoints (n, 2), image_size (2,); a name with '/' is nested groups.
  const int dim = 3, n = 4;
  std::vector<std::uint16_t> d(dim * n);
  for (int k = 0; k < dim; ++k)
    for (int i = 0; i < n; ++i) d[k * n + i] = util::float_to_half(static_cast<float>(10 * i + k) / 64.0f);
  const float kp[n][2] = {{0, 0}, {1.5f, 2}, {639, 479}, {-0.5f, 3}};
  const auto bytes = file_image([&](hid_t f) {
    Hid f16(util::h5::make_f16_type(), H5Tclose);
    dataset(f, "db/a.jpg/descriptors", f16.get(), {dim, n}, d.data());
    dataset(f, "db/a.jpg/keypoints", H5T_NATIVE_FLOAT, {n, 2}, kp);
    dataset(f, "db/a.jpg/image_size", H5T_NATIVE_INT64, {2}, kSize);
  });
  const FeatureReader r = features(bytes);
  ASSERT_EQ(r.names(), std::vector<std::string>{"db/a.jpg"});
  EXPECT_EQ(r.shape("db/a.jpg"), std::make_pair(dim, std::size_t{n}));
  const auto rec = r.read("db/a.jpg");
  ASSERT_EQ(rec.values.size(), std::size_t{dim * n});
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < dim; ++k) EXPECT_EQ(rec.values[i * dim + k], static_cast<float>(10 * i + k) / 64.0f);
  const auto k = r.keypoints("db/a.jpg");
  EXPECT_EQ(k.width, 640);
  EXPECT_EQ(k.height, 480);
  EXPECT_FALSE(k.half);
  ASSERT_EQ(k.size(), std::size_t{n});
  EXPECT_EQ(k.xy[3], 2.0f);
}

TEST(H5Files, ValuesWiderThanNumpysWidestAreRefusedBeforeTheRead) {
  const auto bytes = file_image([&](hid_t f) {
    Hid wide(H5Tcopy(H5T_STD_I64LE), H5Tclose);
    ASSERT_GE(H5Tset_size(wide.get(), 32), 0);
    dataset(f, "a/descriptors", wide.get(), {2, 2}, nullptr);
  });
  const std::string m = error_of([&] { features(bytes).shape("a"); }, ErrorKind::InvalidArgument);
  EXPECT_NE(m.find("mem-features.h5 [a] descriptors: values of 32 bytes (1..16)"), std::string::npos) << m;
}

TEST(H5Files, ShapesWhoseProductOverflowsAreRefused) {
  // 2^33 x 2^33 values: the product wraps to 2^66 mod 2^64 = 0 in 64 bits (chunked, so nothing is stored).
  const hsize_t big = hsize_t{1} << 33;
  const auto bytes = file_image([&](hid_t f) {
    dataset(f, "a/descriptors", H5T_NATIVE_FLOAT, {big, big}, nullptr, {1, 1});
    dataset(f, "b/descriptors", H5T_NATIVE_FLOAT, {1, (hsize_t{1} << 27) + 1}, nullptr, {1, 1024});
  });
  const FeatureReader r = features(bytes);
  std::string m = error_of([&] { r.shape("a"); }, ErrorKind::InvalidArgument);
  EXPECT_NE(m.find("[a] descriptors: over 2^64 values (at most 134217728) in shape (8589934592, 8589934592)"),
            std::string::npos)
      << m;
  m = error_of([&] { r.read("b"); }, ErrorKind::InvalidArgument);
  EXPECT_NE(m.find("[b] descriptors: 134217729 values (at most 134217728)"), std::string::npos) << m;
}

TEST(H5Files, ChunksOverTheLimitAreRefusedWhateverTheDatasetsSize) {
  // One value stored in chunks of 2^20 x 2 (HDF5 would allocate a whole chunk to read a filtered one).
  const auto bytes = file_image([&](hid_t f) {
    const float one[2] = {1, 2};
    dataset(f, "a/keypoints", H5T_NATIVE_FLOAT, {1, 2}, one, {hsize_t{1} << 20, 2}, {H5S_UNLIMITED, 2});
    dataset(f, "a/image_size", H5T_NATIVE_INT64, {2}, kSize);
  });
  EXPECT_EQ(features(bytes).keypoints("a").size(), 1u);  // within the default limit
  const std::string m = error_of([&] { features(bytes, 1 << 16).keypoints("a"); }, ErrorKind::InvalidArgument);
  EXPECT_NE(m.find("[a] keypoints: chunks of 2097152 values (at most 65536)"), std::string::npos) << m;
}

// fuzz_h5's heap overflow in libhdf5 1.10 (fuzz/regressions/h5/crash-498b5c1a...): an unfiltered 16 x 8 float32
// chunk stored in 505 bytes was copied past its buffer by H5Dread. The reader refuses it before reading, by name.
// (Unfiltered chunks of the right size still read: ChunksOverTheLimitAreRefusedWhateverTheDatasetsSize.)
TEST(H5Files, AnUnfilteredChunkStoredShortIsRefusedBeforeTheRead) {
  const auto bytes = sprt_test::read_bytes(std::string(SPRT_SOURCE_DIR) +
                                           "/fuzz/regressions/h5/crash-498b5c1a9198aef1a422ea1901e77b30edb2f86e");
  const FeatureReader r = features(bytes);
  ASSERT_EQ(r.names().size(), 1u);
  const std::string m = error_of([&] { r.read(r.names()[0]); }, ErrorKind::InvalidArgument);
  EXPECT_NE(m.find("descriptors: an unfiltered chunk stored in 505 bytes (its shape needs 512)"), std::string::npos)
      << m;
}

TEST(H5Files, ValuesInExternalFilesAreNotRead) {
  const auto bytes = file_image([&](hid_t f) {
    const hsize_t dims[2] = {2, 2};
    Hid space(H5Screate_simple(2, dims, nullptr), H5Sclose);
    Hid dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    ASSERT_GE(H5Pset_external(dcpl.get(), "/etc/hostname", 0, 16), 0);
    Hid lcpl = util::h5::intermediate_groups();
    Hid ds(H5Dcreate2(f, "a/descriptors", H5T_NATIVE_FLOAT, space.get(), lcpl.get(), dcpl.get(), H5P_DEFAULT),
           H5Dclose);
    ASSERT_TRUE(ds.ok());
  });
  const std::string m = error_of([&] { features(bytes).read("a"); }, ErrorKind::InvalidArgument);
  EXPECT_NE(m.find("[a] descriptors: its values are stored in external files"), std::string::npos) << m;
}

TEST(H5Files, SoftAndExternalLinksAreNotFollowed) {
  const float d[2] = {1, 2};
  const auto bytes = file_image([&](hid_t f) {
    dataset(f, "a/descriptors", H5T_NATIVE_FLOAT, {1, 2}, d);
    ASSERT_GE(H5Lcreate_soft("/a", f, "soft", H5P_DEFAULT, H5P_DEFAULT), 0);
    ASSERT_GE(H5Lcreate_external("/nonexistent/other.h5", "/a", f, "ext", H5P_DEFAULT, H5P_DEFAULT), 0);
    const std::int64_t m0[1] = {0};
    dataset(f, "x.jpg/y.jpg/matches0", H5T_NATIVE_INT64, {1}, m0);
    ASSERT_GE(H5Lcreate_soft("/x.jpg", f, "z.jpg", H5P_DEFAULT, H5P_DEFAULT), 0);
  });
  const FeatureReader r = features(bytes);
  EXPECT_EQ(r.shape("a").second, 2u);
  error_of([&] { r.shape("soft"); }, ErrorKind::NotFound);
  error_of([&] { r.shape("ext"); }, ErrorKind::NotFound);
  std::lock_guard lock(util::h5::lock());
  const MatchReader m(util::h5::open_image(bytes.data(), bytes.size(), "mem-matches.h5"), "mem-matches.h5");
  EXPECT_TRUE(m.find("x.jpg", "y.jpg").has_value());
  EXPECT_FALSE(m.find("z.jpg", "y.jpg").has_value());  // z.jpg/y.jpg reaches x.jpg's group through the soft link
}

TEST(H5Files, ObjectPathsOverTheLimitAreRefusedWhileListing) {
  // 40 nested groups of 250-byte names: a path of 10039 bytes, over kMaxObjectPathBytes.
  std::string path;
  for (int i = 0; i < 40; ++i) path += (i ? "/" : "") + std::string(250, static_cast<char>('a' + i % 26));
  ASSERT_GT(path.size(), util::h5::kMaxObjectPathBytes);
  const float d[2] = {1, 2};
  const auto bytes = file_image([&](hid_t f) { dataset(f, path + "/descriptors", H5T_NATIVE_FLOAT, {1, 2}, d); });
  const std::string m = error_of([&] { features(bytes); }, ErrorKind::InvalidArgument);
  EXPECT_NE(m.find("mem-features.h5: an object path over 8448 bytes"), std::string::npos) << m;
}

TEST(H5Files, DamagedImagesAreAnIoErrorAndHdf5PrintsNothing) {
  auto bytes = file_image([&](hid_t f) {
    const float d[2] = {1, 2};
    dataset(f, "a/descriptors", H5T_NATIVE_FLOAT, {1, 2}, d);
  });
  bytes.resize(bytes.size() / 2);  // the superblock survives, the object headers do not
  const std::vector<std::uint8_t> junk(64, 0x5a);
  testing::internal::CaptureStderr();
  error_of([&] { features(bytes).read("a"); }, ErrorKind::Io);
  error_of([&] { features(junk); }, ErrorKind::Io);
  error_of([&] { features({}); }, ErrorKind::Io);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

// Issue 32: keypoints off their image are refused by name (plot-matches looped about 1e15 times drawing a keypoint at
// (1e15, 20), and overflowed an int at (1e15, 1e15)); hloc's own range, float16's rounding of it included, reads.
TEST(H5Files, KeypointsOffTheirImageAreRefused) {
  const float on[3][2] = {{-0.5f, -0.5f}, {639.5f, 479.5f}, {320, 240}};
  const float off[2][2] = {{10, 20}, {1e15f, 20}};
  const auto bytes = file_image([&](hid_t f) {
    dataset(f, "on/keypoints", H5T_NATIVE_FLOAT, {3, 2}, on);
    dataset(f, "on/image_size", H5T_NATIVE_INT64, {2}, kSize);
    dataset(f, "off/keypoints", H5T_NATIVE_FLOAT, {2, 2}, off);
    dataset(f, "off/image_size", H5T_NATIVE_INT64, {2}, kSize);
  });
  const FeatureReader r = features(bytes);
  EXPECT_EQ(r.keypoints("on").size(), 3u);
  const std::string m = error_of([&] { r.keypoints("off"); }, ErrorKind::InvalidArgument);
  EXPECT_NE(m.find("[off] keypoints: keypoint 1 at ("), std::string::npos) << m;
  EXPECT_NE(m.find("lies outside its image_size 640x480"), std::string::npos) << m;
}

// Issue 32: a 3,736-byte feature file declared (1, 2^27) descriptors, every one of them HDF5's fill value, and
// `match` took 10 GB on them. Declared values must be stored in the file: refused from the header, before any read.
TEST(H5Files, DeclaredValuesThatAreNotStoredAreRefused) {
  const auto bytes = file_image([&](hid_t f) {
    dataset(f, "a/descriptors", H5T_NATIVE_FLOAT, {1, hsize_t{1} << 27}, nullptr, {1, 4096});
    dataset(f, "b/descriptors", H5T_NATIVE_FLOAT, {4, 4}, nullptr);  // contiguous, never written
  });
  EXPECT_LT(bytes.size(), 64u << 10);
  const FeatureReader r = features(bytes);
  std::string m = error_of([&] { r.read("a"); }, ErrorKind::InvalidArgument);
  EXPECT_NE(m.find("[a] descriptors: declares 536870912 bytes of values but stores 0"), std::string::npos) << m;
  m = error_of([&] { r.shape("b"); }, ErrorKind::InvalidArgument);
  EXPECT_NE(m.find("[b] descriptors: declares 64 bytes of values but stores 0"), std::string::npos) << m;
}
