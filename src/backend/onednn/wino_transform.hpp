// What our Winograd F(4x4,3x3) kernels share (wino_f32.hpp, wino_u8.hpp): the output transform, in the one order
// their scalar references and vector kernels compute it.
#pragma once

namespace superpoint_rt::backend::detail {

/// The 1-D output transform A^T m of F(4x4,3x3) in the order every fp32 and int8 kernel uses (float; each product by
/// a power of two is exact, so a kernel may fuse it with its addition):
///   a = m1 + m2, b = m1 - m2, c = m3 + m4, d = m3 - m4;
///   y0 = (m0 + a) + c, y1 = b + 2d, y2 = a + 4c, y3 = (b + 8d) + m5.
template <class T>
inline void wino_output_1d(const T m[6], T y[4]) {
  const T a = m[1] + m[2], b = m[1] - m[2], c = m[3] + m[4], d = m[3] - m[4];
  y[0] = (m[0] + a) + c;
  y[1] = b + d * T(2);
  y[2] = a + c * T(4);
  y[3] = (b + d * T(8)) + m[5];
}

}  // namespace superpoint_rt::backend::detail
