// Internal: LightGlue's weights in the form the forward pass (lightglue.cpp) uses, read from either key layout.
//
// cvg's state dict (lightglue/lightglue.py; older files name transformers.{i}.self_attn as self_attn.{i}):
//   input_proj.{weight,bias} (DISK, ALIKED)   posenc.Wr.weight (head_dim / 2 x 2)
//   transformers.{i}.self_attn.{Wqkv,out_proj,ffn.0,ffn.1,ffn.3}.{weight,bias}
//   transformers.{i}.cross_attn.{to_qk,to_v,to_out,ffn.0,ffn.1,ffn.3}.{weight,bias}
//   log_assignment.{i}.{matchability,final_proj}.{weight,bias}   token_confidence.{i}.token.0.{weight,bias} (i < L-1)
// transformers' (models/lightglue, the ETH-CVG/lightglue_superpoint safetensors; convert_lightglue_to_hf.py splits
// Wqkv, whose rows cvg interleaves as (head, dim, q/k/v), into q_proj / k_proj / v_proj, and copies to_qk into both
// q_proj and k_proj of the cross attention):
//   input_projection.*   positional_encoder.projector.weight
//   transformer_layers.{i}.self_attention.{q,k,v,o}_proj.*   transformer_layers.{i}.self_mlp.{fc1,layer_norm,fc2}.*
//   transformer_layers.{i}.cross_attention.{q,k,v,o}_proj.*  transformer_layers.{i}.cross_mlp.{fc1,layer_norm,fc2}.*
//   match_assignment_layers.{i}.{matchability,final_projection}.*   token_confidence.{i}.token.*
// Other keys (transformers' keypoint_detector.*, cvg's log_assignment.{i}.r) are not used, as cvg's
// load_state_dict(strict=False) ignores them.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/weights.hpp"

namespace superpoint_rt::lightglue::detail {

/// y = x W^T + b: W is out x in, row-major (torch's nn.Linear).
struct Linear {
  int out = 0, in = 0;
  std::vector<float> w, b;
};

struct Ffn {
  Linear fc1;                     // 2d -> 2d
  std::vector<float> ln_g, ln_b;  // LayerNorm(2d)
  Linear fc2;                     // 2d -> d
};

struct Layer {
  Linear self_qkv;  // d -> 3d: the rows of q, then k, then v, each with the heads contiguous (h * head_dim + k)
  Linear self_out;
  Ffn self_ffn;
  Linear cross_qkv;  // d -> 2d: to_qk's rows, then to_v's
  Linear cross_out;
  Ffn cross_ffn;
  Linear final_proj;  // d -> d
  Linear heads;       // d -> 2: matchability, then token confidence (absent at the last layer: 1 row)
};

struct Weights {
  int input_dim = 0, dim = 0, num_heads = 0, head_dim = 0;
  std::optional<Linear> input_proj;
  std::vector<float> wr;  // head_dim / 2 x 2: the positional encoding's projection
  std::vector<Layer> layers;
  std::string layout;  // "cvg" or "transformers"
  std::string source;
};

/// Builds Weights from a state dict in either layout (found from the keys). Throws Error(Model) naming `source` and
/// every missing or mis-shaped key (with the shape expected), or a layout it cannot tell.
Weights weights_from_tensors(const std::map<std::string, model::Tensor>& tensors, const std::string& source);

/// Loads a .pth, a .safetensors, a folder with model.safetensors, or a Hugging Face repo (hub.hpp).
Weights load_weights(const std::string& weights, const std::string& revision, const std::string& cache_dir,
                     bool local_files_only);

}  // namespace superpoint_rt::lightglue::detail
