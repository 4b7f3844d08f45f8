// superpoint-rt info: version, backend, CPU features in use (and the units that decide the fastest precision),
// weights location.
#include <iostream>

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "util/cpu.hpp"

namespace superpoint_rt::cli {

int info_main(int argc, char** argv) {
  Options options = default_cli_options();
  ArgReader args(argc, argv, 2);
  while (!args.done()) {
    const std::string a = args.next();
    if (!parse_model_flag(args, a, options)) throw UsageError("info: unknown option " + a);
  }
  std::cout << "superpoint-rt " << version() << "\n";
  std::cout << "cpu features: " << util::cpu_features_string() << "\n";
  std::cout << "CPU units: " << util::cpu_units_string() << "\n" << precisions_text();
  try {
    SuperPoint model = SuperPoint::from_pretrained(options);
    const ModelInfo& m = model.info();
    std::cout << "model: " << m.model << "\n"
              << "weights: " << m.weights_dir << " (" << m.source << ")\n"
              << "revision: " << (m.revision.empty() ? "-" : m.revision) << "\n"
              << "backend: " << m.backend << " on " << m.device << ", " << m.precision << ", " << m.threads
              << " threads\n";
    if (!m.calibration.empty()) std::cout << "int8 calibration: " << m.calibration << "\n";
    std::cout << "kernels: " << m.cpu_features << "\n"
              << "plan: " << m.plan << "\n";
  } catch (const Error& e) {
    std::cout << "model: not loaded: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace superpoint_rt::cli
