// Baseline build of the YCbCr channel row (ycc_rows.hpp); the plain reference for the AVX2 build.
#include "image/ycc_rows.hpp"

namespace {
#include "image/ycc_rows.inl"
}  // namespace

namespace superpoint_rt::image {

void ycc_channel_row_reference(const YccRow& r, std::int16_t* scratch, std::uint8_t* out) {
  ycc_channel_row_impl(r, scratch, out);
}

}  // namespace superpoint_rt::image
