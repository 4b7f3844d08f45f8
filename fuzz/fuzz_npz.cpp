// Fuzz harness: the NumPy reader (src/util/npz.hpp): parse_npz (ZIP central directory, zip64, stored and deflated
// members) and parse_npy (the .npy header: magic, version, the dict literal, dtype, shape), then the dtype
// conversions of every array that parsed.
// Properties checked besides the sanitizers: an array holds exactly product(shape) * itemsize bytes, and each
// conversion returns product(shape) values.
#include <vector>

#include "fuzz_util.hpp"
#include "util/npz.hpp"

using namespace superpoint_rt;

namespace {
void check_array(const std::string& name, const util::NpyArray& a) {
  const std::int64_t n = a.size();
  FUZZ_CHECK(n >= 0, "%s: size %lld", name.c_str(), static_cast<long long>(n));
  const auto count = static_cast<std::size_t>(n);
  FUZZ_CHECK(count == 0 || a.data.size() % count == 0, "%s: %zu bytes for %zu elements", name.c_str(), a.data.size(),
             count);
  FUZZ_CHECK(a.as_float().size() == count, "%s: as_float", name.c_str());
  FUZZ_CHECK(a.as_double().size() == count, "%s: as_double", name.c_str());
  FUZZ_CHECK(a.as_int64().size() == count, "%s: as_int64", name.c_str());
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<std::uint8_t> bytes(data, data + size);
  std::map<std::string, util::NpyArray> arrays;
  // The conversions may refuse an array with an Error (e.g. a shape whose element count overflows); that is allowed.
  if (sprt_fuzz::ok([&] { arrays = util::parse_npz(bytes, "fuzz.npz"); })) {
    for (const auto& entry : arrays) sprt_fuzz::ok([&] { check_array(entry.first, entry.second); });
  }
  util::NpyArray one;
  if (sprt_fuzz::ok([&] { one = util::parse_npy(bytes.data(), bytes.size(), "fuzz.npy"); }))
    sprt_fuzz::ok([&] { check_array("npy", one); });
  return 0;
}
