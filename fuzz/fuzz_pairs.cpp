// Fuzz harness: hloc pair lists (sfm::parse_pairs, src/sfm/pairs.hpp), the one text parser of `superpoint-rt colmap`
// (its HDF5 inputs are parsed by libhdf5, with our shape checks before any allocation: batch/hloc_read.hpp).
// Properties checked besides the sanitizers: every pair has two non-empty names without whitespace or line ends, and
// the names occur in the input in order.
#include <string>
#include <string_view>

#include "fuzz_util.hpp"
#include "sfm/pairs.hpp"

using namespace superpoint_rt;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<sfm::NamePair> pairs;
  if (!sprt_fuzz::ok([&] { pairs = sfm::parse_pairs(text, "fuzz-pairs.txt"); })) return 0;
  std::size_t at = 0;
  for (const auto& p : pairs)
    for (const std::string* n : {&p.name0, &p.name1}) {
      FUZZ_CHECK(!n->empty(), "an empty name");
      FUZZ_CHECK(n->find_first_of(" \t\v\f\r\n") == std::string::npos, "a name with whitespace: '%s'", n->c_str());
      const std::size_t found = text.find(*n, at);
      FUZZ_CHECK(found != std::string_view::npos, "'%s' is not in the input after offset %zu", n->c_str(), at);
      at = found + n->size();
    }
  return 0;
}
