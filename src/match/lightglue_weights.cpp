// LightGlue's weights from cvg's or transformers' key layout (lightglue_model.hpp).
#include <filesystem>

#include "match/lightglue_model.hpp"
#include "model/hub.hpp"
#include "model/pth.hpp"
#include "superpoint_rt/errors.hpp"
#include "util/file.hpp"

namespace superpoint_rt::lightglue::detail {
namespace {

namespace fs = std::filesystem;
using model::Tensor;

std::string shape_text(const std::vector<std::int64_t>& s) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

bool starts_with(const std::string& s, const std::string& p) {
  return s.compare(0, p.size(), p) == 0;
}

// Looks tensors up by name, collecting every problem so that one error lists them all.
class Reader {
 public:
  Reader(const std::map<std::string, Tensor>& t) : t_(t) {}
  bool has(const std::string& name) const { return t_.count(name) > 0; }
  const Tensor* get(const std::string& name, const std::vector<std::int64_t>& shape) {
    const auto it = t_.find(name);
    if (it == t_.end()) {
      problems_.push_back("missing tensor " + name + " (expected shape " + shape_text(shape) + ")");
      return nullptr;
    }
    if (it->second.shape != shape) {
      problems_.push_back("tensor " + name + " has shape " + shape_text(it->second.shape) + ", expected " +
                          shape_text(shape));
      return nullptr;
    }
    return &it->second;
  }
  std::vector<float> vec(const std::string& name, const std::vector<std::int64_t>& shape) {
    const Tensor* t = get(name, shape);
    return t ? t->data : std::vector<float>(static_cast<std::size_t>(shape_size(shape)));
  }
  Linear linear(const std::string& prefix, int out, int in) {
    return {out, in, vec(prefix + ".weight", {out, in}), vec(prefix + ".bias", {out})};
  }
  const Tensor* find(const std::string& name) const {
    const auto it = t_.find(name);
    return it == t_.end() ? nullptr : &it->second;
  }
  void problem(std::string p) { problems_.push_back(std::move(p)); }
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  static std::int64_t shape_size(const std::vector<std::int64_t>& s) {
    std::int64_t n = 1;
    for (auto d : s) n *= d;
    return n;
  }
  const std::map<std::string, Tensor>& t_;
  std::vector<std::string> problems_;
};

Linear stack_rows(const std::vector<const Linear*>& parts) {
  Linear r;
  r.in = parts[0]->in;
  for (const Linear* p : parts) {
    r.out += p->out;
    r.w.insert(r.w.end(), p->w.begin(), p->w.end());
    r.b.insert(r.b.end(), p->b.begin(), p->b.end());
  }
  return r;
}

// cvg's Wqkv rows are (head, k, q/k/v) interleaved: unflatten(-1, (heads, -1, 3)). Row (h * hd + k) * 3 + t of
// Wqkv becomes row t * d + h * hd + k: q, k and v each with their heads contiguous (what transformers' q_proj,
// k_proj and v_proj hold).
Linear deinterleave_qkv(const Linear& wqkv, int d) {
  Linear r;
  r.out = wqkv.out;
  r.in = wqkv.in;
  r.w.resize(wqkv.w.size());
  r.b.resize(wqkv.b.size());
  for (int f = 0; f < d; ++f)
    for (int t = 0; t < 3; ++t) {
      const auto src = static_cast<std::size_t>(f * 3 + t), dst = static_cast<std::size_t>(t * d + f);
      std::copy_n(wqkv.w.begin() + static_cast<std::ptrdiff_t>(src * wqkv.in), wqkv.in,
                  r.w.begin() + static_cast<std::ptrdiff_t>(dst * wqkv.in));
      r.b[dst] = wqkv.b[src];
    }
  return r;
}

Ffn ffn(Reader& r, const std::string& fc1, const std::string& ln, const std::string& fc2, int d) {
  return {r.linear(fc1, 2 * d, 2 * d), r.vec(ln + ".weight", {2 * d}), r.vec(ln + ".bias", {2 * d}),
          r.linear(fc2, d, 2 * d)};
}

}  // namespace

Weights weights_from_tensors(const std::map<std::string, Tensor>& in, const std::string& source) {
  // cvg's older files name the layers self_attn.{i} / cross_attn.{i}; its loader renames them, and so do we.
  std::map<std::string, Tensor> tensors;
  for (const auto& [k, v] : in) {
    std::string key = k;
    for (const std::string block : {"self_attn", "cross_attn"}) {
      // "self_attn.3.Wqkv.weight" -> "transformers.3.self_attn.Wqkv.weight"
      if (!starts_with(key, block + ".")) continue;
      const std::string rest = key.substr(block.size() + 1);
      const auto dot = rest.find('.');
      if (dot != std::string::npos) key = "transformers." + rest.substr(0, dot) + "." + block + rest.substr(dot);
    }
    tensors.emplace(std::move(key), v);
  }
  Reader r(tensors);
  Weights w;
  w.source = source;
  const bool cvg = r.has("posenc.Wr.weight"), hf = r.has("positional_encoder.projector.weight");
  if (cvg == hf)
    throw Error(ErrorKind::Model,
                source + ": not LightGlue weights: " +
                    (cvg ? std::string("both posenc.Wr.weight and positional_encoder.projector.weight")
                         : std::string("neither posenc.Wr.weight (cvg's layout) nor "
                                       "positional_encoder.projector.weight (transformers')")) +
                    " is present");
  w.layout = cvg ? "cvg" : "transformers";
  const Tensor& wr = *r.find(cvg ? "posenc.Wr.weight" : "positional_encoder.projector.weight");
  if (wr.shape.size() != 2 || wr.shape[1] != 2 || wr.shape[0] < 1 || wr.shape[0] > 1024)
    throw Error(ErrorKind::Model, source + ": the positional encoding's projection has shape " + shape_text(wr.shape) +
                                      ", expected [head_dim / 2, 2] (checkpoints with scales and orientations, "
                                      "add_scale_ori, as SIFT's, are not supported)");
  w.head_dim = static_cast<int>(2 * wr.shape[0]);
  w.wr = wr.data;
  // The width: the self attention's output projection (d x d).
  const std::string out0 =
      cvg ? "transformers.0.self_attn.out_proj.weight" : "transformer_layers.0.self_attention.o_proj.weight";
  const Tensor* o = r.find(out0);
  if (!o || o->shape.size() != 2 || o->shape[0] != o->shape[1] || o->shape[0] < 1 || o->shape[0] > 4096)
    throw Error(ErrorKind::Model, source + ": " +
                                      (o ? "tensor " + out0 + " has shape " + shape_text(o->shape) + ", expected [d, d]"
                                         : "missing tensor " + out0));
  const int d = static_cast<int>(o->shape[0]);
  if (d % w.head_dim != 0)
    throw Error(ErrorKind::Model, source + ": width " + std::to_string(d) + " is not a multiple of the head dim " +
                                      std::to_string(w.head_dim) + " (from the positional encoding)");
  w.dim = d;
  w.num_heads = d / w.head_dim;
  // input_dim: input_proj's, else d (cvg's nn.Identity).
  const std::string ip = cvg ? "input_proj" : "input_projection";
  if (const Tensor* t = r.find(ip + ".weight")) {
    if (t->shape.size() != 2 || t->shape[0] != d || t->shape[1] < 1 || t->shape[1] > 4096)
      r.problem("tensor " + ip + ".weight has shape " + shape_text(t->shape) + ", expected [" + std::to_string(d) +
                ", input_dim]");
    else
      w.input_proj = r.linear(ip, d, static_cast<int>(t->shape[1]));
  }
  w.input_dim = w.input_proj ? w.input_proj->in : d;
  // The layers: as many as there are self-attention blocks (cvg's n_layers, 9).
  int n = 0;
  while (r.has(cvg ? "transformers." + std::to_string(n) + ".self_attn.out_proj.weight"
                   : "transformer_layers." + std::to_string(n) + ".self_attention.o_proj.weight"))
    ++n;
  for (int i = 0; i < n; ++i) {
    const std::string s = std::to_string(i);
    Layer l;
    if (cvg) {
      const std::string t = "transformers." + s + ".";
      l.self_qkv = deinterleave_qkv(r.linear(t + "self_attn.Wqkv", 3 * d, d), d);
      l.self_out = r.linear(t + "self_attn.out_proj", d, d);
      l.self_ffn = ffn(r, t + "self_attn.ffn.0", t + "self_attn.ffn.1", t + "self_attn.ffn.3", d);
      const Linear qk = r.linear(t + "cross_attn.to_qk", d, d), v = r.linear(t + "cross_attn.to_v", d, d);
      l.cross_qkv = stack_rows({&qk, &v});
      l.cross_out = r.linear(t + "cross_attn.to_out", d, d);
      l.cross_ffn = ffn(r, t + "cross_attn.ffn.0", t + "cross_attn.ffn.1", t + "cross_attn.ffn.3", d);
      l.final_proj = r.linear("log_assignment." + s + ".final_proj", d, d);
      const Linear m = r.linear("log_assignment." + s + ".matchability", 1, d);
      const Linear tok = i + 1 < n ? r.linear("token_confidence." + s + ".token.0", 1, d) : Linear{};
      l.heads = i + 1 < n ? stack_rows({&m, &tok}) : m;
    } else {
      const std::string t = "transformer_layers." + s + ".";
      const Linear q = r.linear(t + "self_attention.q_proj", d, d), k = r.linear(t + "self_attention.k_proj", d, d),
                   v = r.linear(t + "self_attention.v_proj", d, d);
      l.self_qkv = stack_rows({&q, &k, &v});
      l.self_out = r.linear(t + "self_attention.o_proj", d, d);
      l.self_ffn = ffn(r, t + "self_mlp.fc1", t + "self_mlp.layer_norm", t + "self_mlp.fc2", d);
      // cvg's cross attention has one projection for queries and keys (to_qk); transformers stores it twice.
      const Linear cq = r.linear(t + "cross_attention.q_proj", d, d), ck = r.linear(t + "cross_attention.k_proj", d, d),
                   cv = r.linear(t + "cross_attention.v_proj", d, d);
      if (cq.w != ck.w || cq.b != ck.b)
        r.problem("tensor " + t + "cross_attention.k_proj differs from " + t +
                  "cross_attention.q_proj (LightGlue's cross attention shares one projection, to_qk)");
      l.cross_qkv = stack_rows({&cq, &cv});
      l.cross_out = r.linear(t + "cross_attention.o_proj", d, d);
      l.cross_ffn = ffn(r, t + "cross_mlp.fc1", t + "cross_mlp.layer_norm", t + "cross_mlp.fc2", d);
      l.final_proj = r.linear("match_assignment_layers." + s + ".final_projection", d, d);
      const Linear m = r.linear("match_assignment_layers." + s + ".matchability", 1, d);
      const Linear tok = i + 1 < n ? r.linear("token_confidence." + s + ".token", 1, d) : Linear{};
      l.heads = i + 1 < n ? stack_rows({&m, &tok}) : m;
    }
    w.layers.push_back(std::move(l));
  }
  if (n == 0)
    r.problem(std::string("missing tensor ") +
              (cvg ? "transformers.0.self_attn.out_proj.weight" : "transformer_layers.0.self_attention.o_proj.weight"));
  if (!r.problems().empty()) {
    std::string m = source + ": LightGlue weights (" + w.layout + " layout) do not match the network:";
    for (const auto& p : r.problems()) m += "\n  " + p;
    throw Error(ErrorKind::Model, m);
  }
  return w;
}

Weights load_weights(const std::string& weights, const std::string& revision, const std::string& cache_dir,
                     bool local_files_only) {
  std::error_code ec;
  auto ends_with = [](const std::string& s, const std::string& e) {
    return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
  };
  if (fs::is_regular_file(weights, ec)) {
    if (ends_with(weights, ".safetensors"))
      return weights_from_tensors(model::parse_safetensors(util::read_file(weights, model::kMaxPthBytes), weights),
                                  weights);
    return weights_from_tensors(model::load_pth(weights), weights);
  }
  std::string dir = weights;
  if (!fs::is_directory(weights, ec)) {
    if (!model::is_repo_id(weights))
      throw Error(ErrorKind::NotFound, "LightGlue weights not found: '" + weights +
                                           "' is neither a file, a folder nor a Hugging Face repo id");
    model::HubRequest req;
    req.repo_id = weights;
    req.revision = revision;
    req.cache_dir = cache_dir;
    req.local_files_only = local_files_only;
    req.files = {"model.safetensors"};
    dir = model::resolve_model(weights, req).dir;
  }
  const std::string st = (fs::path(dir) / "model.safetensors").string();
  if (!fs::is_regular_file(st, ec)) throw Error(ErrorKind::NotFound, "LightGlue weights not found: " + st);
  return weights_from_tensors(model::parse_safetensors(util::read_file(st, model::kMaxPthBytes), st), st);
}

}  // namespace superpoint_rt::lightglue::detail
