// The scalar reference of ycc_channel_row (ycc_rows.hpp). Every intermediate fits 16 bits (column sums <= 1020,
// filter sums <= 4088), which the AVX2 form (ycc_rows_avx2.cpp) uses for 16 lanes per register.
static void ycc_channel_row_impl(const superpoint_rt::image::YccRow& r, std::int16_t* scratch, std::uint8_t* out) {
  const int cw = r.chroma_width;
  const int w = r.width;
  // Column sums with one replicated sample on each side (s[j] for chroma column j, s[-1] and s[cw] the copies).
  std::int16_t* __restrict s = scratch + 1;
  const std::uint8_t* __restrict near = r.near;
  const std::uint8_t* __restrict far = r.far;
  if (r.vfac == 2) {
    for (int j = 0; j < cw; ++j) s[j] = static_cast<std::int16_t>(3 * near[j] + far[j]);  // 3/4 nearer + 1/4 further
  } else {
    for (int j = 0; j < cw; ++j) s[j] = near[j];
  }
  s[-1] = s[0];
  s[cw] = s[cw - 1];
  // Upsampled chroma minus 128 (x), first as even / odd outputs for hfac 2, then interleaved.
  std::int16_t* __restrict x = s + cw + 1;  // w + 1 values
  if (r.hfac == 1) {
    if (r.vfac == 2) {
      const int bias = r.odd ? 2 : 1;  // h1v2_fancy_upsample
      for (int i = 0; i < w; ++i) x[i] = static_cast<std::int16_t>(((s[i] + bias) >> 2) - 128);
    } else {
      for (int i = 0; i < w; ++i) x[i] = static_cast<std::int16_t>(s[i] - 128);  // fullsize
    }
  } else {
    // Output 2j leans on column j - 1, output 2j + 1 on column j + 1. h2v2_fancy_upsample: (3 * this + neighbour
    // + 8 or 7) >> 4 on the column sums; h2v1_fancy_upsample: (... + 1 or 2) >> 2.
    const int shift = r.vfac == 2 ? 4 : 2;
    const int b0 = r.vfac == 2 ? 8 : 1, b1 = r.vfac == 2 ? 7 : 2;
    const int pairs = (w + 1) / 2;
    for (int j = 0; j < pairs; ++j) {
      const int t = 3 * s[j];
      x[2 * j] = static_cast<std::int16_t>(((t + s[j - 1] + b0) >> shift) - 128);
      x[2 * j + 1] = static_cast<std::int16_t>(((t + s[j + 1] + b1) >> shift) - 128);
    }
  }
  // jdcolor.c build_ycc_rgb_table: Cr_r = (FIX(1.40200) x + ONE_HALF) >> 16 with FIX(1.40200) = 91881, Cb_b the same
  // with FIX(1.77200) = 116130 (SCALEBITS 16). In 16-bit pieces: 91881 = 65536 + 26345 and 116130 = 131072 - 14942,
  // so (K x + 32768) >> 16 = m x + hi + (lo >> 15), where hi:lo = k x as a 32-bit product split into its signed
  // high and unsigned low halves (floor((hi * 65536 + lo + 32768) / 65536) = hi + (lo >= 32768)).
  const int m = r.red ? 1 : 2;
  const int k = r.red ? 26345 : -14942;
  const std::uint8_t* __restrict luma = r.luma;
  std::uint8_t* __restrict dst = out;
  for (int i = 0; i < w; ++i) {
    const int p = k * x[i];
    const int hi = static_cast<std::int16_t>(p >> 16);
    const int lo = static_cast<std::uint16_t>(p) >> 15;
    const int v = luma[i] + m * x[i] + hi + lo;
    dst[i] = static_cast<std::uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
  }
}
