// superpoint-rt match: hloc's match_features with its nearest-neighbour and LightGlue confs (features.h5 + pairs.txt
// -> matches.h5), see superpoint_rt/match.hpp and superpoint_rt/lightglue.hpp.
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
         "LightGlue (--conf superpoint+lightglue, disk+lightglue or aliked+lightglue, hloc's confs):\n"
         "  --matcher-weights PATH|REPO                cvg's .pth, a .safetensors, a folder or a Hugging Face repo\n"
         "                                             (default: cvg's checkpoint in torch's hub cache; for\n"
         "                                             superpoint+lightglue else ETH-CVG/lightglue_superpoint)\n" +
         lightglue_flags_help() + "  --revision R, --cache-dir DIR, --local-files-only   for a Hugging Face repo\n" +
         "  --features-ref REF.h5                      the second image of each pair from this file (features_ref)\n"
         "  --threads N                                compute threads (default 0 = all cores)\n"
         "  --cache-mb MB                              descriptors kept in memory (default 2048)\n";
}

}  // namespace

int match_main(int argc, char** argv) {
  MatchFilesConfig config;
  MatchParams params;
  bool quiet = false;
  const LightGlueConf* lightglue = nullptr;
  std::string matcher_weights;
  std::string lightglue_flag;  // the last LightGlue flag given, for the message when the conf is not LightGlue's
  LightGlueLoad load;
  ArgReader args(argc, argv, 2);
  while (!args.done()) {
    const std::string a = args.next();
    if (a == "-h" || a == "--help") {
      std::cout << usage();
      return 0;
    }
    if (a == "--conf") {
      const std::string v = args.value(a);
      if ((lightglue = find_lightglue_conf(v))) continue;
      try {
        set_match_param_text(params, "conf", v);
      } catch (const Error&) {
        throw UsageError(std::string("--conf: '") + v +
                         "' is not one of NN-mutual, NN-ratio, NN-superpoint, superpoint+lightglue, disk+lightglue, "
                         "aliked+lightglue");
      }
      continue;
    }
    if (parse_match_flag(args, a, params)) continue;
    if (parse_lightglue_flag(args, a, config.lightglue_options)) {
      lightglue_flag = a;
      continue;
    }
    if (a == "--matcher-weights")
      matcher_weights = args.value(a);
    else if (a == "--revision")
      load.revision = args.value(a);
    else if (a == "--cache-dir")
      load.cache_dir = args.value(a);
    else if (a == "--local-files-only")
      load.local_files_only = true;
    else if (a == "--features")
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
  if (lightglue) {
    if (params.ratio || params.distance || params.mutual)
      throw UsageError("match: --ratio, --distance and --[no-]mutual are the nearest-neighbour matcher's, not " +
                       std::string(lightglue->name) + "'s");
    config.lightglue = std::make_shared<const LightGlue>(
        matcher_weights.empty() ? default_lightglue_weights(*lightglue) : matcher_weights, load);
    if (config.lightglue->input_dim() != lightglue->input_dim)
      throw UsageError("match: --conf " + std::string(lightglue->name) + " takes descriptors of dim " +
                       std::to_string(lightglue->input_dim) + ", but the weights " + config.lightglue->source() +
                       " take " + std::to_string(config.lightglue->input_dim()));
  } else if (!matcher_weights.empty() || !lightglue_flag.empty()) {
    throw UsageError("match: " + (matcher_weights.empty() ? lightglue_flag : std::string("--matcher-weights")) +
                     " needs a LightGlue --conf (superpoint+lightglue, disk+lightglue, aliked+lightglue)");
  }
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
