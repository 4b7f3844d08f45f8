// Fuzz harness: the weight files (src/model/weights.hpp): parse_config (config.json), parse_safetensors and
// weights_from_tensors, which checks every tensor against the config.
// Input: a safetensors file, optionally followed by kConfigSeparator and a config.json text. Without the separator
// the whole input goes to both parsers (a config.json seed then reaches parse_config, a safetensors seed
// parse_safetensors). The tensors that parse are checked against the parsed config, or the defaults.
// Properties checked besides the sanitizers: a parsed tensor holds exactly product(shape) floats; every convolution
// that weights_from_tensors returns has out * in * k * k weights and out biases.
#include <string>
#include <vector>

#include "fuzz_util.hpp"
#include "model/weights.hpp"

using namespace superpoint_rt;

namespace {
constexpr std::string_view kConfigSeparator = "\n--config.json--\n";

void check_conv(const model::Conv& c) {
  const auto n = static_cast<std::size_t>(c.out_channels) * c.in_channels * c.kernel * c.kernel;
  FUZZ_CHECK(c.weight.size() == n && c.bias.size() == static_cast<std::size_t>(c.out_channels),
             "%s: %zu weights, %zu biases for %dx%dx%dx%d", c.name.c_str(), c.weight.size(), c.bias.size(),
             c.out_channels, c.in_channels, c.kernel, c.kernel);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const sprt_fuzz::Split parts = sprt_fuzz::split_at({data, size}, kConfigSeparator);
  const std::span<const std::uint8_t> st = parts.before, cfg_text = parts.found ? parts.after : parts.before;
  model::ModelConfig config;
  sprt_fuzz::ok(
      [&] { config = model::parse_config(std::string(cfg_text.begin(), cfg_text.end()), "fuzz/config.json"); });
  std::map<std::string, model::Tensor> tensors;
  if (!sprt_fuzz::ok([&] {
        tensors = model::parse_safetensors(std::vector<std::uint8_t>(st.begin(), st.end()), "fuzz/model.safetensors");
      }))
    return 0;
  for (const auto& [name, t] : tensors) {
    std::size_t n = 1;
    for (const std::int64_t d : t.shape) {
      FUZZ_CHECK(d >= 0, "%s: dimension %lld", name.c_str(), static_cast<long long>(d));
      n *= static_cast<std::size_t>(d);
    }
    FUZZ_CHECK(t.data.size() == n, "%s: %zu values for %zu elements", name.c_str(), t.data.size(), n);
  }
  model::Weights w;
  if (!sprt_fuzz::ok([&] { w = model::weights_from_tensors(config, tensors, "fuzz"); })) return 0;
  for (const auto& c : w.encoder) check_conv(c);
  for (const auto* c : {&w.score_a, &w.score_b, &w.descriptor_a, &w.descriptor_b}) check_conv(*c);
  return 0;
}
