// superpoint-rt quickstart [IMAGE] [--out-dir DIR]: the main job of the README. Extracts keypoints from IMAGE (or
// from a synthetic image the program draws itself when none is given) and writes keypoints.png (the picture),
// keypoints.json and descriptors.npy to DIR (default superpoint_out/).
#include <filesystem>
#include <iostream>

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "image/synthetic.hpp"

namespace superpoint_rt::cli {

int quickstart_main(int argc, char** argv) {
  Options options = default_cli_options();
  Params params;
  std::string image_path, out_dir = "superpoint_out";
  ArgReader args(argc, argv, 2);
  while (!args.done()) {
    const std::string a = args.next();
    if (parse_model_flag(args, a, options) || parse_param_flag(args, a, params)) continue;
    if (a == "--out-dir" || a == "--out")
      out_dir = args.value(a);
    else if (a.rfind("-", 0) == 0 && a.size() > 1)
      throw UsageError("quickstart: unknown option " + a);
    else if (image_path.empty())
      image_path = a;
    else
      throw UsageError("quickstart: takes one image (use extract for several)");
  }
  check_params(params);
  std::filesystem::create_directories(out_dir);
  Image image;
  if (image_path.empty()) {
    image = image::synthetic_image(1280, 720, 2024);
    image_path = out_dir + "/input.png";
    write_png(image_path, image.view());
    std::cout << "no image given: drew a synthetic test image -> " << image_path << "\n";
  } else {
    image = decode_file_as(image_path, params, options.max_pixels);  // the pixels the preset reads (EXIF applied)
  }
  SuperPoint model = SuperPoint::from_pretrained(options);
  const Features f = model.run(ImageInput::image(image), params);
  write_keypoint_plot(out_dir + "/keypoints.png", image, f);
  write_features_json(out_dir + "/keypoints.json", f, image_path);
  if (f.has_descriptors) write_descriptors_npy(out_dir + "/descriptors.npy", f);
  std::cout << image_path << ": " << f.size() << " keypoints, image " << f.image_size[1] << "x" << f.image_size[0]
            << ", weights " << model.info().weights_dir << "\n";
  for (std::size_t i = 0; i < std::min<std::size_t>(3, f.size()); ++i)
    std::cout << "  keypoint " << i << ": x=" << f.keypoints[2 * i] << " y=" << f.keypoints[2 * i + 1]
              << " score=" << f.scores[i] << "\n";
  std::cout << "timing (ms): decode " << f.timing_ms.decode << ", preprocess " << f.timing_ms.preprocess << ", forward "
            << f.timing_ms.forward << ", postprocess " << f.timing_ms.postprocess << "\n";
  std::cout << "wrote " << out_dir << "/keypoints.png, " << out_dir << "/keypoints.json"
            << (f.has_descriptors ? ", " + out_dir + "/descriptors.npy" : std::string()) << "\n";
  return 0;
}

}  // namespace superpoint_rt::cli
