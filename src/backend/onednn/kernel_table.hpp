// Which kernel runs each convolution: ONE table from (the layer's shape, the type it computes in, the CPU's units) to
// a kernel, read top to bottom, the first row that matches wins (kernel_table.cpp holds the rows, each with the
// measurement that put it there). The plan (onednn_backend.cpp) asks choose_kernel() for every layer and then only
// checks what the table cannot see: whether the layer's neighbours give it the input it reads (our u8 Winograd needs
// u8 channels-last from conv1b on; an f32 kernel needs f32 in a row layout), and falls back to oneDNN's direct kernel
// where they do not (plan_description() then says so). `superpoint-rt info` prints the choice per layer, and
// tests/backend/test_kernel_table.cpp covers every row under each SUPERPOINT_RT_ISA cap.
//
// Kernel families, each with its own files and a plain scalar reference of the same bits beside its vector kernels:
//   oneDNN's primitives    direct / Winograd convolutions (onednn_backend.cpp makes them; oneDNN's own JIT)
//   WinoF32                wino_f32.hpp: fp32 Winograd F(4x4,3x3) + bias + ReLU (+ pool); avx2, avx512, reference
//   WinoU8                 wino_u8.hpp: int8 16-bit Winograd F(4x4,3x3) + bias + ReLU (+ pool), u8 NHWC in and out
//   Conv1aU8               conv1a_u8.hpp: conv1a in f32 written as the u8 NHWC input of an int8 conv1b
#pragma once

#include <span>
#include <string>

#include "backend/onednn/onednn_backend.hpp"

namespace superpoint_rt::backend::onednn {

enum class Kernel { OnednnDirect, OnednnWinograd, OnednnAuto, WinoF32, WinoU8, Conv1aU8 };
const char* to_string(Kernel k) noexcept;
/// Ours (not oneDNN's).
constexpr bool ours(Kernel k) noexcept {
  return k == Kernel::WinoF32 || k == Kernel::WinoU8 || k == Kernel::Conv1aU8;
}

/// The CPU as the table sees it: util::cpu_features() after the SUPERPOINT_RT_ISA cap, and oneDNN's effective ISA
/// (SUPERPOINT_RT_ISA also caps oneDNN's JIT, ONEDNN_MAX_CPU_ISA may cap it further).
struct KernelCpu {
  bool avx2_fma = false;
  bool avx512 = false;       // F + BW + VL + DQ
  bool avx512_vnni = false;  // vpdpwssd zmm
  bool avx_vnni = false;     // vpdpwssd ymm (AVX-VNNI)
  bool amx = false;
  bool onednn_avx512_core = false;  // oneDNN's f32 Winograd kernels need it
};
/// This process's CPU, as above.
KernelCpu kernel_cpu();

/// One convolution as the table sees it.
struct KernelLayer {
  int in_channels = 0, out_channels = 0, kernel = 0;
  LayerType type = LayerType::F32;
  /// conv1a only: its reader (conv1b) computes in int8, so conv1a may write u8 itself.
  bool int8_reader = false;
};

struct KernelRow {
  const char* layers;  // which layers, in words
  const char* type;    // the layer type(s) it covers
  const char* cpu;     // the units it needs
  Kernel kernel;
  const char* variant;  // ours: the vector kernel ("avx512", "avx2", "reference", ...); oneDNN: ""
  bool (*match)(const KernelLayer&, const KernelCpu&);
};
/// The rows, in the order they are tried.
std::span<const KernelRow> kernel_table();

struct KernelChoice {
  Kernel kernel = Kernel::OnednnDirect;
  const char* variant = "";
  int row = -1;  // index into kernel_table(), or -1: SUPERPOINT_RT_CONV_ALGO chose it
};

/// The first row that matches. `override_value`: the layer's SUPERPOINT_RT_CONV_ALGO value (nullptr / empty: the
/// table): "direct", "winograd", "auto" (oneDNN's kernels with that algorithm) or "ours" (the first of our rows that
/// matches, else the table); anything else throws InvalidArgument naming it.
KernelChoice choose_kernel(const KernelLayer& layer, const KernelCpu& cpu, const char* override_value = nullptr);

/// The table as text, one row a line ("row 3: 3x3 after conv1a | int8 | AVX-512 VNNI, no AMX -> wino_u8(avx512_vnni)"),
/// for `superpoint-rt info --kernels` and the docs.
std::string kernel_table_text();

}  // namespace superpoint_rt::backend::onednn
