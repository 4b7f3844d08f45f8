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

/// Writes an .npz (np.savez's layout: stored ZIP members, as npz_bytes) straight into `out`: each member's data is
/// written once, by its `fill`, into its place in `out` (no copy of an array is made, so a server can send what it
/// wrote). Members of up to 4 GiB - 1 in all (no zip64); more throws Error(TooLarge).
class NpzWriter {
 public:
  explicit NpzWriter(std::string& out) : out_(out) {}
  /// Appends member `name`.npy of `dtype` and `shape` whose `bytes` data bytes fill(dst) writes.
  template <class Fill>
  void add(const std::string& name, const std::string& dtype, const std::vector<std::int64_t>& shape, std::size_t bytes,
           Fill&& fill) {
    const std::size_t data = begin(name, dtype, shape, bytes);
    fill(reinterpret_cast<std::uint8_t*>(out_.data() + data));
    end();
  }
  /// Appends the central directory: `out` then holds the whole file.
  void finish();
  /// The bytes of an .npz besides its members' data: at most this many per member (names of up to 64 bytes and
  /// shapes of up to 4 dimensions) plus finish()'s 22.
  static constexpr std::size_t kMemberOverhead = 256;

 private:
  std::size_t begin(const std::string& name, const std::string& dtype, const std::vector<std::int64_t>& shape,
                    std::size_t bytes);
  void end();
  struct Member {
    std::string fname;
    std::uint32_t crc, size, offset;
  };
  std::string& out_;
  std::vector<Member> members_;
  std::size_t header_ = 0;  // the current member's local header
  std::size_t npy_ = 0;     // the current member's .npy bytes (header and data)
};
/// The bytes of a .npz file holding `arrays` (member names get ".npy" appended).
std::vector<std::uint8_t> npz_bytes(const std::map<std::string, NpyArray>& arrays);

NpyArray parse_npy(const std::uint8_t* p, std::size_t n, const std::string& source);
std::map<std::string, NpyArray> parse_npz(const std::vector<std::uint8_t>& bytes, const std::string& source);

std::map<std::string, NpyArray> load_npz(const std::string& path);

}  // namespace superpoint_rt::util
