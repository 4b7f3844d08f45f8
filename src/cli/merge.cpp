// superpoint-rt merge A.h5 B.h5 ... --output ALL.h5 [--overwrite]: joins hloc feature files (e.g. the shards of a
// sharded extraction) into one, written to ALL.h5.tmp and renamed (a crash never leaves a half-written ALL.h5).
#include <iostream>

#include "batch/batch.hpp"
#include "cli/args.hpp"
#include "cli/commands.hpp"

namespace superpoint_rt::cli {
namespace {

constexpr const char* kUsage =
    "usage: superpoint-rt merge FEATURES.h5... --output ALL.h5 [--overwrite] [--quiet]\n"
    "Copies every image group of the inputs into ALL.h5 (an existing ALL.h5 is replaced). An image in two inputs is\n"
    "an error unless --overwrite (then the later input wins).\n";

}  // namespace

int merge_main(int argc, char** argv) {
  std::vector<std::string> inputs;
  std::string output;
  bool overwrite = false, quiet = false;
  ArgReader args(argc, argv, 2);
  while (!args.done()) {
    const std::string a = args.next();
    if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return 0;
    }
    if (a == "--output" || a == "-o")
      output = args.value(a);
    else if (a == "--overwrite")
      overwrite = true;
    else if (a == "--quiet" || a == "-q")
      quiet = true;
    else if (a.rfind("-", 0) == 0 && a.size() > 1)
      throw UsageError("unknown option " + a);
    else
      inputs.push_back(a);
  }
  if (inputs.empty()) throw UsageError("merge: no input files\n" + std::string(kUsage));
  if (output.empty()) throw UsageError("merge: --output ALL.h5 is required\n" + std::string(kUsage));
  const std::size_t n = batch::merge_h5(inputs, output, overwrite, /*include_existing=*/false);
  if (!quiet) std::cout << "merged " << inputs.size() << " files, " << n << " images -> " << output << "\n";
  return 0;
}

}  // namespace superpoint_rt::cli
