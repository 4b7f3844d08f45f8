// AVX2 build of the YCbCr channel row (ycc_rows.hpp): the compiler vectorises the same integer loops.
#include "image/ycc_rows.hpp"

namespace {
#include "image/ycc_rows.inl"
}  // namespace

namespace superpoint_rt::image::detail {

void ycc_channel_row_avx2(const YccRow& r, int* sums, std::uint8_t* out) {
  ycc_channel_row_impl(r, sums, out);
}

}  // namespace superpoint_rt::image::detail
