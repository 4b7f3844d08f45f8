// superpoint-rt extract IMAGE... --out DIR [--format npz|json] [--plot] [model and parameter flags]
#include <algorithm>
#include <filesystem>
#include <iostream>

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "cli/output.hpp"

namespace superpoint_rt::cli {
namespace {

constexpr const char* kUsage =
    "usage: superpoint-rt extract IMAGE... --out DIR [--format npz|json] [--plot]\n"
    "         [--weights DIR|REPO] [--revision R] [--cache-dir DIR] [--local-files-only] [--threads N]\n"
    "         [--max-keypoints -1..307200] [--keypoint-threshold 0..1] [--nms-radius 0..32]\n"
    "         [--no-descriptors] [--grayscale] [--workers N] [--max-pixels N] [--quiet] [--verbose]\n"
    "Writes DIR/<image file name>.npz (keypoints, scores, descriptors, image_size) or .json per image,\n"
    "and DIR/<image file name>.png with the keypoints drawn when --plot is given.\n";

}  // namespace

int extract_main(int argc, char** argv) {
  Options options = default_cli_options();
  Params params;
  std::vector<std::string> images;
  std::string out_dir, format = "npz";
  bool plot = false, quiet = false;
  int workers = 2;
  ArgReader args(argc, argv, 2);
  while (!args.done()) {
    const std::string a = args.next();
    if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return 0;
    }
    if (parse_model_flag(args, a, options) || parse_param_flag(args, a, params)) continue;
    if (a == "--out" || a == "-o")
      out_dir = args.value(a);
    else if (a == "--format") {
      format = args.value(a);
      if (format != "npz" && format != "json") throw UsageError("--format: '" + format + "' is not npz or json");
    } else if (a == "--plot")
      plot = true;
    else if (a == "--quiet" || a == "-q")
      quiet = true;
    else if (a == "--workers")
      workers = args.int_value(a, 0, 256, "0..256");
    else if (a.rfind("-", 0) == 0 && a.size() > 1)
      throw UsageError("unknown option " + a);
    else
      images.push_back(a);
  }
  if (images.empty()) throw UsageError("extract: no images given\n" + std::string(kUsage));
  if (out_dir.empty()) throw UsageError("extract: --out DIR is required\n" + std::string(kUsage));
  check_params(params);
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) {
    std::cerr << "superpoint-rt: error: cannot create output directory " << out_dir << ": " << ec.message() << "\n";
    return 1;
  }

  SuperPoint model = SuperPoint::from_pretrained(options);
  int failed = 0, done = 0;
  // Chunks keep memory bounded for long lists while the workers still decode ahead within a chunk.
  constexpr std::size_t kChunk = 16;
  for (std::size_t start = 0; start < images.size(); start += kChunk) {
    const std::size_t end = std::min(images.size(), start + kChunk);
    std::vector<ImageInput> inputs;
    std::vector<Image> decoded;  // only with --plot: the picture is drawn on the decoded pixels
    std::vector<std::string> decode_errors(end - start);
    if (plot) decoded.resize(end - start);
    for (std::size_t i = start; i < end; ++i) {
      if (!plot) {
        inputs.push_back(ImageInput::file(images[i]));
        continue;
      }
      try {
        decoded[i - start] = decode_file(images[i], options.max_pixels);
      } catch (const Error& e) {
        decode_errors[i - start] = e.what();
      }
      inputs.push_back(ImageInput::image(decoded[i - start]));
    }
    auto results = model.run_each(inputs, params, workers);
    for (std::size_t i = start; i < end; ++i) {
      const std::string& path = images[i];
      const std::string name = std::filesystem::path(path).filename().string();
      if (!decode_errors[i - start].empty()) {
        std::cerr << "superpoint-rt: error: " << decode_errors[i - start] << "\n";
        ++failed;
        continue;
      }
      auto& r = results[i - start];
      if (auto* e = std::get_if<Error>(&r)) {
        std::cerr << "superpoint-rt: error: " << e->what() << "\n";
        ++failed;
        continue;
      }
      const Features& f = std::get<Features>(r);
      try {
        const std::string base = out_dir + "/" + name;
        if (format == "npz")
          write_features_npz(base + ".npz", f);
        else
          write_features_json(base + ".json", f, path);
        if (plot) write_keypoint_plot(base + ".png", decoded[i - start], f);
        ++done;
        if (!quiet)
          std::cout << path << ": " << f.size() << " keypoints (" << f.image_size[1] << "x" << f.image_size[0]
                    << ") -> " << base << "." << format << "\n";
      } catch (const Error& e) {
        std::cerr << "superpoint-rt: error: " << e.what() << "\n";
        ++failed;
      }
    }
  }
  if (failed) std::cerr << "superpoint-rt: " << failed << " of " << images.size() << " images failed\n";
  return failed ? 1 : 0;
}

}  // namespace superpoint_rt::cli
