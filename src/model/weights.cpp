// config.json + model.safetensors (Hugging Face layout) -> model::Weights. See weights.hpp.
#include "model/weights.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "superpoint_rt/errors.hpp"
#include "util/file.hpp"
#include "util/half.hpp"

namespace superpoint_rt::model {
namespace {

using nlohmann::json;

[[noreturn]] void model_error(const std::string& message) {
  throw Error(ErrorKind::Model, message);
}

std::string shape_str(const std::vector<std::int64_t>& s) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

// ---- config.json -------------------------------------------------------------------------------------------------

// Integer field: JSON integers only (HF's config would carry 4.0 as a float, which the PyTorch modules reject).
int get_int(const json& j, const char* field, const std::string& source, int lo, int hi, int dflt) {
  const auto it = j.find(field);
  if (it == j.end() || it->is_null()) return dflt;
  if (!it->is_number_integer()) {
    model_error(source + ": config field \"" + field + "\" must be an integer, found " + it->dump());
  }
  const auto v = it->get<std::int64_t>();
  if (v < lo || v > hi) {
    model_error(source + ": config field \"" + field + "\" = " + std::to_string(v) + " is out of range [" +
                std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return static_cast<int>(v);
}

float get_float(const json& j, const char* field, const std::string& source, double lo, double hi, float dflt) {
  const auto it = j.find(field);
  if (it == j.end() || it->is_null()) return dflt;
  if (!it->is_number()) model_error(source + ": config field \"" + field + "\" must be a number, found " + it->dump());
  const double v = it->get<double>();
  if (!(v >= lo && v <= hi)) {
    model_error(source + ": config field \"" + field + "\" = " + it->dump() + " is out of range [" +
                std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return static_cast<float>(v);
}

std::vector<int> get_int_list(const json& j, const char* field, const std::string& source) {
  const json& a = j.at(field);
  if (!a.is_array()) model_error(source + ": config field \"" + field + "\" must be a list of integers");
  std::vector<int> out;
  for (const auto& e : a) {
    if (!e.is_number_integer() || e.get<std::int64_t>() < 1 || e.get<std::int64_t>() > 65536) {
      model_error(source + ": config field \"" + field + "\" must hold integers in [1, 65536], found " + a.dump());
    }
    out.push_back(static_cast<int>(e.get<std::int64_t>()));
  }
  return out;
}

// ---- safetensors -------------------------------------------------------------------------------------------------

float bf16_to_float(std::uint16_t h) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

std::size_t dtype_size(const std::string& dt) {
  if (dt == "F32") return 4;
  if (dt == "F16" || dt == "BF16") return 2;
  if (dt == "F64") return 8;
  return 0;
}

// The safetensors reference implementation refuses headers over 100 MB; so do we (a corrupt length would otherwise
// make us parse garbage).
constexpr std::uint64_t kMaxHeader = 100u * 1000u * 1000u;
// File size limits: SuperPoint's config.json is under 1 KB and its weights 5 MB; these leave room for any variant
// while refusing a wrong file (a dataset, a disk image) before it is read into memory.
constexpr std::uint64_t kMaxConfigBytes = 16u << 20;
constexpr std::uint64_t kMaxSafetensorsBytes = std::uint64_t{4} << 30;

}  // namespace

ModelConfig parse_config(const std::string& json_text, const std::string& source) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception& e) {
    model_error(source + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) model_error(source + ": config must be a JSON object");
  ModelConfig c;
  if (j.contains("encoder_hidden_sizes") && !j["encoder_hidden_sizes"].is_null()) {
    c.encoder_hidden_sizes = get_int_list(j, "encoder_hidden_sizes", source);
  } else if (j.contains("hidden_sizes") && !j["hidden_sizes"].is_null()) {
    // Early HF configs (transformers@0239147b): hidden_sizes = encoder sizes + the decoder size.
    auto h = get_int_list(j, "hidden_sizes", source);
    if (h.size() != 5)
      model_error(source + ": config field \"hidden_sizes\" must have 5 entries, found " + std::to_string(h.size()));
    c.encoder_hidden_sizes.assign(h.begin(), h.begin() + 4);
    c.decoder_hidden_size = h[4];
  }
  if (c.encoder_hidden_sizes.size() != 4) {
    // HF builds one block per entry and pools after all but the last; the 8x8 cell of the keypoint head (and
    // the descriptor sampling) needs exactly three pools.
    model_error(source + ": config field \"encoder_hidden_sizes\" must have 4 entries, found " +
                std::to_string(c.encoder_hidden_sizes.size()));
  }
  c.decoder_hidden_size = get_int(j, "decoder_hidden_size", source, 1, 65536, c.decoder_hidden_size);
  c.keypoint_decoder_dim = get_int(j, "keypoint_decoder_dim", source, 65, 65, c.keypoint_decoder_dim);
  const int legacy_desc = get_int(j, "descriptor_dim", source, 1, 65536, c.descriptor_decoder_dim);
  c.descriptor_decoder_dim = get_int(j, "descriptor_decoder_dim", source, 1, 65536, legacy_desc);
  c.keypoint_threshold = get_float(j, "keypoint_threshold", source, 0.0, 1.0, c.keypoint_threshold);
  c.max_keypoints = get_int(j, "max_keypoints", source, -1, std::numeric_limits<int>::max(), c.max_keypoints);
  c.nms_radius = get_int(j, "nms_radius", source, 0, 1 << 20, c.nms_radius);
  c.border_removal_distance = get_int(j, "border_removal_distance", source, 0, 1 << 20, c.border_removal_distance);
  return c;
}

std::map<std::string, Tensor> parse_safetensors(const std::vector<std::uint8_t>& bytes, const std::string& source) {
  const std::string what = source + ": not a valid safetensors file: ";
  if (bytes.size() < 8)
    model_error(what + "only " + std::to_string(bytes.size()) +
                " bytes (the header length "
                "alone is 8)");
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[static_cast<std::size_t>(i)];
  if (n > kMaxHeader) model_error(what + "header length " + std::to_string(n) + " exceeds the 100 MB limit");
  if (n > bytes.size() - 8) {
    model_error(what + "header length " + std::to_string(n) + " exceeds the file size " + std::to_string(bytes.size()) +
                " (truncated?)");
  }
  const std::size_t data_begin = 8 + static_cast<std::size_t>(n);
  const std::size_t data_size = bytes.size() - data_begin;
  json h;
  try {
    h = json::parse(bytes.begin() + 8, bytes.begin() + static_cast<std::ptrdiff_t>(data_begin));
  } catch (const json::exception& e) {
    model_error(what + "header is not valid JSON: " + e.what());
  }
  if (!h.is_object()) model_error(what + "header is not a JSON object");

  std::map<std::string, Tensor> out;
  for (const auto& [name, e] : h.items()) {
    if (name == "__metadata__") continue;
    const std::string tw = what + "tensor \"" + name + "\": ";
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets")) {
      model_error(tw + "entry needs dtype, shape and data_offsets");
    }
    if (!e["dtype"].is_string()) model_error(tw + "dtype is not a string");
    const std::string dt = e["dtype"].get<std::string>();
    const std::size_t isz = dtype_size(dt);
    if (isz == 0) model_error(tw + "unsupported dtype " + dt + " (supported: F32, F16, BF16, F64)");
    Tensor t;
    std::uint64_t count = 1;
    if (!e["shape"].is_array()) model_error(tw + "shape is not a list");
    for (const auto& d : e["shape"]) {
      if (!d.is_number_unsigned()) model_error(tw + "shape " + e["shape"].dump() + " has a non-integer entry");
      const std::uint64_t v = d.get<std::uint64_t>();
      if (v != 0 && count > (std::uint64_t{1} << 40) / v) model_error(tw + "shape " + e["shape"].dump() + " too large");
      count *= v;
      t.shape.push_back(static_cast<std::int64_t>(v));
    }
    const json& off = e["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned()) {
      model_error(tw + "data_offsets must be two non-negative integers");
    }
    const std::uint64_t b = off[0].get<std::uint64_t>(), en = off[1].get<std::uint64_t>();
    if (b > en || en > data_size) {
      model_error(tw + "data_offsets [" + std::to_string(b) + ", " + std::to_string(en) +
                  "] out of range of the data section (" + std::to_string(data_size) + " bytes; truncated?)");
    }
    if (en - b != count * isz) {
      model_error(tw + "data_offsets span " + std::to_string(en - b) + " bytes but shape " + shape_str(t.shape) +
                  " of " + dt + " needs " + std::to_string(count * isz));
    }
    const std::uint8_t* p = bytes.data() + data_begin + b;
    t.data.resize(static_cast<std::size_t>(count));
    for (std::size_t i = 0; i < t.data.size(); ++i) {
      // safetensors is little-endian; x86-64 too, so memcpy reads the values as stored.
      if (dt == "F32") {
        std::memcpy(&t.data[i], p + 4 * i, 4);
      } else if (dt == "F64") {
        double v;
        std::memcpy(&v, p + 8 * i, 8);
        t.data[i] = static_cast<float>(v);
      } else {
        std::uint16_t v;
        std::memcpy(&v, p + 2 * i, 2);
        t.data[i] = dt == "F16" ? util::half_to_float(v) : bf16_to_float(v);
      }
    }
    out.emplace(name, std::move(t));
  }
  return out;
}

Weights weights_from_tensors(const ModelConfig& config, const std::map<std::string, Tensor>& tensors,
                             const std::string& source) {
  Weights w;
  w.config = config;
  std::vector<std::string> problems;

  // Finds `name` as is or with HF's "superpoint." prefix (SuperPointForKeypointDetection's state_dict).
  auto find = [&](const std::string& name) -> const Tensor* {
    if (auto it = tensors.find(name); it != tensors.end()) return &it->second;
    if (auto it = tensors.find("superpoint." + name); it != tensors.end()) return &it->second;
    return nullptr;
  };
  auto take = [&](const std::string& name, int out_c, int in_c, int k) {
    Conv c;
    c.name = name;
    c.out_channels = out_c;
    c.in_channels = in_c;
    c.kernel = k;
    const std::vector<std::int64_t> ws{out_c, in_c, k, k}, bs{out_c};
    for (const auto& [suffix, shape] : {std::pair{".weight", ws}, std::pair{".bias", bs}}) {
      const std::string tn = name + suffix;
      const Tensor* t = find(tn);
      if (!t) {
        problems.push_back("missing tensor " + tn + " (expected shape " + shape_str(shape) + ")");
        continue;
      }
      if (t->shape != shape) {
        problems.push_back("tensor " + tn + " has shape " + shape_str(t->shape) + ", expected " + shape_str(shape));
        continue;
      }
      (std::string(suffix) == ".weight" ? c.weight : c.bias) = t->data;
    }
    return c;
  };

  const auto& e = config.encoder_hidden_sizes;
  if (e.size() != 4) model_error(source + ": encoder_hidden_sizes must have 4 entries");
  for (int i = 0; i < 4; ++i) {
    const std::string block = "encoder.conv_blocks." + std::to_string(i);
    const int in = i == 0 ? 1 : e[static_cast<std::size_t>(i - 1)], out = e[static_cast<std::size_t>(i)];
    w.encoder.push_back(take(block + ".conv_a", out, in, 3));
    w.encoder.push_back(take(block + ".conv_b", out, out, 3));
  }
  const int d = config.decoder_hidden_size;
  w.score_a = take("keypoint_decoder.conv_score_a", d, e[3], 3);
  w.score_b = take("keypoint_decoder.conv_score_b", config.keypoint_decoder_dim, d, 1);
  w.descriptor_a = take("descriptor_decoder.conv_descriptor_a", d, e[3], 3);
  w.descriptor_b = take("descriptor_decoder.conv_descriptor_b", config.descriptor_decoder_dim, d, 1);
  if (!problems.empty()) {
    std::string m = source + ": weights do not match the network:";
    for (const auto& p : problems) m += "\n  " + p;
    model_error(m);
  }
  return w;
}

Weights load_weights_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string cfg = (fs::path(dir) / "config.json").string();
  const std::string st = (fs::path(dir) / "model.safetensors").string();
  for (const auto& f : {cfg, st}) {
    std::error_code ec;
    if (!fs::is_regular_file(f, ec)) throw Error(ErrorKind::NotFound, "model file not found: " + f);
  }
  const auto cfg_bytes = util::read_file(cfg, kMaxConfigBytes);
  const ModelConfig config = parse_config(std::string(cfg_bytes.begin(), cfg_bytes.end()), cfg);
  return weights_from_tensors(config, parse_safetensors(util::read_file(st, kMaxSafetensorsBytes), st), st);
}

}  // namespace superpoint_rt::model
