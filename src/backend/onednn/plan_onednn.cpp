// oneDNN's primitives in a plan: convolutions (their implementation, made once per input layout and geometry;
// the weights reordered once per layout and shared by the backend's plans) and 2x2 max pooling. See executor.hpp.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/onednn/executor.hpp"

namespace superpoint_rt::backend::onednn {

ConvKind& OneDnnExecutor::conv_kind(const model::Conv& c, const memory::desc& src_md, float s_in, int ww, bool relu,
                                    const ConvRows& rows, const memory::desc* dst_given, bool output, const char* label,
                                    const char* impl, dnnl::algorithm impl_alg) {
  const memory::desc no_dst;
  for (const auto& k : conv_kinds_)
    if (k->label == label && k->src == src_md && k->rows.ih == rows.ih && k->rows.oh == rows.oh &&
        k->rows.top == rows.top && k->rows.bottom == rows.bottom && k->dst_given == (dst_given ? *dst_given : no_dst))
      return *k;
  auto kind = std::make_unique<ConvKind>();
  ConvKind& k = *kind;
  k.label = label;
  k.src = src_md;
  k.rows = rows;
  if (dst_given) k.dst_given = *dst_given;
  const memory::dim pad = c.kernel / 2;
  // bf16: activations and weights in bfloat16, accumulation in f32 inside oneDNN's kernels, bias f32; the outputs
  // of the last 1x1s are written as f32. int8: u8 activations, s8 weights, s32 accumulation, see below.
  // conv1a (one input channel) computes in f32 in both: its input is the exact plane, and rounding it (bf16 keeps
  // 8 bits of v / 255) or its 9-tap weights cost the most fidelity per millisecond saved (bf16 keypoint Jaccard vs
  // fp32 on the golden images: 0.917 all-bf16, 0.946 with conv1a f32; conv1a is 3% of the f32 forward). In bf16 its
  // f32 output is converted by the input reorder of conv1b; int8 does not come here for conv1a (add_conv1a_u8
  // rounds its f32 sums straight to u8).
  const LayerType type = c.in_channels == 1 ? LayerType::F32 : type_of(label);
  const bool int8 = type == LayerType::Int8;
  const dt ldt = read_type(type);
  const dt out_dt = output ? dt::f32 : dst_type(label, type);
  k.type = type;
  const memory::desc src_any({1, c.in_channels, rows.ih, ww}, ldt, tag::any);
  // Activations in oneDNN's blocked layout for this ISA: the Winograd and the classic direct JIT kernels read and
  // write it, so consecutive layers never need a reorder (format_tag::any would let oneDNN 2.6 pick channels-last
  // for its brgemm kernels, which measured slower here and forces reorders around every Winograd layer).
  // bf16 and int8 layers let oneDNN pick (it picks its channels-last brgconv kernels, which also cover AMX on CPUs
  // that have it; for bf16 here the blocked jit_bf16 kernels cost the same CPU time, 620-630 ms per forward).
  const tag act = c.out_channels % block_ == 0 && type == LayerType::F32 ? block_tag_ : tag::any;
  const memory::desc w_any({c.out_channels, c.in_channels, c.kernel, c.kernel}, int8 ? dt::s8 : ldt, tag::any);
  const memory::desc b_md({c.out_channels}, dt::f32, tag::x);
  memory::desc dst_md = dst_given ? *dst_given : memory::desc({1, c.out_channels, rows.oh, ww}, out_dt, act);

  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (relu) {
    dnnl::post_ops po;
    po.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    attr.set_post_ops(po);
  }
  // int8 quantisation (oneDNN 2.x semantics: dst = oscale[o] * (acc_s32 + bias[o]), then post-ops, then round and
  // saturate to the dst type):
  //   input q_x = x * s_in (u8; s_in = 255 / calibrated max of the producer), weights q_w = w * ws[o] (s8,
  //   ws[o] = 127 / max|w[o]|, per output channel), acc = sum q_x q_w ~ s_in ws[o] sum x w,
  //   bias' = b[o] s_in ws[o], oscale[o] = s_out / (s_in ws[o]) with s_out = 255 / calibrated max of this layer
  //   (u8 output), or 1 for an f32 / bf16 output (the logits, the descriptors, a layer of another type).
  if (int8) {
    k.s_in = s_in;
    if (!(s_in > 0)) throw Error(ErrorKind::Internal, std::string("int8: no input scale for ") + label);
    if (out_dt == dt::u8) k.s_out = out_scale(label);
    std::vector<float> oscale;
    k.ws = s8_weights_of(label, c).scales;
    for (int o = 0; o < c.out_channels; ++o) oscale.push_back(k.s_out / (s_in * k.ws[static_cast<std::size_t>(o)]));
    attr.set_output_scales(1 << 1, oscale);
  }
  // oneDNN's algorithm: what the kernel table chose (winograd / auto only where SUPERPOINT_RT_CONV_ALGO asks), else
  // direct, also where the table chose one of our kernels and the layer's neighbours did not let it run. oneDNN 2.6
  // has Winograd kernels for f32 only (a bf16 or int8 layer asked for it records "winograd->direct" below).
  const Kernel kernel = choice(label, c).kernel;
  const ConvAlgo algo = kernel == Kernel::OnednnWinograd ? ConvAlgo::Winograd
                        : kernel == Kernel::OnednnAuto   ? ConvAlgo::Auto
                                                         : ConvAlgo::Direct;
  auto make_pd = [&](dnnl::algorithm alg, const memory::desc& s) {
    return dnnl::convolution_forward::primitive_desc(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, alg, s, w_any, b_md, dst_md, {1, 1},
                                        {rows.top, pad}, {rows.bottom, pad}),
        attr, eng_);
  };
  const dnnl::algorithm want = impl                         ? impl_alg
                               : algo == ConvAlgo::Winograd ? dnnl::algorithm::convolution_winograd
                               : algo == ConvAlgo::Auto     ? dnnl::algorithm::convolution_auto
                                                            : dnnl::algorithm::convolution_direct;
  k.algo = to_string(algo);
  k.alg = want;
  // Which f32 Winograd kernel oneDNN 2.6 picks depends on the thread count at creation: F(2x2, 3x3)
  // (jit_fp32_wino_2x3) only while the layer's input fits a cache budget that grows with the threads, else F(4x4, 3x3)
  // (jit_wino_4x3); the two round differently. Each kernel on its own gives the same bits at every thread count
  // (measured on AMD Zen 4 for every SuperPoint layer shape at frames from 52x76 to 1600x1200, 1 to 32 threads,
  // tests/backend: Precision.*AcrossRunsPlansAndThreadCounts). So the kernel is the one oneDNN picks at ONE thread,
  // whatever the thread count: it is created (and run, Step::threads) at the largest thread count <= the plan's at
  // which oneDNN still picks it. F(4x4, 3x3) gives way to F(2x2, 3x3) only for small layers (e.g. conv1b at
  // 104x152 from 3 threads on Zen 4), which then run on fewer threads; at 640x480 every layer keeps every thread.
  // A stripe (made for one thread, on its lane) is the one-thread choice for its own shape, which must be the
  // unstriped layer's (checked below): the stripes then compute what the unstriped layer computes.
  // A stripe uses the unstriped layer's algorithm and nothing else: oneDNN 2.6 lists its Winograd implementations
  // for a direct convolution too, and creating one from such a descriptor crashes (found with a 16-row stripe).
  const int caller_threads = omp_get_max_threads();
  auto make_any_algo = [&](const memory::desc& s) {
    k.threads = 0;
    try {
      if (want == dnnl::algorithm::convolution_winograd && !impl) {
        omp_set_num_threads(1);
        const std::string chosen = make_pd(want, s).impl_info_str();  // throws: no Winograd kernel
        for (int t = caller_threads; t >= 1; --t) {
          omp_set_num_threads(t);
          auto p = make_pd(want, s);
          if (chosen != p.impl_info_str()) continue;
          omp_set_num_threads(caller_threads);
          if (t != caller_threads) k.threads = t;
          return p;
        }
      }
      omp_set_num_threads(caller_threads);
      return make_pd(want, s);
    } catch (const dnnl::error&) {
      omp_set_num_threads(caller_threads);
      if (want == dnnl::algorithm::convolution_direct || impl) throw;
      k.algo = std::string(to_string(algo)) + "->direct";  // no Winograd kernel for this shape / ISA
      k.alg = dnnl::algorithm::convolution_direct;
      return make_pd(dnnl::algorithm::convolution_direct, s);
    }
  };
  auto is_ref = [](const dnnl::convolution_forward::primitive_desc& p) {
    return std::string(p.impl_info_str()).rfind("ref", 0) == 0;
  };
  try {
    // Prefer reading the producer's layout as it is (no reorder); let oneDNN pick when that has no fast kernel.
    try {
      k.pd = make_any_algo(src_md);
    } catch (const dnnl::error&) {
    }
    if (!k.pd || is_ref(k.pd)) k.pd = make_any_algo(src_any);
    // Channels-last output with an odd channel count (65) has no JIT kernel on AVX2 / SSE4.1: let the convolution
    // write its own layout and reorder into the output buffer instead of running oneDNN's slow reference kernel.
    // The same when the blocked activation layout has no JIT kernel (conv1a on SSE4.1): any layout oneDNN likes.
    if (is_ref(k.pd) && !impl) {
      dst_md = memory::desc({1, c.out_channels, rows.oh, ww}, out_dt, tag::any);
      k.pd = make_any_algo(src_any);
      k.reorder_out = output;
    }
  } catch (const dnnl::error& e) {
    if (!impl) throw;
    throw StripeUnsupported(std::string(label) + ": " + e.what());
  }
  if (impl) {  // a stripe: the unstriped layer's implementation, writing the layout asked for
    // oneDNN's own first choice for the stripe's shape, never one reached with next_impl(): oneDNN 2.6 can list an
    // implementation there that crashes when its primitive is made (F(4x4,3x3) Winograd for a 16-row stripe, after
    // F(2x2,3x3)); the plan then tries another stripe height.
    if (std::string(k.pd.impl_info_str()) != impl)
      throw StripeUnsupported(std::string(label) + " picks " + k.pd.impl_info_str() + ", not " + impl +
                              ", for a stripe");
    if (dst_given && k.pd.dst_desc() != *dst_given)
      throw StripeUnsupported(std::string(label) + " writes another layout");
  }

  conv_kinds_.push_back(std::move(kind));
  return k;
}

void OneDnnExecutor::realise(ConvKind& k, const model::Conv& c) {
  if (k.prim) return;
  {
    // The JIT kernel is generated for the thread count its pd was made for.
    const ThreadsFor at(k.threads ? k.threads : omp_get_max_threads(), omp_get_max_threads());
    k.prim = dnnl::convolution_forward(k.pd);
  }
  if (k.pd.src_desc() != k.src) {
    dnnl::primitive_attr rattr;
    const bool quantise = k.type == LayerType::Int8 && k.src.data_type() != dt::u8;
    if (quantise) rattr.set_output_scales(0, {k.s_in});  // f32 / bf16 -> u8
    k.src_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(eng_, k.src, eng_, k.pd.src_desc(), rattr));
  }
  // Weights: OIHW user memory -> the primitive's preferred layout, once per layout among the backend's plans.
  k.weights = weight_cache_->get(k.label, k.pd.weights_desc(), k.s_in, [&] {
    const bool int8 = !k.ws.empty();
    // int8: the codes as f32 values code / ws[o], which the reorder's scales ws[o] map back to exactly those codes
    // (code / ws * ws is within 2 ulp of the code, far from a rounding boundary).
    std::vector<float> codes;
    if (int8) {
      const detail::S8Weights q = s8_weights_of(k.label.c_str(), c);
      const std::size_t per_out = q.codes.size() / static_cast<std::size_t>(c.out_channels);
      codes.resize(q.codes.size());
      for (std::size_t i = 0; i < codes.size(); ++i) codes[i] = q.codes[i] / q.scales[i / per_out];
    }
    memory w_user(memory::desc({c.out_channels, c.in_channels, c.kernel, c.kernel}, dt::f32, tag::oihw), eng_,
                  int8 ? codes.data() : const_cast<float*>(c.weight.data()));
    WeightCache::Entry e{memory(k.pd.weights_desc(), eng_), memory(k.pd.bias_desc(), eng_)};
    dnnl::primitive_attr wattr;
    if (int8) wattr.set_output_scales(1 << 0, k.ws);  // f32 -> s8 per output channel
    dnnl::reorder(w_user, e.w, wattr).execute(stream_, w_user, e.w);
    if (k.pd.bias_desc().data_type() != dt::f32) throw Error(ErrorKind::Internal, "oneDNN bias is not f32");
    for (std::size_t o = 0; o < c.bias.size(); ++o)
      static_cast<float*>(e.b.get_data_handle())[o] = int8 ? c.bias[o] * k.s_in * k.ws[o] : c.bias[o];
    stream_.wait();
    return e;
  });
}

memory OneDnnExecutor::add_conv(std::vector<Step>& seq, const model::Conv& c, const memory& src, int ww, bool relu,
                                const ConvRows& rows, const memory* dst, bool output, const char* label,
                                const char* impl, dnnl::algorithm impl_alg) {
  const memory::desc dst_desc = dst ? dst->get_desc() : memory::desc();
  ConvKind& k = conv_kind(c, src.get_desc(), scale_of(src), ww, relu, rows, dst ? &dst_desc : nullptr, output, label,
                          impl, impl_alg);
  realise(k, c);
  memory in = src;
  if (k.src_reorder) {
    // The layout the convolution wants for its input: reorder once per run (the producer's output may still be
    // needed: both heads read conv4b's).
    in = temp_memory(k.pd.src_desc(), false);
    seq.push_back({k.src_reorder, {{DNNL_ARG_FROM, src.get()}, {DNNL_ARG_TO, in.get()}}, {src, in}, nullptr, {}});
    describe(std::string(label) + "_in", "reorder");
  }
  const memory out = dst && !k.reorder_out ? *dst : new_activation(k.pd.dst_desc());
  Step s{k.prim,
         {{DNNL_ARG_SRC, in.get()},
          {DNNL_ARG_WEIGHTS, k.weights->w.get()},
          {DNNL_ARG_BIAS, k.weights->b.get()},
          {DNNL_ARG_DST, out.get()}},
         {in, k.weights->w, k.weights->b, out},
         nullptr,
         {}};
  if (const std::size_t sb = k.pd.scratchpad_desc().get_size(); sb > 0) {
    const memory scratch = temp_memory(memory::desc({static_cast<memory::dim>(sb)}, dt::u8, tag::x), true);
    s.args.push_back({DNNL_ARG_SCRATCHPAD, scratch.get()});
    s.keep.push_back(scratch);
  }
  s.threads = k.threads;
  if (record_ && !output) {
    s.label = label;
    s.out = out;
  }
  seq.push_back(std::move(s));
  // The scale a u8 reader of this activation quantises it with (its own input reorder when this layer writes f32 or
  // bf16).
  if (act_max_ && !output) scale_[out.get()] = out_scale(label);
  describe(label, std::string(to_string(k.type)) + ":" + k.algo + "(" + k.pd.impl_info_str() +
                      (k.threads ? "@" + std::to_string(k.threads) + "t" : "") + ")");
  if (k.reorder_out) {
    seq.push_back(
        {dnnl::reorder(out, *dst), {{DNNL_ARG_FROM, out.get()}, {DNNL_ARG_TO, dst->get()}}, {out, *dst}, nullptr, {}});
    describe(std::string(label) + "_out", "reorder");
    return *dst;
  }
  return out;
}

PoolKind& OneDnnExecutor::pool_kind(const memory::desc& src, const memory::desc* dst, const char* label) {
  const memory::desc no_dst;
  for (const auto& k : pool_kinds_)
    if (k->src == src && k->dst_given == (dst ? *dst : no_dst)) return *k;
  auto k = std::make_unique<PoolKind>();
  k->src = src;
  if (dst) k->dst_given = *dst;
  const auto dims = src.dims();
  const memory::desc dst_any({dims[0], dims[1], dims[2] / 2, dims[3] / 2}, src.data_type(), tag::any);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  try {
    k->pd = dnnl::pooling_forward::primitive_desc(
        dnnl::pooling_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::pooling_max, src,
                                    dst ? *dst : dst_any, {2, 2}, {2, 2}, {0, 0}, {0, 0}),
        attr, eng_);
  } catch (const dnnl::error& e) {
    if (!dst) throw;
    throw StripeUnsupported(std::string(label) + ": " + e.what());
  }
  pool_kinds_.push_back(std::move(k));
  return *pool_kinds_.back();
}

memory OneDnnExecutor::add_pool(std::vector<Step>& seq, const memory& src, const char* label, const memory* dst) {
  const memory::desc dst_desc = dst ? dst->get_desc() : memory::desc();
  PoolKind& k = pool_kind(src.get_desc(), dst ? &dst_desc : nullptr, label);
  if (!k.prim) k.prim = dnnl::pooling_forward(k.pd);
  const memory out = dst ? *dst : new_activation(k.pd.dst_desc());
  if (scale_.count(src.get())) scale_[out.get()] = scale_of(src);  // max pooling keeps the quantisation
  Step s{k.prim, {{DNNL_ARG_SRC, src.get()}, {DNNL_ARG_DST, out.get()}}, {src, out}, nullptr, {}};
  if (const std::size_t sb = k.pd.scratchpad_desc().get_size(); sb > 0) {
    const memory scratch = temp_memory(memory::desc({static_cast<memory::dim>(sb)}, dt::u8, tag::x), true);
    s.args.push_back({DNNL_ARG_SCRATCHPAD, scratch.get()});
    s.keep.push_back(scratch);
  }
  seq.push_back(std::move(s));
  describe(label, std::string("max2x2(") + k.pd.impl_info_str() + ")");
  return out;
}

}  // namespace superpoint_rt::backend::onednn
