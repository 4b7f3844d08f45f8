// SuperPoint weights: config.json + model.safetensors in the Hugging Face layout.
//
// Tensor names are HF's (modeling_superpoint.py), with or without the "superpoint." prefix:
//   encoder.conv_blocks.{0..3}.conv_{a,b}.{weight,bias}
//   keypoint_decoder.conv_score_{a,b}.{weight,bias}
//   descriptor_decoder.conv_descriptor_{a,b}.{weight,bias}
// Weights are OIHW float32 (F16 / BF16 / F32 / F64 files are converted to float32 on load).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace superpoint_rt::model {

/// The fields of config.json we honour (HF SuperPointConfig defaults when absent).
struct ModelConfig {
  std::vector<int> encoder_hidden_sizes{64, 64, 128, 128};
  int decoder_hidden_size = 256;
  int keypoint_decoder_dim = 65;
  int descriptor_decoder_dim = 256;
  float keypoint_threshold = 0.005f;
  int max_keypoints = -1;
  int nms_radius = 4;
  int border_removal_distance = 4;
};

/// Parses config.json text. Throws Error(Model) naming `source` and the bad field.
ModelConfig parse_config(const std::string& json_text, const std::string& source);

struct Tensor {
  std::vector<std::int64_t> shape;
  std::vector<float> data;  // row-major
};

/// Parses a safetensors file (8-byte LE header length, JSON header, data). Throws Error(Model) naming `source` on a
/// malformed file (bad header length, offsets out of range, unsupported dtype).
std::map<std::string, Tensor> parse_safetensors(const std::vector<std::uint8_t>& bytes, const std::string& source);

/// One convolution: weight O x I x K x K, bias O.
struct Conv {
  std::string name;  // e.g. "encoder.conv_blocks.0.conv_a"
  int out_channels = 0, in_channels = 0, kernel = 0;
  std::vector<float> weight;  // OIHW
  std::vector<float> bias;
};

/// The network's convolutions in HF order, checked against the config.
struct Weights {
  ModelConfig config;
  std::vector<Conv> encoder;        // conv1a conv1b conv2a conv2b conv3a conv3b conv4a conv4b (8)
  Conv score_a, score_b;            // 3x3 128->256, 1x1 256->65
  Conv descriptor_a, descriptor_b;  // 3x3 128->256, 1x1 256->256
};

/// Builds Weights from parsed tensors; a missing or mis-shaped tensor is Error(Model) naming the tensor, the
/// expected and the found shape.
Weights weights_from_tensors(const ModelConfig& config, const std::map<std::string, Tensor>& tensors,
                             const std::string& source);

/// Loads `dir`/config.json + `dir`/model.safetensors. NotFound names the missing file.
Weights load_weights_dir(const std::string& dir);

}  // namespace superpoint_rt::model
