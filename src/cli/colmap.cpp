// superpoint-rt colmap: a COLMAP database from hloc's feature, match and pair files (superpoint_rt/colmap.hpp).
#include <charconv>
#include <cmath>
#include <iostream>

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "superpoint_rt/colmap.hpp"

namespace superpoint_rt::cli {
namespace {

constexpr const char* kUsage =
    "usage: superpoint-rt colmap --features F.h5 --matches M.h5 --pairs PAIRS.txt -o DATABASE.db\n"
    "         [--images DIR] [--single-camera] [--min-match-score S] [--overwrite] [--quiet]\n"
    "Writes the COLMAP database hloc's reconstruction.py imports (COLMAP 4's schema, as pycolmap 4.x creates it):\n"
    "every image of F.h5 (ids in name order) with a SIMPLE_RADIAL camera of focal 1.2 * max(W, H) (one per image,\n"
    "or one for all with --single-camera), its keypoints + 0.5 (COLMAP's pixel centres), and the matches of each\n"
    "pair of PAIRS.txt from M.h5 (hloc's match_features layout; --min-match-score keeps scores above S).\n"
    "--images DIR checks that each image is there and that COLMAP reads it at the features' image_size.\n"
    "Then verify and reconstruct with COLMAP (docs/SFM.md):\n"
    "  python -c \"import pycolmap; pycolmap.verify_matches('DATABASE.db', 'PAIRS.txt');\n"
    "             print(pycolmap.incremental_mapping('DATABASE.db', 'DIR', 'sfm/'))\"\n"
    "  or: colmap matches_importer --database_path DATABASE.db --match_list_path PAIRS.txt --match_type pairs\n"
    "      colmap mapper --database_path DATABASE.db --image_path DIR --output_path sfm/\n"
    "Exit code 2 for bad arguments or inputs, 1 for other failures; an existing database is kept unless --overwrite.\n";

float score_value(ArgReader& args, const std::string& flag) {
  const std::string v = args.value(flag);
  float x = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || end != v.data() + v.size() || !std::isfinite(x))
    throw UsageError(flag + ": '" + v + "' is not a number");
  return x;
}

}  // namespace

int colmap_main(int argc, char** argv) {
  ColmapOptions o;
  bool quiet = false;
  ArgReader args(argc, argv, 2);
  while (!args.done()) {
    const std::string a = args.next();
    if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return 0;
    }
    if (a == "--features")
      o.features = args.value(a);
    else if (a == "--matches")
      o.matches = args.value(a);
    else if (a == "--pairs")
      o.pairs = args.value(a);
    else if (a == "--images")
      o.images = args.value(a);
    else if (a == "--output" || a == "-o")
      o.database = args.value(a);
    else if (a == "--single-camera")
      o.single_camera = true;
    else if (a == "--min-match-score")
      o.min_match_score = score_value(args, a);
    else if (a == "--overwrite")
      o.overwrite = true;
    else if (a == "--quiet" || a == "-q")
      quiet = true;
    else
      throw UsageError("colmap: unknown argument '" + a + "'\n" + kUsage);
  }
  for (const auto& [value, flag] : {std::pair{&o.features, "--features F.h5"}, std::pair{&o.matches, "--matches M.h5"},
                                    std::pair{&o.pairs, "--pairs PAIRS.txt"}, std::pair{&o.database, "-o DATABASE.db"}})
    if (value->empty()) throw UsageError(std::string("colmap: ") + flag + " is required\n" + kUsage);
  const ColmapReport r = write_colmap_database(o);
  if (!quiet) {
    std::cout << "wrote " << o.database << ": " << r.images << " images, " << r.cameras << " camera"
              << (r.cameras == 1 ? "" : "s") << ", " << r.keypoints << " keypoints, " << r.pairs_written
              << " pairs with " << r.matches << " matches";
    if (r.pairs_duplicate || r.pairs_self)
      std::cout << " (skipped " << r.pairs_duplicate << " repeated and " << r.pairs_self << " self pairs)";
    std::cout << " in " << r.seconds << " s\n";
  }
  return 0;
}

}  // namespace superpoint_rt::cli
