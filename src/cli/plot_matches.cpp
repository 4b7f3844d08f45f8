// superpoint-rt plot-matches: a picture of one pair's matches (src/sfm/plot.hpp).
//
// A command of its own rather than a --plot flag of `colmap` or `match`: it is wanted right after matching (before
// any database exists) and again after COLMAP's verification (colouring the inliers), for any pair the user picks,
// and it is the one step that decodes images; the database export reads no pixels.
#include <iostream>

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "sfm/plot.hpp"

namespace superpoint_rt::cli {
namespace {

constexpr const char* kUsage =
    "usage: superpoint-rt plot-matches NAME0 NAME1 --features F.h5 --matches M.h5 --images DIR -o PAIR.png\n"
    "         [--database DATABASE.db] [--height PX] [--max-lines N]\n"
    "Draws the two images side by side (at one height: the smaller image's, at most 900, or --height) with a line\n"
    "per match of M.h5 (hloc's layout), coloured from red to green by its score; with --database (a COLMAP database\n"
    "after pycolmap.verify_matches or colmap matches_importer), green for COLMAP's verified inliers and faint red for\n"
    "the matches it rejected. --max-lines N draws N matches spread evenly over the list (the counts stay those of\n"
    "all). NAME0 and NAME1 are image names as in F.h5.\n";

}  // namespace

int plot_matches_main(int argc, char** argv) {
  sfm::MatchPlotOptions o;
  std::vector<std::string> names;
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
    else if (a == "--images")
      o.images = args.value(a);
    else if (a == "--database")
      o.database = args.value(a);
    else if (a == "--output" || a == "-o")
      o.output = args.value(a);
    else if (a == "--max-lines")
      o.max_lines = static_cast<std::size_t>(args.int_value(a, 0, 1 << 30, "0.. (0 = all)"));
    else if (a == "--height")
      o.height = args.int_value(a, 16, sfm::kMaxPlotHeight, "16.." + std::to_string(sfm::kMaxPlotHeight));
    else if (a.rfind("-", 0) == 0 && a.size() > 1)
      throw UsageError("plot-matches: unknown option " + a + "\n" + kUsage);
    else
      names.push_back(a);
  }
  if (names.size() != 2) throw UsageError("plot-matches: give the two image names of the pair\n" + std::string(kUsage));
  o.name0 = names[0];
  o.name1 = names[1];
  for (const auto& [value, flag] : {std::pair{&o.features, "--features F.h5"}, std::pair{&o.matches, "--matches M.h5"},
                                    std::pair{&o.images, "--images DIR"}, std::pair{&o.output, "-o PAIR.png"}})
    if (value->empty()) throw UsageError(std::string("plot-matches: ") + flag + " is required\n" + kUsage);
  const sfm::MatchPlotReport r = sfm::plot_matches(o);
  std::cout << "wrote " << o.output << " (" << r.width << "x" << r.height << "): " << r.matches << " matches";
  if (r.drawn < r.matches) std::cout << " (" << r.drawn << " drawn)";
  if (r.inliers >= 0) std::cout << ", " << r.inliers << " verified by COLMAP";
  std::cout << "\n";
  return 0;
}

}  // namespace superpoint_rt::cli
