// resize_plane_rows (rows pulled from a callback: the fused JPEG decode + resize) against resize_plane on the same
// plane: bit-identical on random and awkward shapes and pixel steps, rows requested once each in increasing order,
// and a null row aborts with false.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <random>
#include <vector>

#include "image/resize.hpp"
#include "superpoint_rt/errors.hpp"

namespace img = superpoint_rt::image;

namespace {

struct RowFeed {
  const std::uint8_t* src = nullptr;
  std::ptrdiff_t stride = 0;
  int last = -1;                   // last row handed out
  bool ordered = true;             // every request was for a later row than the previous one
  int fail_at = -1;                // return null for this row
  std::vector<std::uint8_t> copy;  // the row is handed out from here (a buffer that changes every call)
  int step = 1;
  int width = 0;
};

const std::uint8_t* feed_row(void* ctx, int y) {
  auto* f = static_cast<RowFeed*>(ctx);
  if (y <= f->last) f->ordered = false;
  f->last = y;
  if (y == f->fail_at) return nullptr;
  const std::size_t n = static_cast<std::size_t>(f->width - 1) * static_cast<std::size_t>(f->step) + 1;
  f->copy.assign(f->src + y * f->stride, f->src + y * f->stride + static_cast<std::ptrdiff_t>(n));
  return f->copy.data();
}

}  // namespace

TEST(ResizeRows, MatchesResizePlaneOnRandomAndAwkwardShapes) {
  if (!img::resize_rows_available()) {
    const img::ResizePlan plan(4, 4, 2, 2);
    img::ResizeScratch scratch;
    std::vector<std::uint8_t> dst(4);
    EXPECT_THROW(img::resize_plane_rows(plan, feed_row, nullptr, 1, dst.data(), scratch), superpoint_rt::Error);
    return;
  }
  std::mt19937 rng(7);
  struct Shape {
    int iw, ih, ow, oh;
  };
  std::vector<Shape> shapes = {{1600, 900, 640, 480}, {640, 480, 640, 480}, {640, 900, 640, 480}, {1600, 480, 640, 480},
                               {1, 1, 640, 480},      {3, 2000, 640, 480},  {2000, 3, 640, 480},  {17, 13, 5, 29}};
  std::uniform_int_distribution<int> sz(1, 700);
  for (int i = 0; i < 12; ++i) shapes.push_back({sz(rng), sz(rng), sz(rng), sz(rng)});
  for (const Shape& s : shapes) {
    for (int step = 1; step <= 4; ++step) {
      const img::ResizePlan plan(s.iw, s.ih, s.ow, s.oh);
      const std::ptrdiff_t stride = static_cast<std::ptrdiff_t>(s.iw) * step + (step == 2 ? 5 : 0);
      std::vector<std::uint8_t> src(static_cast<std::size_t>(stride) * static_cast<std::size_t>(s.ih));
      for (auto& v : src) v = static_cast<std::uint8_t>(rng());
      std::vector<std::uint8_t> want(static_cast<std::size_t>(s.ow) * static_cast<std::size_t>(s.oh));
      std::vector<std::uint8_t> got(want.size(), 0xAB);
      img::ResizeScratch sa, sb;
      img::resize_plane(plan, src.data(), stride, step, want.data(), sa);
      RowFeed feed;
      feed.src = src.data();
      feed.stride = stride;
      feed.step = step;
      feed.width = s.iw;
      ASSERT_TRUE(img::resize_plane_rows(plan, feed_row, &feed, step, got.data(), sb));
      EXPECT_TRUE(feed.ordered) << s.iw << "x" << s.ih;
      EXPECT_LT(feed.last, s.ih);
      EXPECT_EQ(got, want) << s.iw << "x" << s.ih << " -> " << s.ow << "x" << s.oh << " step " << step;
    }
  }
}

TEST(ResizeRows, NullRowAborts) {
  if (!img::resize_rows_available()) return;  // the scalar case (it throws) is checked in the test above
  for (const auto& [iw, ih, ow, oh] :
       {std::array<int, 4>{100, 80, 30, 20}, std::array<int, 4>{30, 20, 30, 20}, std::array<int, 4>{30, 80, 30, 20}}) {
    const img::ResizePlan plan(iw, ih, ow, oh);
    std::vector<std::uint8_t> src(static_cast<std::size_t>(iw) * static_cast<std::size_t>(ih), 7);
    std::vector<std::uint8_t> dst(static_cast<std::size_t>(ow) * static_cast<std::size_t>(oh));
    img::ResizeScratch scratch;
    RowFeed feed;
    feed.src = src.data();
    feed.stride = iw;
    feed.width = iw;
    feed.fail_at = plan.ybox_first + (plan.ybox_last - plan.ybox_first) / 2;
    EXPECT_FALSE(img::resize_plane_rows(plan, feed_row, &feed, 1, dst.data(), scratch));
    EXPECT_EQ(feed.last, feed.fail_at);  // stopped at the failing row
  }
}
