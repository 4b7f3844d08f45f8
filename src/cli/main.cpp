// superpoint-rt: the command-line front end of the library.
#include <cstring>
#include <iostream>
#include <string>

#include "cli/args.hpp"
#include "cli/commands.hpp"

namespace {

constexpr const char* kUsage =
    "usage: superpoint-rt <command> [options]\n"
    "commands:\n"
    "  extract IMAGE... --out DIR   keypoints + descriptors per image (.npz or .json)\n"
    "  merge A.h5 B.h5... --output ALL.h5  joins hloc feature files (shards)\n"
    "  pairs --exhaustive FEATURES.h5 -o pairs.txt  image pairs to match (also --sequential N, --from-retrieval)\n"
    "  match --features F.h5 --pairs P.txt -o M.h5  hloc's nearest-neighbour matches (NN-mutual, -ratio, ...)\n"
    "  colmap --features F.h5 --matches M.h5 --pairs P.txt -o DB  COLMAP database for pycolmap / colmap mapper\n"
    "  plot-matches A B --features F.h5 --matches M.h5 --images DIR -o PAIR.png  a picture of one pair's matches\n"
    "  quickstart [IMAGE]           keypoints.png, keypoints.json, descriptors.npy for one image\n"
    "  serve [--port 8000]          HTTP server: POST /v1/keypoints, /healthz, /readyz, /metrics\n"
    "  info                         version, backend, CPU features, weights location\n"
    "  params [--markdown]          the per-request parameters and each preset's defaults\n"
    "  bench                        speed table: ours fp32/bf16/int8 vs ONNX Runtime and PyTorch\n"
    "Run 'superpoint-rt <command> --help' for the options of a command.\n";

}  // namespace

int main(int argc, char** argv) {
  using namespace superpoint_rt::cli;
  if (argc < 2 || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help")) {
    std::cout << kUsage;
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  try {
    if (cmd == "extract") return extract_main(argc, argv);
    if (cmd == "quickstart") return quickstart_main(argc, argv);
    if (cmd == "info") return info_main(argc, argv);
    if (cmd == "merge") return merge_main(argc, argv);
    if (cmd == "pairs") return pairs_main(argc, argv);
    if (cmd == "match") return match_main(argc, argv);
    if (cmd == "colmap") return colmap_main(argc, argv);
    if (cmd == "plot-matches") return plot_matches_main(argc, argv);
    if (cmd == "serve") return serve_main(argc, argv);
    if (cmd == "bench") return bench_main(argc, argv);
    if (cmd == "params") return params_main(argc, argv);
    if (cmd == "--version" || cmd == "version") {
      std::cout << "superpoint-rt " << superpoint_rt::version() << "\n";
      return 0;
    }
    std::cerr << "superpoint-rt: unknown command '" << cmd << "'\n" << kUsage;
    return 2;
  } catch (const UsageError& e) {
    std::cerr << "superpoint-rt: " << e.what() << "\n";
    return 2;
  } catch (const superpoint_rt::Error& e) {
    std::cerr << "superpoint-rt: error: " << e.what() << "\n";
    return e.kind() == superpoint_rt::ErrorKind::InvalidArgument ? 2 : 1;
  } catch (const std::exception& e) {
    std::cerr << "superpoint-rt: internal error: " << e.what() << "\n";
    return 1;
  }
}
