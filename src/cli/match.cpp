// superpoint-rt match: hloc's match_features with its nearest-neighbour confs (features.h5 + pairs.txt ->
// matches.h5), see superpoint_rt/match.hpp.
#include <iostream>

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "superpoint_rt/match.hpp"

namespace superpoint_rt::cli {
namespace {

std::string usage() {
  return "usage: superpoint-rt match --features FEATURES.h5 --pairs PAIRS.txt -o MATCHES.h5 [--conf NN-mutual]\n"
         "         [--ratio R] [--distance D] [--no-mutual] [--features-ref REF.h5] [--overwrite] [--threads N]\n"
         "         [--cache-mb MB] [--quiet]\n"
         "Matches every pair of PAIRS.txt with hloc's nearest-neighbour matcher and writes hloc's matches file: a "
         "group\n"
         "'name0/name1' ('/' in names replaced by '-') per pair with matches0 (int16, -1 = none) and\n"
         "matching_scores0 (float16), as hloc's match_features.main(confs[CONF], pairs, features, matches=...).\n"
         "Pairs already in MATCHES.h5 (in either order) are skipped, as hloc does; --overwrite matches them again.\n"
         "Matcher parameters (the conf's values unless given):\n" +
         match_flags_help() +
         "  --features-ref REF.h5                      the second image of each pair from this file (features_ref)\n"
         "  --threads N                                compute threads (default 0 = all cores)\n"
         "  --cache-mb MB                              descriptors kept in memory (default 2048)\n";
}

}  // namespace

int match_main(int argc, char** argv) {
  MatchFilesConfig config;
  MatchParams params;
  bool quiet = false;
  ArgReader args(argc, argv, 2);
  while (!args.done()) {
    const std::string a = args.next();
    if (a == "-h" || a == "--help") {
      std::cout << usage();
      return 0;
    }
    if (parse_match_flag(args, a, params)) continue;
    if (a == "--features")
      config.features = args.value(a);
    else if (a == "--features-ref")
      config.features_ref = args.value(a);
    else if (a == "--pairs")
      config.pairs = args.value(a);
    else if (a == "-o" || a == "--output")
      config.output = args.value(a);
    else if (a == "--overwrite")
      config.overwrite = true;
    else if (a == "--threads")
      config.options.threads = args.int_value(a, 0, 1024, "0..1024, 0 = all cores");
    else if (a == "--cache-mb")
      config.cache_mb = static_cast<std::size_t>(args.int_value(a, 1, 1 << 24, "1..16777216"));
    else if (a == "--quiet" || a == "-q")
      quiet = true;
    else
      throw UsageError("match: unknown argument " + a + " (see superpoint-rt match --help)");
  }
  for (const auto& [value, flag] :
       {std::pair{&config.features, "--features FEATURES.h5"}, std::pair{&config.pairs, "--pairs PAIRS.txt"},
        std::pair{&config.output, "-o MATCHES.h5"}})
    if (value->empty()) throw UsageError(std::string("match: ") + flag + " is required\n" + usage());
  const int threads = config.options.threads;
  config.options = resolve(params);
  config.options.threads = threads;
  Progress progress(!quiet, "pairs", "pairs/s");
  config.on_progress = [&](std::size_t done, std::size_t total, double s) { progress.update(done, total, s); };
  const MatchFilesReport r = match_files(config);
  if (!quiet)
    std::cerr << "superpoint-rt: " << r.matched << " pairs matched (" << r.matches << " matches), " << r.skipped
              << " already in " << config.output << ", " << r.images_read << " feature records read, " << r.seconds
              << " s\n";
  return 0;
}

}  // namespace superpoint_rt::cli
