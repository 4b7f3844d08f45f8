// The internal compute-backend interface: load -> plan -> run.
//
//   load: create_backend(name, weights, options) takes the weights once (reorders, uploads).
//   plan: Backend::plan() creates every primitive for the network frame and lays out the buffers it needs; nothing
//         is created per call. A plan owns only what is specific to its shape (its primitives); its weights (in the
//         primitives' layouts) are shared by the plans that want the same layout, and its activations, scratch and
//         outputs are blocks of one workspace the backend shares between all its plans (backend/workspace.hpp), as
//         large as the largest plan in use.
//   run:  Executor::run(input) reads the caller's plane and writes logits() / descriptors().
//
// The engine only talks to this interface; a new backend (CUDA) is a new folder under src/backend/ that implements
// it and registers in backend.cpp.
//
// Layouts (all float32, channels-last so that one cell's channels are contiguous):
//   input        H x W                  (the normalised plane, v / 255.0f)
//   logits       Hc x Wc x 65           raw keypoint-head output (conv_score_b), Hc = H / 8, Wc = W / 8
//   descriptors  Hc x Wc x 256          raw descriptor-head output (conv_descriptor_b), NOT L2-normalised
//
// Thread-safety: a Backend may be shared (plan() from any thread). A backend has kWorkspaceSlots workspaces; the
// executors of one slot run one at a time (run() waits for a run of another plan of the same slot), and their
// outputs live in that slot's workspace: logits() / descriptors() are valid until the next run() of ANY executor of
// that slot (the engine reads them under the slot's network lock). Executors of different slots run side by side
// (the engine's two half-thread lanes for list requests: engine.hpp).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "model/weights.hpp"

namespace superpoint_rt::backend {

/// One normalised network input plane (H x W floats, v / 255.0f, as Executor::run() reads) for int8 calibration.
struct CalibrationPlane {
  int height = 0, width = 0;
  std::vector<float> pixels;
};

/// The built-in int8 calibration (BackendOptions::calibration when none is given): image::synthetic_image at
/// 640x480, seeds 1 to kDefaultCalibrationPlanes, channel 0 / 255 (the plane the engine feeds for a colour image by
/// default). `superpoint-rt bench` gives the same planes to its OpenVINO int8 peer, so both calibrate on the same
/// images. Six rather than three: with GPTQ's weights the all-int8 plan's worst-image keypoint F1 against fp32 was
/// 0.9020 (AVX-512 VNNI) and 0.8995 (capped to AVX2) on three, 0.9037 and 0.9091 on six, and the worst descriptor
/// cosine 0.69 and 0.94 (bench/quality.py, 44 pairs; issue 21 asks 0.90); each plane costs about 0.4 s at load.
constexpr int kDefaultCalibrationPlanes = 6;
std::vector<CalibrationPlane> default_calibration_planes();

struct BackendOptions {
  int threads = 0;                 // 0 = all cores
  std::string precision = "fp32";  // fp32 (others where offered: onednn also bf16, int8)
  /// int8 only: planes run through the fp32 network to record each layer's maximum activation (the activation
  /// quantisation scales). Empty = the built-in calibration (default_calibration_planes()).
  std::vector<CalibrationPlane> calibration = {};
};

/// Workspaces per backend: executors of different slots may run at the same time.
constexpr int kWorkspaceSlots = 2;

struct PlanOptions {
  int height = 480;
  int width = 640;
  /// The full-resolution block (conv1a, conv1b, pool1) in horizontal stripes of this many rows (oneDNN:
  /// backend/onednn/stripes.hpp; bit-identical to 0): -1 = the backend's rule, 0 = no stripes, else a positive
  /// multiple of 4.
  int stripe_rows = -1;
  /// Threads this executor runs on: 0 = the backend's threads(), else 1..threads(). Every thread count gives the
  /// same bits (tests/backend ThreadCountsGiveBitIdenticalOutputs).
  int threads = 0;
  /// The workspace the executor runs in, 0..kWorkspaceSlots-1.
  int slot = 0;
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual int height() const = 0;
  virtual int width() const = 0;
  /// Runs the encoder and the keypoint head on `input` (height() x width() floats, the normalised plane, read during
  /// the call only), and the descriptor head when `descriptors` is true (when false it does no descriptor work at
  /// all and leaves descriptors() as the last run(true) of this executor wrote it, unless another executor of the
  /// backend ran since). Throws Error(Internal) on a compute-library failure, std::bad_alloc when the workspace
  /// cannot grow.
  virtual void run(const float* input, bool descriptors) = 0;
  virtual const float* logits() const = 0;  // Hc x Wc x 65, valid until the next run() of the backend's executors
  /// Hc x Wc x D, valid after run(true) until the next run() of the backend's executors. Mutable: the engine may
  /// L2-normalise the cells in place (the buffer is workspace, rewritten by every run).
  virtual float* descriptors() = 0;
  /// Per-layer algorithm description, e.g. "conv1a:direct(jit:avx512_core) conv1b:winograd ..."
  virtual std::string plan_description() const = 0;
  /// Bytes of the backend's shared workspace this plan needs while it runs (activations, scratch, outputs).
  virtual std::size_t workspace_bytes() const = 0;
  /// Bytes this plan holds on its own while it exists (small scratch; its weights are shared: Backend::weights_bytes).
  virtual std::size_t plan_bytes() const = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;       // "onednn"
  virtual std::string device() const = 0;     // "cpu"
  virtual std::string precision() const = 0;  // "fp32"
  virtual int threads() const = 0;            // threads the executors use
  /// Bytes of the workspaces held now: per slot, the largest workspace_bytes() among its live executors that have
  /// run.
  virtual std::size_t workspace_bytes() const = 0;
  /// Bytes of the weights in their primitives' layouts, one copy per layout among the live executors.
  virtual std::size_t weights_bytes() const = 0;
  /// Throws InvalidArgument for a frame, stripe_rows, threads or slot out of range.
  virtual std::unique_ptr<Executor> plan(const PlanOptions& options) = 0;
};

/// device "cpu" -> the oneDNN backend. Throws InvalidArgument for an unknown device or precision.
std::unique_ptr<Backend> create_backend(const std::string& device, const model::Weights& weights,
                                        const BackendOptions& options);

}  // namespace superpoint_rt::backend
