// `superpoint-rt extract` on a folder of photos that all have different sizes must cost about what its largest photo
// alone costs (issue 19 §1): every network frame used to plan its own ~715 bytes per frame pixel, up to 8 plans, so
// such a folder took about 8 times the memory of one photo. This is the bounded check of the folder measurement in
// docs/BENCHMARKS.md (bench/make_mixed_folder.py, 10 photos of 0.75 MP), on 8 smaller pictures so that it
// runs in seconds; the peak resident size of each run is the child's own (wait4). The largest photo runs as a list
// of two copies, so that both runs hold what a list holds (two lanes' workspaces where lists use lanes: engine.hpp).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common/sanitizers.hpp"  // before anything tests SPRT_TEST_ASAN

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "common/test_util.hpp"
#include "image/synthetic.hpp"
#include "superpoint_rt/image.hpp"

#ifndef SPRT_CLI
#error "tests/cli needs the superpoint-rt target"
#endif

namespace fs = std::filesystem;
using namespace superpoint_rt;

namespace {

// Runs the CLI with `args`; returns its peak resident size in kB (0 when it failed).
long peak_rss_kb(const std::vector<std::string>& args) {
  std::vector<char*> argv{const_cast<char*>(SPRT_CLI)};
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execv(SPRT_CLI, argv.data());
    ::_exit(127);
  }
  int status = 0;
  rusage ru{};
  if (pid < 0 || ::wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 0;
  return ru.ru_maxrss;
}

}  // namespace

TEST(ExtractMemory, AFolderOfManySizesCostsAboutItsLargestImage) {
  // About 0.2 MP each, no two alike; the largest (by frame pixels) is 380 x 540.
  const std::vector<std::pair<int, int>> sizes{{520, 390}, {400, 500}, {560, 360}, {470, 430},
                                               {380, 540}, {500, 410}, {450, 450}, {530, 380}};
  sprt_test::TempDir folder, one, out;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const auto [w, h] = sizes[i];
    const Image im = image::synthetic_image(w, h, static_cast<std::uint32_t>(i + 1));
    const std::string name = "photo" + std::to_string(i) + ".png";
    write_png(folder.file(name), im.view());
    if (w == 380) {  // twice: a list, as the folder is (where lists run two forwards side by side, both do)
      write_png(one.file(name), im.view());
      write_png(one.file("again_" + name), im.view());
    }
  }
  auto extract = [&](const std::string& dir, const std::string& output) {
    return peak_rss_kb({"extract", dir, "--preset", "hloc:superpoint_aachen", "--as-half", "-o", out.file(output),
                        "--weights", sprt_test::weights_dir(), "--threads", "2", "--quiet"});
  };
  const long largest = extract(one.path(), "one.h5");
  const long all = extract(folder.path(), "all.h5");
  ASSERT_GT(largest, 0) << "extract of the largest picture (twice) failed";
  ASSERT_GT(all, 0) << "extract of the folder failed";
  std::cout << "peak RSS: largest picture twice " << largest / 1024 << " MB, the folder of " << sizes.size()
            << " sizes " << all / 1024 << " MB (" << static_cast<double>(all) / static_cast<double>(largest) << "x)\n";
#if defined(SPRT_TEST_ASAN)
  // Under AddressSanitizer the resident size is the allocator's (its quarantine keeps freed memory: 1.66x here), not
  // the program's; the extractions above still ran under it. The Release pass checks the ratio.
  GTEST_SKIP() << "peak RSS ratio not judged under AddressSanitizer";
#endif
  // Before issue 19: 3.3x (1455 MB against 439 MB; a plan of ~715 B per frame pixel per size, 8 kept); now
  // 1.17-1.19x (124-126 MB against 105-107 MB): the folder adds only the pipeline's images in flight. 1.5x leaves
  // room for thread timing.
  EXPECT_LT(static_cast<double>(all), 1.5 * static_cast<double>(largest));
}
