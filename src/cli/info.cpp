// superpoint-rt info: version, backend, CPU features in use (and the units that decide the fastest precision),
// weights location.
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

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
    // The same, one layer a line: the kernel each convolution runs on (the backend's kernel table,
    // src/backend/onednn/kernel_table.hpp), its pools and reorders.
    std::cout << "kernel per layer:\n";
    std::vector<std::string> entries;  // "label:what"; a "what" may hold spaces ("stripes(8x60 rows, 2 lanes)")
    for (std::size_t at = 0; at < m.plan.size();) {
      const std::size_t end = std::min(m.plan.find(' ', at), m.plan.size());
      const std::string token = m.plan.substr(at, end - at);
      const std::size_t colon = token.find(':');
      const bool starts_entry = colon != std::string::npos && colon > 0 &&
                                token.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") == colon;
      if (starts_entry || entries.empty())
        entries.push_back(token);
      else
        entries.back() += " " + token;
      at = end + 1;
    }
    for (const std::string& e : entries) {
      const std::size_t colon = std::min(e.find(':'), e.size());
      std::cout << "  " << e.substr(0, colon) << std::string(colon < 16 ? 16 - colon : 1, ' ')
                << (colon < e.size() ? e.substr(colon + 1) : "") << "\n";
    }
  } catch (const Error& e) {
    std::cout << "model: not loaded: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace superpoint_rt::cli
