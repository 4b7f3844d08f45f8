// superpoint-rt pairs: the pair lists of hloc's pairs_from_*.py (pairs.txt: "name0 name1" per line).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "batch/batch.hpp"
#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "superpoint_rt/match.hpp"
#include "util/file.hpp"

namespace superpoint_rt::cli {
namespace {

constexpr const char* kUsage =
    "usage: superpoint-rt pairs (--exhaustive | --sequential N [--quadratic] [--loop] [--loop-stride S] |\n"
    "                            --from-retrieval FILE) [NAMES] -o pairs.txt\n"
    "Writes hloc's pairs.txt: one 'name0 name1' per line, no pair twice in either order. NAMES gives the image\n"
    "names: a features file (FEATURES.h5: its images, as hloc's list_h5_names), a folder of images (the names\n"
    "`extract` gives them: paths relative to the folder), or an image list (one name per line, '#' comments);\n"
    "the names are sorted.\n"
    "  --exhaustive        every pair (i, j), i < j (hloc's pairs_from_exhaustive)\n"
    "  --sequential N      a video or capture sequence in name order: each image with the next N\n"
    "  --quadratic         with --sequential: also (i, i + 2^k) for 2^k > N (hloc's pairs_from_sequential with\n"
    "                      quadratic_overlap, COLMAP's quadratic overlap)\n"
    "  --loop              with --sequential: loop closure; every S-th image (a key frame) is paired with every\n"
    "                      other key frame, so that a sequence that returns to a place is matched there\n"
    "  --loop-stride S     the key-frame stride of --loop (default 10, COLMAP's loop_detection_period)\n"
    "  --from-retrieval F  the pairs of a retrieval file (hloc's pairs_from_retrieval output) as they are, with\n"
    "                      repeats and reversed repeats dropped; with NAMES, every name must be one of them\n"
    "  -o, --output FILE   the pairs file (written atomically)\n"
    "  --quiet             no summary line\n";

// hloc's parse_image_list: one name per line (the first whitespace-separated field), '#' comments, empty lines.
std::vector<std::string> names_from_list(const std::string& path) {
  std::vector<std::string> names;
  std::istringstream in(util::read_text_file(path, std::uint64_t{1} << 30));
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string name;
    if (fields >> name) names.push_back(name);
  }
  return names;
}

bool is_hdf5(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char magic[8] = {};
  return f.read(magic, 8) && std::string(magic, 8) == "\x89HDF\r\n\x1a\n";
}

std::vector<std::string> names_of(const std::string& input) {
  std::vector<std::string> names;
  if (std::filesystem::is_directory(input)) {
    batch::ListSpec spec;
    spec.inputs = {input};
    for (auto& e : batch::list_images(spec)) names.push_back(std::move(e.name));
  } else if (!std::filesystem::exists(input)) {
    throw Error(ErrorKind::NotFound, "pairs: " + input + " does not exist (a features file, a folder or a list)");
  } else if (is_hdf5(input)) {
    names = feature_names(input);
  } else {
    names = names_from_list(input);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

}  // namespace

int pairs_main(int argc, char** argv) {
  std::string input, output, retrieval;
  int sequential = 0, loop_stride = 10;
  bool exhaustive = false, quadratic = false, loop = false, quiet = false;
  ArgReader args(argc, argv, 2);
  while (!args.done()) {
    const std::string a = args.next();
    if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return 0;
    }
    if (a == "--exhaustive")
      exhaustive = true;
    else if (a == "--sequential")
      sequential = args.int_value(a, 1, 1 << 20, "1..1048576");
    else if (a == "--quadratic")
      quadratic = true;
    else if (a == "--loop")
      loop = true;
    else if (a == "--loop-stride")
      loop_stride = args.int_value(a, 1, 1 << 20, "1..1048576");
    else if (a == "--from-retrieval")
      retrieval = args.value(a);
    else if (a == "-o" || a == "--output")
      output = args.value(a);
    else if (a == "--quiet" || a == "-q")
      quiet = true;
    else if (a.rfind("-", 0) == 0 && a.size() > 1)
      throw UsageError("pairs: unknown option " + a);
    else if (input.empty())
      input = a;
    else
      throw UsageError("pairs: one NAMES input only (got " + input + " and " + a + ")");
  }
  const int modes = (exhaustive ? 1 : 0) + (sequential > 0 ? 1 : 0) + (retrieval.empty() ? 0 : 1);
  if (modes != 1)
    throw UsageError("pairs: give exactly one of --exhaustive, --sequential N, --from-retrieval FILE\n" +
                     std::string(kUsage));
  if ((quadratic || loop) && sequential == 0) throw UsageError("pairs: --quadratic and --loop need --sequential N");
  if (output.empty()) throw UsageError("pairs: -o pairs.txt is required\n" + std::string(kUsage));
  if (input.empty() && retrieval.empty())
    throw UsageError("pairs: NAMES (a features file, folder or list) is required");

  std::vector<ImagePair> pairs;
  if (!retrieval.empty()) {
    const std::vector<ImagePair> listed = read_pairs(retrieval);
    pairs = unique_pairs(listed);
    if (!input.empty()) {
      const std::vector<std::string> names = names_of(input);
      for (const auto& [a, b] : pairs)
        for (const std::string* n : {&a, &b})
          if (!std::binary_search(names.begin(), names.end(), *n))
            throw Error(ErrorKind::NotFound, "pairs: '" + *n + "' of " + retrieval + " is not in " + input);
    }
  } else {
    const std::vector<std::string> names = names_of(input);
    pairs =
        exhaustive ? pairs_exhaustive(names) : pairs_sequential(names, sequential, quadratic, loop ? loop_stride : 0);
  }
  write_pairs(output, pairs);
  if (!quiet) std::cout << pairs.size() << " pairs -> " << output << "\n";
  return 0;
}

}  // namespace superpoint_rt::cli
