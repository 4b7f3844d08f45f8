// hloc pair lists (src/sfm/pairs.hpp) and COLMAP's pair id (superpoint_rt/colmap.hpp). The database itself is
// checked against pycolmap in test_colmap.py.
#include <gtest/gtest.h>

#include "sfm/pairs.hpp"
#include "superpoint_rt/colmap.hpp"
#include "superpoint_rt/errors.hpp"

using namespace superpoint_rt;

namespace {

std::vector<std::pair<std::string, std::string>> flat(const std::vector<sfm::NamePair>& v) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& p : v) out.emplace_back(p.name0, p.name1);
  return out;
}

std::string error_of(std::string_view text) {
  try {
    sfm::parse_pairs(text, "p.txt");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Pairs, ReadAsHlocSplitsLines) {
  using P = std::pair<std::string, std::string>;
  // Python's universal newlines (\n, \r\n, \r) and str.split() (runs of blanks, tabs, \v, \f; leading and trailing).
  EXPECT_EQ(flat(sfm::parse_pairs("a.jpg b.jpg\nc/d.jpg\te.jpg\r\n  f g  \rh\v\fi\n", "p.txt")),
            (std::vector<P>{{"a.jpg", "b.jpg"}, {"c/d.jpg", "e.jpg"}, {"f", "g"}, {"h", "i"}}));
  // hloc's writers end without a newline; blank lines (hloc's parse_retrieval skips them) are skipped.
  EXPECT_EQ(flat(sfm::parse_pairs("\n\na b\n \t\nc d", "p.txt")), (std::vector<P>{{"a", "b"}, {"c", "d"}}));
  EXPECT_TRUE(sfm::parse_pairs("", "p.txt").empty());
  // The same name twice is a pair (of an image with itself; the export skips it).
  EXPECT_EQ(flat(sfm::parse_pairs("x x\n", "p.txt")), (std::vector<P>{{"x", "x"}}));
}

TEST(Pairs, OtherFieldCountsNameTheLine) {
  EXPECT_NE(error_of("a b\nc\n").find("p.txt:2: 'c' is not a pair"), std::string::npos) << error_of("a b\nc\n");
  EXPECT_NE(error_of("a b\r\n\r\nc d e\r\n").find("p.txt:3:"), std::string::npos);
  const std::string long_line = "a b " + std::string(500, 'x');
  const std::string e = error_of(long_line);
  EXPECT_NE(e.find("...'"), std::string::npos) << e;
  EXPECT_LT(e.size(), 400u);
}

TEST(Pairs, MissingFileIsNotFound) {
  try {
    sfm::read_pairs("/nonexistent/pairs.txt");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::NotFound);
  }
}

TEST(Colmap, PairIdIsColmaps) {
  // Database::ImagePairToPairId: kMaxNumImages * min + max.
  EXPECT_EQ(colmap_pair_id(1, 2), 2147483647LL + 2);
  EXPECT_EQ(colmap_pair_id(2, 1), 2147483647LL + 2);
  EXPECT_EQ(colmap_pair_id(3, 2), 2LL * 2147483647 + 3);
  EXPECT_EQ(colmap_pair_id(7, 7), 7LL * 2147483647 + 7);
}
