// The kernel table of kernel_table.hpp. Each row says why it is where it is (measurements: docs/BENCHMARKS.md).
#include "backend/onednn/kernel_table.hpp"

#include <oneapi/dnnl/dnnl.hpp>

#include "backend/onednn/wino_f32.hpp"
#include "superpoint_rt/errors.hpp"
#include "util/cpu.hpp"

namespace superpoint_rt::backend::onednn {
namespace {

using L = KernelLayer;
using C = KernelCpu;

// clang-format off
constexpr KernelRow kRows[] = {
    // conv1a (one input channel, 3% of the multiply-adds): in an int8 plan it writes conv1b's u8 input itself (one
    // byte per value instead of oneDNN's f32 activation and a quantising reorder: 18 ms of a ~100 ms forward at one
    // thread); else oneDNN's direct kernel (Winograd measured 3x slower with one input channel).
    {"conv1a", "f32, read as int8", "AVX-512", Kernel::Conv1aU8, "avx512",
     [](const L& l, const C& c) { return l.in_channels == 1 && l.int8_reader && c.avx512 && l.out_channels % 16 == 0; }},
    {"conv1a", "f32, read as int8", "AVX2 + FMA", Kernel::Conv1aU8, "avx2",
     [](const L& l, const C& c) { return l.in_channels == 1 && l.int8_reader && c.avx2_fma && l.out_channels % 8 == 0; }},
    {"conv1a", "f32, read as int8", "any", Kernel::Conv1aU8, "reference",
     [](const L& l, const C&) { return l.in_channels == 1 && l.int8_reader; }},
    {"conv1a", "f32", "any", Kernel::OnednnDirect, "",
     [](const L& l, const C&) { return l.in_channels == 1; }},
    // The 1x1 heads (score_b, descriptor_b: 1.5% of the multiply-adds): oneDNN's, which write the executor's
    // channels-last outputs.
    {"1x1 (score_b, descriptor_b)", "any", "any", Kernel::OnednnDirect, "",
     [](const L& l, const C&) { return l.kernel == 1; }},
    // int8 3x3 layers after conv1a: our 16-bit Winograd (half of vpdpbusd's instructions for direct; 0.71x the
    // forward of oneDNN's direct kernels on Zen 4). Not with AMX, whose int8 tile multiplies should beat it (not
    // measured: no AMX machine).
    {"3x3 after conv1a", "int8", "AVX-512 VNNI, no AMX", Kernel::WinoU8, "avx512_vnni",
     [](const L& l, const C& c) {
       return l.type == LayerType::Int8 && l.kernel == 3 && c.avx512_vnni && !c.amx && l.in_channels % 32 == 0 &&
              l.out_channels % 64 == 0;
     }},
    // Without AVX-512: the same kernel on 256-bit registers, with AVX-VNNI's vpdpwssd ymm (Intel client CPUs since
    // Alder Lake, Zen 5) or AVX2's vpmaddwd + vpaddd; oneDNN's AVX2 int8 direct kernels do 144 u8 x s8 products per
    // 16 outputs and input channel in 3 instructions per 32 (vpmaddubsw, vpmaddwd, vpaddd), this 36 in 2 per 16
    // (docs/BENCHMARKS.md has the forwards side by side).
    {"3x3 after conv1a", "int8", "AVX-VNNI (256-bit)", Kernel::WinoU8, "avx_vnni",
     [](const L& l, const C& c) {
       return l.type == LayerType::Int8 && l.kernel == 3 && c.avx_vnni && !c.amx && l.in_channels % 16 == 0 &&
              l.out_channels % 16 == 0;
     }},
    {"3x3 after conv1a", "int8", "AVX2", Kernel::WinoU8, "avx2",
     [](const L& l, const C& c) {
       return l.type == LayerType::Int8 && l.kernel == 3 && c.avx2_fma && !c.amx && l.in_channels % 16 == 0 &&
              l.out_channels % 16 == 0;
     }},
    // Other int8 and every bf16 layer: oneDNN's direct kernels (its bf16 / AMX / VNNI / AVX2 u8 x s8 JIT).
    {"3x3", "int8, bf16", "any", Kernel::OnednnDirect, "",
     [](const L& l, const C&) { return l.type != LayerType::F32; }},
    // fp32 3x3 layers after conv1a: our Winograd F(4x4,3x3) (a quarter of direct's multiply-adds, with bias, ReLU and
    // pooling fused). AVX-512: faster than oneDNN 2.6's avx512_core Winograd on every layer (Intel Xeon, one thread,
    // ms: conv1b stripe 6.3 vs 11.6 + pool, conv2a 13.2 vs 28.3, conv3a 6.6 vs 9.7, conv3b 12.9 vs 39.2, conv4a 3.3 vs
    // 4.8, score_a 6.5 vs 7.1 (oneDNN's F(4x4,3x3)); docs/BENCHMARKS.md, issue 33), the whole forward 0.6x the CPU.
    {"3x3 after conv1a", "f32", "AVX-512", Kernel::WinoF32, "avx512",
     [](const L& l, const C& c) {
       return l.kernel == 3 && c.avx512 && l.in_channels % 16 == 0 && l.out_channels % detail::kWinoF32OcBlockAvx512 == 0;
     }},
    // AVX2 + FMA: oneDNN 2.6 has no f32 Winograd there; its direct kernels ran at about ONNX Runtime's speed.
    {"3x3 after conv1a", "f32", "AVX2 + FMA", Kernel::WinoF32, "avx2",
     [](const L& l, const C& c) {
       return l.kernel == 3 && c.avx2_fma && l.in_channels % 8 == 0 && l.out_channels % detail::kWinoF32OcBlockAvx2 == 0;
     }},
    // Anything else (no AVX2 + FMA, channel counts off the vector width): oneDNN's direct kernels.
    {"any", "any", "any", Kernel::OnednnDirect, "", [](const L&, const C&) { return true; }},
};
// clang-format on

}  // namespace

const char* to_string(Kernel k) noexcept {
  switch (k) {
    case Kernel::OnednnDirect: return "onednn_direct";
    case Kernel::OnednnWinograd: return "onednn_winograd";
    case Kernel::OnednnAuto: return "onednn_auto";
    case Kernel::WinoF32: return "wino_f32";
    case Kernel::WinoU8: return "wino_u8";
    case Kernel::Conv1aU8: return "conv1a_u8";
  }
  return "onednn_direct";
}

KernelCpu kernel_cpu() {
  const util::CpuFeatures& f = util::cpu_features();
  KernelCpu c;
  c.avx2_fma = f.avx2_fma();
  c.avx512 = f.avx512();
  c.avx512_vnni = f.avx512() && f.avx512_vnni;
  c.avx_vnni = f.avx2_fma() && f.avx_vnni;
  c.amx = f.amx;
  const auto isa = dnnl::get_effective_cpu_isa();
  using I = dnnl::cpu_isa;
  for (I i : {I::avx512_core, I::avx512_core_vnni, I::avx512_core_bf16, I::avx512_core_amx})
    if (isa == i) c.onednn_avx512_core = true;
  return c;
}

std::span<const KernelRow> kernel_table() {
  return kRows;
}

KernelChoice choose_kernel(const KernelLayer& layer, const KernelCpu& cpu, const char* override_value) {
  const std::string v = override_value ? override_value : "";
  if (v == "direct") return {Kernel::OnednnDirect, "", -1};
  if (v == "winograd") return {Kernel::OnednnWinograd, "", -1};
  if (v == "auto") return {Kernel::OnednnAuto, "", -1};
  if (!v.empty() && v != "ours")
    throw Error(ErrorKind::InvalidArgument,
                "SUPERPOINT_RT_CONV_ALGO=\"" + v + "\" is not one of direct, winograd, auto, ours");
  const auto rows = kernel_table();
  if (v == "ours")
    for (std::size_t i = 0; i < rows.size(); ++i)
      if (ours(rows[i].kernel) && rows[i].match(layer, cpu))
        return {rows[i].kernel, rows[i].variant, static_cast<int>(i)};
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (rows[i].match(layer, cpu)) return {rows[i].kernel, rows[i].variant, static_cast<int>(i)};
  return {};  // unreachable: the last row matches everything
}

std::string kernel_table_text() {
  std::string s;
  const auto rows = kernel_table();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const KernelRow& r = rows[i];
    s += "row " + std::to_string(i) + ": " + r.layers + " | " + r.type + " | " + r.cpu + " -> " + to_string(r.kernel);
    if (*r.variant) s += std::string("(") + r.variant + ")";
    s += "\n";
  }
  return s;
}

}  // namespace superpoint_rt::backend::onednn
