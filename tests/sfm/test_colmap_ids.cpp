// COLMAP's pair id (superpoint_rt/colmap.hpp). The database itself is checked against pycolmap in test_colmap.py.
#include <gtest/gtest.h>

#include "superpoint_rt/colmap.hpp"

using namespace superpoint_rt;

TEST(Colmap, PairIdIsColmaps) {
  // Database::ImagePairToPairId: kMaxNumImages * min + max.
  EXPECT_EQ(colmap_pair_id(1, 2), 2147483647LL + 2);
  EXPECT_EQ(colmap_pair_id(2, 1), 2147483647LL + 2);
  EXPECT_EQ(colmap_pair_id(3, 2), 2LL * 2147483647 + 3);
  EXPECT_EQ(colmap_pair_id(7, 7), 7LL * 2147483647 + 7);
}
