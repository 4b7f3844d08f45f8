// A consumer of the installed library: load the model, extract features from one image, print them.
//   superpoint_rt_example WEIGHTS_DIR_OR_REPO IMAGE
// Built by examples/cpp/CMakeLists.txt (find_package) or with `pkg-config --cflags --libs superpoint_rt`.
#include <cstdio>
#include <superpoint_rt/superpoint.hpp>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s WEIGHTS_DIR_OR_REPO IMAGE\n", argv[0]);
    return 2;
  }
  try {
    auto model = superpoint_rt::SuperPoint::from_pretrained(
        {.model = argv[1], .threads = 2, .warmup = superpoint_rt::WarmupSpec::none()});
    const superpoint_rt::Features f = model.run(superpoint_rt::ImageInput::file(argv[2]));
    std::printf("superpoint_rt %s: %s: %zu keypoints, image %dx%d, descriptors %zux%d\n", superpoint_rt::version(),
                argv[2], f.size(), f.image_size[1], f.image_size[0], f.size(), f.descriptor_dim);
    for (std::size_t i = 0; i < f.size() && i < 3; ++i) {
      std::printf("  [%.1f, %.1f] score %.4f\n", static_cast<double>(f.keypoints[2 * i]),
                  static_cast<double>(f.keypoints[2 * i + 1]), static_cast<double>(f.scores[i]));
    }
    return f.size() > 0 ? 0 : 1;
  } catch (const superpoint_rt::Error& e) {  // a public type: its typeinfo must be exported for this to match
    std::fprintf(stderr, "error (%s): %s\n", superpoint_rt::to_string(e.kind()), e.what());
    return 1;
  }
}
