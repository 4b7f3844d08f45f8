// The kernel table (src/backend/onednn/kernel_table.hpp): every row is reached by a layer and a CPU of its own (so a
// row added without a case here fails), the overrides, and on this CPU (ctest runs these again under each
// SUPERPOINT_RT_ISA cap) every layer of every precision's plan runs the kernel the table names for it.
#include <gtest/gtest.h>

#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "backend/onednn/kernel_table.hpp"
#include "common/test_util.hpp"
#include "model/weights.hpp"
#include "superpoint_rt/errors.hpp"
#include "util/cpu.hpp"

namespace sp = superpoint_rt;
namespace be = superpoint_rt::backend;
using be::onednn::Kernel;
using be::onednn::KernelCpu;
using be::onednn::KernelLayer;
using be::onednn::LayerType;

namespace {

const sp::model::Weights& real_weights() {
  static const sp::model::Weights w = sp::model::load_weights_dir(sprt_test::weights_dir());
  return w;
}

// CPUs by their units.
KernelCpu cpu_none() {
  return {};
}
KernelCpu cpu_avx2() {
  KernelCpu c;
  c.avx2_fma = true;
  return c;
}
KernelCpu cpu_avx2_vnni() {
  KernelCpu c = cpu_avx2();
  c.avx_vnni = true;
  return c;
}
KernelCpu cpu_avx512() {
  KernelCpu c = cpu_avx2();
  c.avx512 = c.onednn_avx512_core = true;
  return c;
}
KernelCpu cpu_avx512_vnni() {
  KernelCpu c = cpu_avx512();
  c.avx512_vnni = c.avx_vnni = true;
  return c;
}
KernelCpu cpu_amx() {
  KernelCpu c = cpu_avx512_vnni();
  c.amx = true;
  return c;
}

struct Case {
  const char* what;
  KernelLayer layer;
  KernelCpu cpu;
  Kernel want;
  const char* variant;
};

// SuperPoint's layers: conv1a (1 -> 64), a 64 -> 64 and a 128 -> 256 3x3 layer, the 1x1 heads.
constexpr KernelLayer conv1a_u8{1, 64, 3, LayerType::F32, true};
constexpr KernelLayer conv1a_f32{1, 64, 3, LayerType::F32, false};
constexpr KernelLayer f32_3x3{64, 64, 3, LayerType::F32, false};
constexpr KernelLayer head_f32{128, 256, 3, LayerType::F32, false};
constexpr KernelLayer int8_3x3{64, 64, 3, LayerType::Int8, false};
constexpr KernelLayer bf16_3x3{64, 64, 3, LayerType::Bf16, false};
constexpr KernelLayer score_b{256, 65, 1, LayerType::F32, false};
constexpr KernelLayer odd_f32{40, 40, 3, LayerType::F32, false};  // channels off every vector width

const std::vector<Case> kCases = {
    {"conv1a of an int8 plan, AVX-512", conv1a_u8, cpu_avx512(), Kernel::Conv1aU8, "avx512"},
    {"conv1a of an int8 plan, AVX2", conv1a_u8, cpu_avx2(), Kernel::Conv1aU8, "avx2"},
    {"conv1a of an int8 plan, no vector unit", conv1a_u8, cpu_none(), Kernel::Conv1aU8, "reference"},
    {"conv1a, fp32", conv1a_f32, cpu_avx512_vnni(), Kernel::OnednnDirect, ""},
    {"score_b (1x1)", score_b, cpu_avx512(), Kernel::OnednnDirect, ""},
    {"int8 3x3, AVX-512 VNNI", int8_3x3, cpu_avx512_vnni(), Kernel::WinoU8, "avx512_vnni"},
    {"int8 3x3 with AMX: oneDNN", int8_3x3, cpu_amx(), Kernel::OnednnDirect, ""},
    {"int8 3x3, AVX2 + AVX-VNNI", int8_3x3, cpu_avx2_vnni(), Kernel::WinoU8, "avx_vnni"},
    {"int8 3x3, AVX2", int8_3x3, cpu_avx2(), Kernel::WinoU8, "avx2"},
    {"int8 3x3, no vector unit", int8_3x3, cpu_none(), Kernel::OnednnDirect, ""},
    {"bf16 3x3", bf16_3x3, cpu_avx512_vnni(), Kernel::OnednnDirect, ""},
    {"fp32 3x3, AVX-512", f32_3x3, cpu_avx512(), Kernel::WinoF32, "avx512"},
    {"fp32 head 128->256, AVX-512", head_f32, cpu_avx512(), Kernel::WinoF32, "avx512"},
    {"fp32 3x3, AVX2", f32_3x3, cpu_avx2(), Kernel::WinoF32, "avx2"},
    {"fp32 head 128->256, AVX2", head_f32, cpu_avx2(), Kernel::WinoF32, "avx2"},
    {"fp32 3x3, no vector unit", f32_3x3, cpu_none(), Kernel::OnednnDirect, ""},
    {"fp32 3x3, channels off the vector width", odd_f32, cpu_avx512(), Kernel::OnednnDirect, ""},
};

// The plan description's entry for `label` ("conv2a:f32:wino_f32(ours:avx2)").
std::string layer_entry(const std::string& d, const std::string& label) {
  const std::size_t at = d.find(label + ":");
  if (at == std::string::npos) return "";
  return d.substr(at, d.find(' ', at) - at);
}

}  // namespace

TEST(KernelTable, EveryRowIsReachedAndEachCaseGetsItsKernel) {
  std::cout << be::onednn::kernel_table_text();
  std::set<int> reached;
  for (const Case& c : kCases) {
    const be::onednn::KernelChoice k = be::onednn::choose_kernel(c.layer, c.cpu);
    EXPECT_EQ(k.kernel, c.want) << c.what << ": " << be::onednn::to_string(k.kernel);
    EXPECT_EQ(std::string(k.variant), c.variant) << c.what;
    ASSERT_GE(k.row, 0) << c.what;
    reached.insert(k.row);
  }
  for (int i = 0; i < static_cast<int>(be::onednn::kernel_table().size()); ++i)
    EXPECT_TRUE(reached.count(i)) << "no case reaches row " << i << " (" << be::onednn::kernel_table()[i].layers
                                  << " | " << be::onednn::kernel_table()[i].type << " | "
                                  << be::onednn::kernel_table()[i].cpu << "): add one to kCases";
}

TEST(KernelTable, OverridesPickOneDnnOrOurs) {
  using be::onednn::choose_kernel;
  EXPECT_EQ(choose_kernel(f32_3x3, cpu_avx2(), "direct").kernel, Kernel::OnednnDirect);
  EXPECT_EQ(choose_kernel(f32_3x3, cpu_avx512(), "winograd").kernel, Kernel::OnednnWinograd);
  EXPECT_EQ(choose_kernel(f32_3x3, cpu_avx512(), "auto").kernel, Kernel::OnednnAuto);
  EXPECT_EQ(choose_kernel(f32_3x3, cpu_avx512(), "direct").row, -1);
  // "ours": the first of our rows that matches, else the table.
  EXPECT_EQ(choose_kernel(int8_3x3, cpu_avx512_vnni(), "ours").kernel, Kernel::WinoU8);
  EXPECT_EQ(choose_kernel(conv1a_f32, cpu_avx512(), "ours").kernel, Kernel::OnednnDirect);
  EXPECT_EQ(choose_kernel(odd_f32, cpu_avx512(), "ours").kernel, Kernel::OnednnDirect);
  EXPECT_EQ(choose_kernel(f32_3x3, cpu_avx2(), "").kernel, Kernel::WinoF32);
  try {
    choose_kernel(f32_3x3, cpu_avx2(), "fast");
    FAIL() << "no throw";
  } catch (const sp::Error& e) {
    EXPECT_EQ(e.kind(), sp::ErrorKind::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("fast"), std::string::npos) << e.what();
  }
}

TEST(KernelTable, PlansRunTheKernelsTheTableNamesOnThisCpu) {
  const KernelCpu cpu = be::onednn::kernel_cpu();
  const auto& wt = real_weights();
  struct Layer {
    const char* label;
    const sp::model::Conv* conv;
  };
  const Layer layers[] = {
      {"conv1a", &wt.encoder[0]}, {"conv1b", &wt.encoder[1]},         {"conv2a", &wt.encoder[2]},
      {"conv2b", &wt.encoder[3]}, {"conv3a", &wt.encoder[4]},         {"conv3b", &wt.encoder[5]},
      {"conv4a", &wt.encoder[6]}, {"conv4b", &wt.encoder[7]},         {"score_a", &wt.score_a},
      {"score_b", &wt.score_b},   {"descriptor_a", &wt.descriptor_a}, {"descriptor_b", &wt.descriptor_b}};
  std::vector<std::string> precisions{"fp32"};
  if (sp::util::cpu_features().avx2_fma()) precisions.push_back("int8");
  for (const std::string& p : precisions) {
    auto b = be::create_backend("cpu", wt, {1, p, {{64, 96, sprt_test::random_plane(64, 96, 4)}}});
    const auto plan = be::onednn::default_layer_plan(be::onednn::parse_precision(p));
    const std::string d = b->plan({64, 96})->plan_description();
    std::cout << p << ": " << d << "\n";
    for (const Layer& l : layers) {
      const LayerType type = l.conv->in_channels == 1 ? LayerType::F32 : plan.at(l.label);
      const KernelLayer kl{l.conv->in_channels, l.conv->out_channels, l.conv->kernel, type,
                           std::string(l.label) == "conv1a" && plan.at("conv1b") == LayerType::Int8};
      const be::onednn::KernelChoice k = be::onednn::choose_kernel(kl, cpu);
      const std::string e = layer_entry(d, l.label);
      switch (k.kernel) {
        case Kernel::WinoF32:
        case Kernel::WinoU8:
        case Kernel::Conv1aU8:
          EXPECT_NE(e.find(std::string(be::onednn::to_string(k.kernel)) + "(ours:" + k.variant + ")"),
                    std::string::npos)
              << p << " " << l.label << ": " << e;
          break;
        default:
          EXPECT_NE(e.find(":direct("), std::string::npos) << p << " " << l.label << ": " << e;
          EXPECT_EQ(e.find("ours"), std::string::npos) << p << " " << l.label << ": " << e;
      }
    }
  }
}
