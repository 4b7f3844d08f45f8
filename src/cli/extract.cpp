// superpoint-rt extract: per-image .npz/.json files (--out DIR) and/or one hloc feature file (--output FILE.h5).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "batch/batch.hpp"
#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "cli/output.hpp"

namespace superpoint_rt::cli {
namespace {

constexpr const char* kUsage =
    "usage: superpoint-rt extract [IMAGE|FOLDER]... [--image-list FILE] [--image-root DIR] [--glob PATTERN]...\n"
    "         [--output FEATURES.h5] [--as-half] [--skip-existing] [--overwrite] [--shard I/N] [--report FILE]\n"
    "         [--out DIR] [--format npz|json] [--plot]\n"
    "         [--weights DIR|REPO] [--revision R] [--cache-dir DIR] [--local-files-only] [--threads N]\n"
    "         [--precision fp32|bf16|int8] [--calibration IMAGE|FOLDER]...\n"
    "         [--preset NAME] [per-request parameters below] [--workers N] [--max-pixels N]\n"
    "         [--max-frame-pixels N] [--quiet] [--verbose]\n"
    "Folders are walked recursively (files matching --glob, default the image extensions); images are processed in\n"
    "name order. --output writes hloc's feature-file layout (one group per image named by its path relative to the\n"
    "image root: keypoints (N,2), scores (N,), descriptors (256,N), image_size (W,H)), crash-safely; a report goes\n"
    "to FEATURES.h5.report.json (or --report). --shard I/N processes every N-th image starting at I.\n"
    "--out DIR writes DIR/<image file name>.npz (keypoints, scores, descriptors, image_size) or .json per image,\n"
    "and DIR/<image file name>.png with the keypoints drawn when --plot is given.\n"
    "-o X is --output X when X ends in .h5 or .hdf5, else --out X. With --preset hloc:superpoint_aachen (or _max,\n"
    "_inloc) and --as-half the feature file is the one hloc's extract_features.main writes (docs/PRESETS.md).\n"
    "--max-pixels N refuses images of more pixels before decoding them; --max-frame-pixels N (default 16777216,\n"
    "4096 x 4096) refuses network frames of more pixels (what --resize / --resize-max give) before planning them.\n"
    "Exit code 1 when some images failed (each named in the report and on stderr).\n";

}  // namespace

int extract_main(int argc, char** argv) {
  Options options = default_cli_options();
  Params params;
  batch::ListSpec list;
  batch::RunConfig config;
  std::string out_dir, format = "npz", shard_text;
  bool plot = false, quiet = false;
  ArgReader args(argc, argv, 2);
  while (!args.done()) {
    const std::string a = args.next();
    if (a == "-h" || a == "--help") {
      std::cout << kUsage << "per-request parameters (docs/PARAMETERS.md; defaults per preset: superpoint-rt params):\n"
                << param_flags_help();
      return 0;
    }
    if (parse_model_flag(args, a, options) || parse_param_flag(args, a, params)) continue;
    if (a == "-o") {
      // hloc users write `-o feats.h5`; everyone else a folder.
      const std::string v = args.value(a);
      const auto ends = [&](const std::string& e) {
        return v.size() >= e.size() && v.compare(v.size() - e.size(), e.size(), e) == 0;
      };
      (ends(".h5") || ends(".hdf5") ? config.output : out_dir) = v;
    } else if (a == "--out")
      out_dir = args.value(a);
    else if (a == "--format") {
      format = args.value(a);
      if (format != "npz" && format != "json") throw UsageError("--format: '" + format + "' is not npz or json");
    } else if (a == "--plot")
      plot = true;
    else if (a == "--quiet" || a == "-q")
      quiet = true;
    else if (a == "--workers")
      config.workers = args.int_value(a, 0, 256, "0..256");
    else if (a == "--output")
      config.output = args.value(a);
    else if (a == "--as-half")
      config.as_half = true;
    else if (a == "--skip-existing")
      config.skip_existing = true;
    else if (a == "--overwrite")
      config.overwrite = true;
    else if (a == "--report")
      config.report = args.value(a);
    else if (a == "--shard")
      shard_text = args.value(a);
    else if (a == "--image-list")
      list.image_list = args.value(a);
    else if (a == "--image-root")
      list.image_root = args.value(a);
    else if (a == "--glob")
      list.globs.push_back(args.value(a));
    else if (a.rfind("-", 0) == 0 && a.size() > 1)
      throw UsageError("unknown option " + a);
    else
      list.inputs.push_back(a);
  }
  if (out_dir.empty() && config.output.empty())
    throw UsageError("extract: --out DIR or --output FEATURES.h5 is required\n" + std::string(kUsage));
  check_params(params);
  // The checks of the batch options (shard, skip / overwrite / as-half, an existing output) are the library's, shared
  // with the Python binding; a bad option is a usage error here.
  config.spelling = batch::kCliSpelling;
  std::vector<batch::ImageEntry> images;
  try {
    images = batch::prepare(list, shard_text, config);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::InvalidArgument) throw UsageError(e.what());
    throw;
  }
  if (!out_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(out_dir, ec);
    if (ec) {
      std::cerr << "superpoint-rt: error: cannot create output directory " << out_dir << ": " << ec.message() << "\n";
      return 1;
    }
  }

  SuperPoint model = SuperPoint::from_pretrained(options);
  const bool per_image_lines = config.output.empty() && !quiet;  // the npz/json mode's one line per image
  if (!out_dir.empty())
    config.on_result = [&](const batch::ImageEntry& e, const Features& f) {
      const std::string base = out_dir + "/" + std::filesystem::path(e.path).filename().string();
      if (format == "npz")
        write_features_npz(base + ".npz", f);
      else
        write_features_json(base + ".json", f, e.path);
      if (plot) write_keypoint_plot(base + ".png", decode_file(e.path, options.max_pixels), f);
      if (per_image_lines)
        std::cout << e.path << ": " << f.size() << " keypoints (" << f.image_size[1] << "x" << f.image_size[0]
                  << ") -> " << base << "." << format << "\n";
    };
  Progress progress(!quiet && !config.output.empty(), "images");
  config.on_progress = [&](std::size_t done, std::size_t total, double s) { progress.update(done, total, s); };

  const batch::Report rep = batch::run(model, images, params, config);
  for (const auto& f : rep.failed) std::cerr << "superpoint-rt: error: " << f.error << "\n";
  if (!quiet && !config.output.empty())
    std::cerr << "superpoint-rt: " << rep.processed << " extracted, " << rep.skipped << " skipped, "
              << rep.failed.size() << " failed of " << rep.total << " images in " << rep.seconds << " s ("
              << rep.images_per_s << " images/s) -> " << config.output << "\n";
  if (!rep.failed.empty())
    std::cerr << "superpoint-rt: " << rep.failed.size() << " of " << rep.total << " images failed\n";
  return rep.failed.empty() ? 0 : 1;
}

}  // namespace superpoint_rt::cli
