// The oneDNN (CPU; float32, or the reduced precisions bfloat16 / int8, see Precision) implementation of backend.hpp.
//
// The network (docs/ALGORITHM.md §3.3-3.7) is a fixed chain of layers created once per plan():
//   conv1a relu conv1b relu pool | conv2a conv2b pool | conv3a conv3b pool | conv4a conv4b
//   -> score head (3x3 + relu, 1x1 -> logits, nhwc)   [always]
//   -> descriptor head (3x3 + relu, 1x1 -> descriptors, nhwc)   [run(true) only]
// Each convolution runs on the kernel the kernel table chooses (kernel_table.hpp): oneDNN's primitives, or ours (fp32
// and int8 Winograd for the 3x3 layers after conv1a, with bias, ReLU and the pool fused; conv1a writing u8 in an int8
// plan). executor.hpp lists the files of the plan. On oneDNN's primitives bias and ReLU are fused into each
// convolution (bias term + eltwise post-op). Activations are in oneDNN's blocked layout, nChw16c on AVX-512 (nChw8c
// below), requested explicitly: format_tag::any makes oneDNN 2.6 pick channels-last brgemm kernels, measured 20%
// slower here; our fp32 kernel reads and writes the same layouts. The two last 1x1 convolutions write channels-last
// directly into the executor's output buffers (their input is reordered nChw16c -> nhwc first, 0.8 ms, because
// oneDNN's 1x1 kernel needs matching layouts; on AVX2 / SSE4.1 they write blocked and a reorder fills the output
// buffer). Primitives, reordered and transformed weights are created in plan(); run() only executes.
//
// Memory (issue 19): a plan owns its primitives; the weights in a primitive's layout (and our kernels' transformed
// weights) are shared by the backend's plans that want that layout (WeightCache: 20 MB in fp32, 4x the raw 3x3
// weights in the Winograd domain), and its activations, scratchpads, reorder buffers and outputs are blocks of its
// slot's workspace (backend/workspace.hpp), placed by their lifetimes, bound at run time. The full-resolution block
// runs in stripes (stripes.hpp, bit-identical); the workspace is about 150 bytes per frame pixel in fp32 (with our
// Winograd, which transforms a block of tiles at a time; about 250 with oneDNN's; bench/bench_forward --frame WxH
// prints it; docs/BENCHMARKS.md).
//
// Thread-safety: a Backend may be shared (plan() reads only immutable state); executors of one workspace slot run
// one at a time (they share its workspace), executors of different slots side by side.
//
// Each convolution's kernel (oneDNN's direct or Winograd primitive, or one of ours) is chosen per layer by ONE FIXED
// table from the layer's shape, its type and the CPU's units (kernel_table.hpp), never by timing at run time: outputs
// must be bit-identical across runs, processes and thread counts. SUPERPOINT_RT_CONV_ALGO=direct|winograd|auto|ours
// overrides the table for experiments (direct / winograd / auto: oneDNN's primitive with that algorithm; ours: our
// kernel where one fits), for every layer or per layer: "conv1b=winograd,*=direct".
//
// Threads: Debian's oneDNN runs on OpenMP; every plan() and run() calls omp_set_num_threads(threads) on the
// calling thread first (the ICV is per thread and the engine may call from different threads).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "backend/backend.hpp"

namespace superpoint_rt::backend::onednn {

/// Numeric precision of the network, as the user asks for it. Every mode is deterministic: bit-identical across
/// runs, plans and thread counts (tests/backend/test_precision.cpp). bf16 and int8 are NOT equal to fp32;
/// bench/quality.py measures how far by the homography protocol (keypoint F1, homography accuracy, MMA,
/// repeatability against fp32) and `superpoint-rt bench` the speed. Each is a per-layer plan (LayerPlan below):
///   Fp32: float32 everywhere (the exact path, docs/ALGORITHM.md).
///   Bf16: the layers of default_layer_plan in bfloat16 (weights and activations rounded to nearest even, f32
///         accumulation inside oneDNN's avx512_core_bf16 / AMX kernels, f32 bias), the rest f32. Needs avx512_bf16.
///   Int8: the int8 layers in u8 activations x s8 weights (per-output-channel scales 127 / max|w[o]|; the codes
///         GPTQ's for the layers the keypoints depend on, chosen with the calibration, gptq.hpp;
///         SUPERPOINT_RT_INT8_WEIGHTS=nearest rounds every weight to its nearest code instead), s32
///         accumulation, f32 bias folded into the accumulator domain (without VNNI oneDNN's AVX2 / AVX-512 kernels
///         sum pairs of u8 x s8 products in 16 bits, which saturate only for pairs near 255 x 127: on the golden
///         icl_250 plane the AVX2 plan stays as close to fp32 as the VNNI one, descriptor cosine mean 0.9933 both,
///         while 7-bit weights, oneDNN's advice against saturation, cost 0.974); activation scales 255 / (per layer,
///         the largest over the calibration planes of the 99.99th percentile of the fp32 network's activation:
///         BackendOptions::calibration, default backend::default_calibration_planes(), run when the backend is
///         created, about 1.5 s with GPTQ on 2 cores). Needs AVX2 + FMA (oneDNN has AVX2 u8s8 kernels; VNNI / AMX make
///         them fast).
enum class Precision { Fp32, Bf16, Int8 };
const char* to_string(Precision p) noexcept;
/// "fp32" | "bf16" | "int8". Throws InvalidArgument for any other name (naming it), for "bf16" when
/// util::cpu_features() lacks avx512_bf16 and for "int8" without AVX2 + FMA (naming the feature).
Precision parse_precision(const std::string& name);

/// The type one convolution computes in. conv1a (one input channel, the exact plane) is F32 in every plan; in an
/// int8 plan whose conv1b is Int8 it writes u8 itself (conv1a_u8.hpp). A layer writes what its consumer reads
/// (f32, bf16 or u8 at the consumer's scale) where oneDNN can, else f32 and the consumer converts it.
enum class LayerType { F32, Bf16, Int8 };
const char* to_string(LayerType t) noexcept;

/// Layer label ("conv1a" ... "conv4b", "score_a", "score_b", "descriptor_a", "descriptor_b") -> its type.
using LayerPlan = std::map<std::string, LayerType>;

/// The plan of a precision on this CPU (util::cpu_features()), chosen by bench/quality.py and `superpoint-rt
/// bench` measurements (docs/BENCHMARKS.md, "Mixed plans"; the reasons beside the code):
///   Fp32  every layer F32.
///   Bf16  with AMX: conv1b, conv2a, conv2b F32 (the early layers whose rounding moves keypoints most), the rest
///         Bf16. Without AMX: descriptor_b (1x1) Bf16, every 3x3 layer F32 on Winograd, which is faster there
///         than oneDNN's direct bf16 kernels, and score_b F32, so that the keypoints are fp32's (measurements beside
///         the code).
///   Int8  every layer Int8 but conv1a, and on CPUs without AVX-512 conv1b too (f32: rounding conv1a's output to 8
///         bits lost a bright photo's faint corners, keypoint F1 0.877 on that view; issue 33). Without AMX every
///         3x3 layer after conv1a runs on our 16-bit Winograd kernel (wino_u8.hpp) with a u8 scale per channel
///         between those layers; an f32 conv1b runs on our fp32 Winograd, its output quantised per channel for
///         conv2a. Keypoint F1 against fp32 (mean / worst view, two draws of 440 pairs, Intel Xeon capped to AVX2):
///         with conv1b f32 0.982 / 0.948, 0.85x the fp32 forward; all-int8 0.974 / 0.877, 0.69x (0.63x with
///         AVX-512 VNNI, the same integer bits). With AMX, oneDNN's direct kernels, the int8 weights of the trunk
///         and the score head rounded by GPTQ (gptq.hpp).
/// SUPERPOINT_RT_LAYER_PRECISION overrides it for experiments: "conv1b=f32,score_a=bf16", applied in order ("*=int8"
/// sets every layer; unlisted layers keep the plan; conv1a stays F32); an unknown layer or type throws
/// InvalidArgument naming it. SUPERPOINT_RT_INT8_CLIP=max|pP does the same for the calibration percentile, and
/// SUPERPOINT_RT_INT8_WEIGHTS=gptq|nearest for the int8 weights' rounding.
LayerPlan default_layer_plan(Precision p);
LayerPlan layer_plan(Precision p, const char* override_value);

enum class ConvAlgo { Direct, Winograd, Auto };
const char* to_string(ConvAlgo a) noexcept;

/// The oneDNN backend ("onednn", device "cpu", precision "fp32", "bf16" or "int8"; int8 calibrates in here). Copies the
/// weights; Backend::plan() reorders (and for bf16 converts) them into each plan's primitive layouts. Throws
/// InvalidArgument as parse_precision() does.
std::unique_ptr<Backend> make_onednn_backend(const model::Weights& weights, const BackendOptions& options);

}  // namespace superpoint_rt::backend::onednn
