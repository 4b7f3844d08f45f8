// Fuzz harness: PyTorch checkpoints (src/model/pth.hpp): the zip directory, the restricted pickle machine (opcodes,
// memo, globals, persistent ids, _rebuild_tensor_v2), the tensor extents against their storages, then LightGlue's
// key layouts over what parsed (src/match/lightglue_model.hpp).
// Properties checked besides the sanitizers: a parsed tensor holds exactly product(shape) floats; every linear layer
// of LightGlue weights that were accepted has out x in weights and out biases.
#include <vector>

#include "fuzz_util.hpp"
#include "match/lightglue_model.hpp"
#include "model/pth.hpp"

using namespace superpoint_rt;

namespace {
void check_linear(const lightglue::detail::Linear& l) {
  FUZZ_CHECK(l.w.size() == static_cast<std::size_t>(l.out) * static_cast<std::size_t>(l.in) &&
                 l.b.size() == static_cast<std::size_t>(l.out),
             "linear %dx%d: %zu weights, %zu biases", l.out, l.in, l.w.size(), l.b.size());
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::map<std::string, model::Tensor> tensors;
  if (!sprt_fuzz::ok([&] { tensors = model::parse_pth(std::vector<std::uint8_t>(data, data + size), "fuzz.pth"); }))
    return 0;
  for (const auto& [name, t] : tensors) {
    std::size_t n = 1;
    for (const std::int64_t d : t.shape) {
      FUZZ_CHECK(d >= 0, "%s: dimension %lld", name.c_str(), static_cast<long long>(d));
      n *= static_cast<std::size_t>(d);
    }
    FUZZ_CHECK(t.data.size() == n, "%s: %zu values for %zu elements", name.c_str(), t.data.size(), n);
  }
  lightglue::detail::Weights w;
  if (!sprt_fuzz::ok([&] { w = lightglue::detail::weights_from_tensors(tensors, "fuzz.pth"); })) return 0;
  if (w.input_proj) check_linear(*w.input_proj);
  FUZZ_CHECK(w.wr.size() == static_cast<std::size_t>(w.head_dim), "Wr: %zu values", w.wr.size());
  for (const auto& l : w.layers)
    for (const auto* x : {&l.self_qkv, &l.self_out, &l.cross_qkv, &l.cross_out, &l.final_proj, &l.heads,
                          &l.self_ffn.fc1, &l.self_ffn.fc2, &l.cross_ffn.fc1, &l.cross_ffn.fc2})
      check_linear(*x);
  return 0;
}
