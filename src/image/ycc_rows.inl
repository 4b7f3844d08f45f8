// Body of ycc_channel_row (ycc_rows.hpp), included by ycc_rows.cpp (baseline) and ycc_rows_avx2.cpp: the same
// integer loops, so both builds give the same bits. Defines a function with internal linkage (see
// post/kernels.hpp for why the ISA files must not share inline functions with the baseline).
static void ycc_channel_row_impl(const superpoint_rt::image::YccRow& r, int* sums, std::uint8_t* out) {
  const int cw = r.chroma_width;
  // Column sums with one replicated sample on each side (sums[1 + j] for chroma column j).
  int* s = sums + 1;
  if (r.vfac == 2) {
    for (int j = 0; j < cw; ++j) s[j] = 3 * r.near[j] + r.far[j];  // h2v2 / h1v2: 3/4 nearer row + 1/4 further
  } else {
    for (int j = 0; j < cw; ++j) s[j] = r.near[j];
  }
  s[-1] = s[0];
  s[cw] = s[cw - 1];
  // Upsampled chroma first (plain loops the compiler vectorises), then the conversion.
  const int w = r.width;
  std::uint8_t* u = reinterpret_cast<std::uint8_t*>(s + cw + 1);  // w bytes after the sums
  if (r.hfac == 1) {
    if (r.vfac == 2) {
      const int bias = r.odd ? 2 : 1;  // h1v2_fancy_upsample
      for (int x = 0; x < w; ++x) u[x] = static_cast<std::uint8_t>((s[x] + bias) >> 2);
    } else {
      for (int x = 0; x < w; ++x) u[x] = static_cast<std::uint8_t>(s[x]);  // fullsize
    }
  } else {
    // hfac 2: output 2j leans on column j - 1, output 2j + 1 on column j + 1. h2v2_fancy_upsample:
    // (3 * this + neighbour + 8 or 7) >> 4 on the column sums; h2v1_fancy_upsample: (... + 1 or 2) >> 2.
    const int shift = r.vfac == 2 ? 4 : 2;
    const int b0 = r.vfac == 2 ? 8 : 1, b1 = r.vfac == 2 ? 7 : 2;
    const int pairs = (w + 1) / 2;
    for (int j = 0; j < pairs; ++j) {
      const int t = 3 * s[j];
      u[2 * j] = static_cast<std::uint8_t>((t + s[j - 1] + b0) >> shift);
      u[2 * j + 1] = static_cast<std::uint8_t>((t + s[j + 1] + b1) >> shift);
    }
  }
  // jdcolor.c build_ycc_rgb_table: FIX(1.40200) = 91881, FIX(1.77200) = 116130, ONE_HALF = 1 << 15, SCALEBITS 16.
  // Locals marked __restrict: otherwise every store through `out` may alias `r` and the loop stays scalar.
  const int k = r.red ? 91881 : 116130;
  const std::uint8_t* __restrict luma = r.luma;
  const std::uint8_t* __restrict up = u;
  std::uint8_t* __restrict dst = out;
  for (int x = 0; x < w; ++x) {
    const int v = luma[x] + ((k * (up[x] - 128) + 32768) >> 16);
    dst[x] = static_cast<std::uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
  }
}
