// The internal compute-backend interface: load -> plan -> run.
//
//   load: create_backend(name, weights, options) takes the weights once (reorders, uploads).
//   plan: Backend::plan() creates every primitive and buffer for the network frame; nothing is created per call.
//   run:  Executor::run() reads input() and writes logits() / descriptors().
//
// The engine only talks to this interface; a new backend (CUDA) is a new folder under src/backend/ that implements
// it and registers in backend.cpp.
//
// Layouts (all float32, channels-last so that one cell's channels are contiguous):
//   input        H x W                  (the normalised plane, v / 255.0f)
//   logits       Hc x Wc x 65           raw keypoint-head output (conv_score_b), Hc = H / 8, Wc = W / 8
//   descriptors  Hc x Wc x 256          raw descriptor-head output (conv_descriptor_b), NOT L2-normalised
//
// Thread-safety: a Backend may be shared; an Executor is used by one thread at a time (the engine serialises).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/weights.hpp"

namespace superpoint_rt::backend {

/// One normalised network input plane (H x W floats, v / 255.0f, as Executor::input()) for int8 calibration.
struct CalibrationPlane {
  int height = 0, width = 0;
  std::vector<float> pixels;
};

/// The built-in int8 calibration (BackendOptions::calibration when none is given): image::synthetic_image at
/// 640x480, seeds 1-3, channel 0 / 255 (the plane the engine feeds for a colour image by default). `superpoint-rt
/// bench` gives the same planes to its OpenVINO int8 peer, so both calibrate on the same images.
std::vector<CalibrationPlane> default_calibration_planes();

struct BackendOptions {
  int threads = 0;                 // 0 = all cores
  std::string precision = "fp32";  // fp32 (others where offered: onednn also bf16, int8)
  /// int8 only: planes run through the fp32 network to record each layer's maximum activation (the activation
  /// quantisation scales). Empty = the built-in calibration (image::synthetic_image at 640x480, seeds 1-3).
  std::vector<CalibrationPlane> calibration = {};
};

struct PlanOptions {
  int height = 480;
  int width = 640;
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual int height() const = 0;
  virtual int width() const = 0;
  /// H x W floats the caller fills before run().
  virtual float* input() = 0;
  /// Runs the encoder and the keypoint head, and the descriptor head when `descriptors` is true (when false it does
  /// no descriptor work at all). Throws Error(Internal) on a compute-library failure.
  virtual void run(bool descriptors) = 0;
  virtual const float* logits() const = 0;  // Hc x Wc x 65, valid until the next run()
  /// Hc x Wc x D, valid after run(true) until the next run(). Mutable: the engine L2-normalises the cells in place
  /// (the buffer is the executor's output scratch, rewritten by every run), which saves a copy of the map.
  virtual float* descriptors() = 0;
  /// Per-layer algorithm description, e.g. "conv1a:direct(jit:avx512_core) conv1b:winograd ..."
  virtual std::string plan_description() const = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;       // "onednn"
  virtual std::string device() const = 0;     // "cpu"
  virtual std::string precision() const = 0;  // "fp32"
  virtual int threads() const = 0;            // threads the executors use
  virtual std::unique_ptr<Executor> plan(const PlanOptions& options) = 0;
};

/// device "cpu" -> the oneDNN backend. Throws InvalidArgument for an unknown device or precision.
std::unique_ptr<Backend> create_backend(const std::string& device, const model::Weights& weights,
                                        const BackendOptions& options);

}  // namespace superpoint_rt::backend
