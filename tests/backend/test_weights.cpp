// config.json / safetensors parsing and weights_from_tensors / load_weights_dir: good files, the real weights, and
// every malformed case the loader must refuse with a message naming the file, the tensor and the shapes.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/test_util.hpp"
#include "model/weights.hpp"
#include "superpoint_rt/errors.hpp"

namespace sp = superpoint_rt;
namespace m = superpoint_rt::model;

namespace {

struct RawTensor {
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> bytes;
};

// A minimal safetensors writer (independent of the parser under test): 8-byte LE length, JSON header, data.
std::vector<std::uint8_t> make_safetensors(const std::map<std::string, RawTensor>& ts,
                                           std::string header_override = "") {
  nlohmann::json h = nlohmann::json::object();
  h["__metadata__"] = {{"format", "pt"}};
  std::vector<std::uint8_t> data;
  for (const auto& [name, t] : ts) {
    h[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data.insert(data.end(), t.bytes.begin(), t.bytes.end());
  }
  const std::string hs = header_override.empty() ? h.dump() : header_override;
  // Assembled in a string: GCC 12 mis-reports -Warray-bounds on vector::insert into a small vector.
  std::string out;
  const std::uint64_t n = hs.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(static_cast<std::uint8_t>(n >> (8 * i))));
  out += hs;
  out.append(data.begin(), data.end());
  return std::vector<std::uint8_t>(out.begin(), out.end());
}

RawTensor f32(std::vector<std::int64_t> shape, float base = 0.f) {
  std::size_t n = 1;
  for (auto d : shape) n *= static_cast<std::size_t>(d);
  RawTensor t{"F32", shape, std::vector<std::uint8_t>(n * 4)};
  for (std::size_t i = 0; i < n; ++i) {
    const float v = base + static_cast<float>(i) * 0.25f;
    std::memcpy(t.bytes.data() + 4 * i, &v, 4);
  }
  return t;
}

// All tensors of a network with the given config (optionally with the "superpoint." prefix).
std::map<std::string, RawTensor> network_tensors(const m::ModelConfig& c, const std::string& prefix = "") {
  std::map<std::string, RawTensor> ts;
  auto add = [&](const std::string& n, int o, int i, int k) {
    ts[prefix + n + ".weight"] = f32({o, i, k, k}, 1.f);
    ts[prefix + n + ".bias"] = f32({o}, -1.f);
  };
  const auto& e = c.encoder_hidden_sizes;
  for (int b = 0; b < 4; ++b) {
    const int in = b == 0 ? 1 : e[static_cast<std::size_t>(b - 1)], out = e[static_cast<std::size_t>(b)];
    add("encoder.conv_blocks." + std::to_string(b) + ".conv_a", out, in, 3);
    add("encoder.conv_blocks." + std::to_string(b) + ".conv_b", out, out, 3);
  }
  add("keypoint_decoder.conv_score_a", c.decoder_hidden_size, e[3], 3);
  add("keypoint_decoder.conv_score_b", c.keypoint_decoder_dim, c.decoder_hidden_size, 1);
  add("descriptor_decoder.conv_descriptor_a", c.decoder_hidden_size, e[3], 3);
  add("descriptor_decoder.conv_descriptor_b", c.descriptor_decoder_dim, c.decoder_hidden_size, 1);
  return ts;
}

// Runs `f`, expects Error of `kind` whose message contains every string in `parts`.
void expect_error(const std::function<void()>& f, sp::ErrorKind kind, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no exception";
  } catch (const sp::Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << "'" << p << "' not in: " << e.what();
  }
}

std::map<std::string, m::Tensor> parse(const std::map<std::string, RawTensor>& ts) {
  return m::parse_safetensors(make_safetensors(ts), "x.safetensors");
}

}  // namespace

TEST(Config, DefaultsWhenAbsent) {
  const auto c = m::parse_config("{}", "config.json");
  EXPECT_EQ(c.encoder_hidden_sizes, (std::vector<int>{64, 64, 128, 128}));
  EXPECT_EQ(c.decoder_hidden_size, 256);
  EXPECT_EQ(c.keypoint_decoder_dim, 65);
  EXPECT_EQ(c.descriptor_decoder_dim, 256);
  EXPECT_FLOAT_EQ(c.keypoint_threshold, 0.005f);
  EXPECT_EQ(c.max_keypoints, -1);
  EXPECT_EQ(c.nms_radius, 4);
  EXPECT_EQ(c.border_removal_distance, 4);
}

TEST(Config, HonoursFields) {
  const auto c = m::parse_config(R"({"encoder_hidden_sizes":[16,32,48,64],"decoder_hidden_size":128,
      "descriptor_decoder_dim":96,"keypoint_threshold":0.015,"max_keypoints":512,"nms_radius":2,
      "border_removal_distance":8,"model_type":"superpoint","unknown_field":[1,2]})",
                                 "config.json");
  EXPECT_EQ(c.encoder_hidden_sizes, (std::vector<int>{16, 32, 48, 64}));
  EXPECT_EQ(c.decoder_hidden_size, 128);
  EXPECT_EQ(c.descriptor_decoder_dim, 96);
  EXPECT_FLOAT_EQ(c.keypoint_threshold, 0.015f);
  EXPECT_EQ(c.max_keypoints, 512);
  EXPECT_EQ(c.nms_radius, 2);
  EXPECT_EQ(c.border_removal_distance, 8);
  // The early HF form: hidden_sizes = encoder sizes + decoder size, descriptor_dim.
  const auto old = m::parse_config(R"({"hidden_sizes":[32,32,64,64,128],"descriptor_dim":64})", "old.json");
  EXPECT_EQ(old.encoder_hidden_sizes, (std::vector<int>{32, 32, 64, 64}));
  EXPECT_EQ(old.decoder_hidden_size, 128);
  EXPECT_EQ(old.descriptor_decoder_dim, 64);
}

TEST(Config, RealConfig) {
  const auto bytes = sprt_test::read_bytes(sprt_test::weights_dir() + "/config.json");
  const auto c = m::parse_config(std::string(bytes.begin(), bytes.end()), "config.json");
  EXPECT_EQ(c.encoder_hidden_sizes, (std::vector<int>{64, 64, 128, 128}));
  EXPECT_EQ(c.border_removal_distance, 4);
}

TEST(Config, MistypedFieldsNameFileAndField) {
  using K = sp::ErrorKind;
  expect_error([] { m::parse_config(R"({"nms_radius":"4"})", "a/config.json"); }, K::Model,
               {"a/config.json", "nms_radius", "integer"});
  expect_error([] { m::parse_config(R"({"nms_radius":4.5})", "c.json"); }, K::Model, {"c.json", "nms_radius"});
  expect_error([] { m::parse_config(R"({"keypoint_threshold":"high"})", "c.json"); }, K::Model,
               {"keypoint_threshold", "number"});
  expect_error([] { m::parse_config(R"({"keypoint_threshold":1.5})", "c.json"); }, K::Model,
               {"keypoint_threshold", "range"});
  expect_error([] { m::parse_config(R"({"encoder_hidden_sizes":[64,64,128]})", "c.json"); }, K::Model,
               {"encoder_hidden_sizes", "4 entries"});
  expect_error([] { m::parse_config(R"({"encoder_hidden_sizes":"64"})", "c.json"); }, K::Model,
               {"encoder_hidden_sizes"});
  expect_error([] { m::parse_config(R"({"encoder_hidden_sizes":[64,-1,128,128]})", "c.json"); }, K::Model,
               {"encoder_hidden_sizes"});
  expect_error([] { m::parse_config(R"({"keypoint_decoder_dim":64})", "c.json"); }, K::Model, {"keypoint_decoder_dim"});
  expect_error([] { m::parse_config(R"({"max_keypoints":-2})", "c.json"); }, K::Model, {"max_keypoints"});
  expect_error([] { m::parse_config("{not json", "broken.json"); }, K::Model, {"broken.json", "JSON"});
  expect_error([] { m::parse_config("[1,2]", "arr.json"); }, K::Model, {"arr.json", "object"});
}

TEST(Safetensors, ParsesEveryFloatDtype) {
  std::map<std::string, RawTensor> ts;
  ts["a"] = f32({2, 3});
  // F16: 1.0 (0x3C00), -2.0 (0xC000), 65504 (0x7BFF), smallest subnormal 2^-24 (0x0001).
  ts["h"] = {"F16", {4}, {0x00, 0x3C, 0x00, 0xC0, 0xFF, 0x7B, 0x01, 0x00}};
  // BF16: 1.0 (0x3F80), -0.5 (0xBF00).
  ts["b"] = {"BF16", {2}, {0x80, 0x3F, 0x00, 0xBF}};
  RawTensor d{"F64", {2}, std::vector<std::uint8_t>(16)};
  const double dv[2] = {0.1, -3.0};
  std::memcpy(d.bytes.data(), dv, 16);
  ts["d"] = d;
  ts["empty"] = {"F32", {0, 4}, {}};
  const auto p = parse(ts);
  ASSERT_EQ(p.size(), 5u);
  EXPECT_EQ(p.at("a").shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(p.at("a").data, (std::vector<float>{0.f, 0.25f, 0.5f, 0.75f, 1.f, 1.25f}));
  EXPECT_EQ(p.at("h").data, (std::vector<float>{1.f, -2.f, 65504.f, std::ldexp(1.f, -24)}));
  EXPECT_EQ(p.at("b").data, (std::vector<float>{1.f, -0.5f}));
  EXPECT_EQ(p.at("d").data, (std::vector<float>{static_cast<float>(0.1), -3.f}));
  EXPECT_TRUE(p.at("empty").data.empty());
}

TEST(Safetensors, RealFile) {
  const auto p = m::parse_safetensors(sprt_test::read_bytes(sprt_test::weights_dir() + "/model.safetensors"), "real");
  EXPECT_EQ(p.size(), 24u);
  EXPECT_EQ(p.at("keypoint_decoder.conv_score_b.weight").shape, (std::vector<std::int64_t>{65, 256, 1, 1}));
}

TEST(Safetensors, MalformedFilesAreRefused) {
  using K = sp::ErrorKind;
  const auto good = make_safetensors({{"w", f32({4, 4})}});
  // Truncated: data section shorter than the offsets.
  {
    const std::vector<std::uint8_t> b(good.begin(), good.end() - 5);
    expect_error([&] { m::parse_safetensors(b, "t.safetensors"); }, K::Model,
                 {"t.safetensors", "\"w\"", "out of range"});
  }
  // Shorter than the 8-byte length.
  expect_error([&] { m::parse_safetensors({1, 2, 3}, "s.safetensors"); }, K::Model, {"s.safetensors", "3 bytes"});
  // Header length past the end of the file.
  {
    auto b = good;
    b[0] = 0xFF;
    b[1] = 0xFF;
    expect_error([&] { m::parse_safetensors(b, "h.safetensors"); }, K::Model, {"h.safetensors", "header length"});
  }
  // Absurd header length (over 100 MB).
  {
    auto b = good;
    b[7] = 0x01;
    expect_error([&] { m::parse_safetensors(b, "big.safetensors"); }, K::Model, {"big.safetensors", "100 MB"});
  }
  // Header that is not JSON.
  expect_error([&] { m::parse_safetensors(make_safetensors({}, "{\"a\": nope"), "j.safetensors"); }, K::Model,
               {"j.safetensors", "JSON"});
  // Unsupported dtype.
  expect_error(
      [&] {
        parse({{"idx", {"I64", {1}, std::vector<std::uint8_t>(8)}}});
      },
      K::Model, {"x.safetensors", "\"idx\"", "I64"});
  // Byte count not matching the shape.
  expect_error([&] { parse({{"w", {"F32", {3}, std::vector<std::uint8_t>(8)}}}); }, K::Model, {"\"w\"", "12"});
  // Offsets reversed.
  expect_error(
      [&] {
        m::parse_safetensors(make_safetensors({}, R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})"),
                             "r.safetensors");
      },
      K::Model, {"r.safetensors", "data_offsets"});
  // Missing fields / negative shape.
  expect_error([&] { m::parse_safetensors(make_safetensors({}, R"({"w":{"dtype":"F32"}})"), "f"); }, K::Model,
               {"\"w\""});
  expect_error(
      [&] {
        m::parse_safetensors(make_safetensors({}, R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})"), "f");
      },
      K::Model, {"\"w\"", "shape"});
}

TEST(Weights, FromTensorsWithAndWithoutPrefix) {
  m::ModelConfig c;
  c.encoder_hidden_sizes = {8, 8, 16, 16};
  c.decoder_hidden_size = 32;
  c.descriptor_decoder_dim = 24;
  for (const std::string prefix : {"", "superpoint."}) {
    const auto w = m::weights_from_tensors(c, parse(network_tensors(c, prefix)), "x");
    ASSERT_EQ(w.encoder.size(), 8u);
    EXPECT_EQ(w.encoder[0].name, "encoder.conv_blocks.0.conv_a");
    EXPECT_EQ(w.encoder[0].in_channels, 1);
    EXPECT_EQ(w.encoder[0].out_channels, 8);
    EXPECT_EQ(w.encoder[4].in_channels, 8);
    EXPECT_EQ(w.encoder[4].out_channels, 16);
    EXPECT_EQ(w.encoder[4].weight.size(), 16u * 8 * 9);
    EXPECT_EQ(w.encoder[4].weight[1], 1.25f);
    EXPECT_EQ(w.encoder[4].bias[0], -1.f);
    EXPECT_EQ(w.score_b.out_channels, 65);
    EXPECT_EQ(w.score_b.kernel, 1);
    EXPECT_EQ(w.descriptor_b.out_channels, 24);
    EXPECT_EQ(w.descriptor_a.in_channels, 16);
    EXPECT_EQ(w.descriptor_a.out_channels, 32);
  }
}

TEST(Weights, MissingAndMisshapedTensorsNameTensorAndShapes) {
  const m::ModelConfig c;
  auto ts = network_tensors(c);
  ts.erase("keypoint_decoder.conv_score_b.bias");
  expect_error([&] { m::weights_from_tensors(c, parse(ts), "model.safetensors"); }, sp::ErrorKind::Model,
               {"model.safetensors", "missing tensor keypoint_decoder.conv_score_b.bias", "[65]"});
  ts = network_tensors(c);
  ts["encoder.conv_blocks.2.conv_a.weight"] = f32({128, 32, 3, 3});
  expect_error([&] { m::weights_from_tensors(c, parse(ts), "model.safetensors"); }, sp::ErrorKind::Model,
               {"encoder.conv_blocks.2.conv_a.weight", "[128, 32, 3, 3]", "expected [128, 64, 3, 3]"});
  // Shapes follow the config: the default-size weights do not fit a smaller config.
  m::ModelConfig small;
  small.descriptor_decoder_dim = 128;
  expect_error([&] { m::weights_from_tensors(small, parse(network_tensors(c)), "m"); }, sp::ErrorKind::Model,
               {"descriptor_decoder.conv_descriptor_b.weight", "[256, 256, 1, 1]", "expected [128, 256, 1, 1]"});
}

TEST(Weights, LoadDirRealAndMissingFiles) {
  const auto w = m::load_weights_dir(sprt_test::weights_dir());
  EXPECT_EQ(w.encoder.size(), 8u);
  EXPECT_EQ(w.encoder[1].weight.size(), 64u * 64 * 9);
  EXPECT_EQ(w.descriptor_b.bias.size(), 256u);

  sprt_test::TempDir t;
  expect_error([&] { m::load_weights_dir(t.path()); }, sp::ErrorKind::NotFound, {t.path(), "config.json"});
  sprt_test::write_bytes(t.file("config.json"), {'{', '}'});
  expect_error([&] { m::load_weights_dir(t.path()); }, sp::ErrorKind::NotFound, {"model.safetensors"});
  // A truncated copy of the real file is refused with the file named.
  auto real = sprt_test::read_bytes(sprt_test::weights_dir() + "/model.safetensors");
  sprt_test::write_bytes(
      t.file("model.safetensors"),
      std::vector<std::uint8_t>(real.begin(), real.begin() + static_cast<std::ptrdiff_t>(real.size() / 2)));
  expect_error([&] { m::load_weights_dir(t.path()); }, sp::ErrorKind::Model, {t.file("model.safetensors")});
}
