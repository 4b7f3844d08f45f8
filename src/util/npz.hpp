// NumPy .npy / .npz files (the format numpy.save / numpy.savez write and numpy.load reads).
// Writer: little-endian arrays, format version 1.0, uncompressed ZIP (np.savez). Reader: stored or deflated
// members, zip64 sizes (numpy >= 1.x writes them), dtypes f4 f8 f2 i1 i2 i4 i8 u1 u2 u4 u8 b1.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace superpoint_rt::util {

struct NpyArray {
  std::string dtype;  // numpy descr without byte order, e.g. "f4", "i8", "u1"
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> data;  // raw little-endian bytes, C order

  std::int64_t size() const;  // product of shape
  /// Converts any numeric dtype to float / double / int64.
  std::vector<float> as_float() const;
  std::vector<double> as_double() const;
  std::vector<std::int64_t> as_int64() const;

  static NpyArray from_float(const std::vector<float>& v, std::vector<std::int64_t> shape);
  static NpyArray from_int64(const std::vector<std::int64_t>& v, std::vector<std::int64_t> shape);
  static NpyArray from_bytes(std::string dtype, const void* p, std::size_t bytes, std::vector<std::int64_t> shape);
};

/// The bytes of a .npy file.
std::vector<std::uint8_t> npy_bytes(const NpyArray& a);
/// The bytes of a .npz file holding `arrays` (member names get ".npy" appended).
std::vector<std::uint8_t> npz_bytes(const std::map<std::string, NpyArray>& arrays);

NpyArray parse_npy(const std::uint8_t* p, std::size_t n, const std::string& source);
std::map<std::string, NpyArray> parse_npz(const std::vector<std::uint8_t>& bytes, const std::string& source);

std::map<std::string, NpyArray> load_npz(const std::string& path);

}  // namespace superpoint_rt::util
