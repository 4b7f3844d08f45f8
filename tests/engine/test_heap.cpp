// No per-call heap growth after warm-up: once every variant of a request has run, further calls leave the heap
// exactly as large as before (the engine's contexts, resize plans and NMS scratch are reused, nothing is cached
// per call). Measured as the bytes the allocator has handed out and not got back: glibc's mallinfo2 (all arenas),
// or the sanitizer allocator's count in the ASan build (which replaces malloc).
#include <gtest/gtest.h>
#include "common/sanitizers.hpp"  // before anything tests SPRT_TEST_ASAN

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#if defined(SPRT_TEST_ASAN)
// From the ASan runtime (declared here: Debian's GCC ships the runtime but not <sanitizer/allocator_interface.h>).
extern "C" std::size_t __sanitizer_get_current_allocated_bytes();
#else
#include <malloc.h>
#endif

#include "common/test_util.hpp"
#include "superpoint_rt/superpoint.hpp"

using namespace superpoint_rt;

namespace {

std::size_t heap_in_use() {
#if defined(SPRT_TEST_ASAN)
  return __sanitizer_get_current_allocated_bytes();
#else
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;  // arena chunks in use + mmapped blocks
#endif
}

}  // namespace

TEST(Heap, NoGrowthPerCallAfterWarmup) {
  Options o;
  o.model = sprt_test::weights_dir();
  o.threads = 1;
  o.warmup = WarmupSpec::minimal();
  SuperPoint model = SuperPoint::from_pretrained(o);
  const std::string dir = sprt_test::images_dir();
  const std::vector<std::uint8_t> jpeg = sprt_test::read_bytes(dir + "/berlin01_1600x900.jpg");
  const std::string png = dir + "/icl_250.png";
  const Image rgb = decode_file(dir + "/skimage_coins.png");
  Params dflt;
  Params gray;
  gray.grayscale = true;
  gray.max_keypoints = -1;
  Params no_desc;
  no_desc.return_descriptors = false;
  no_desc.nms_radius = 9;

  // One call of every variant: JPEG bytes (fused decode + resize), a PNG path, caller pixels, a list. The list runs
  // without worker threads here: with workers, how many images are prepared at once (and so how many pooled request
  // contexts exist, up to 16) depends on thread timing, which would make the count move by a context now and then.
  // The warm-up below also runs a list with workers, so their pool and contexts exist before the count starts.
  const auto round = [&] {
    std::size_t n = 0;
    n += model.run(ImageInput::bytes(jpeg, "berlin01.jpg"), dflt).scores.size();
    n += model.run(ImageInput::file(png), gray).scores.size();
    n += model.run(ImageInput::pixels(rgb.view()), no_desc).scores.size();
    const std::vector<ImageInput> list = {ImageInput::bytes(jpeg, "a.jpg"), ImageInput::file(png),
                                          ImageInput::pixels(rgb.view())};
    for (const Features& f : model.run(list, dflt, 0)) n += f.scores.size();
    return n;
  };
  const std::size_t keypoints = round();  // warm-up: contexts, plans, scratch
  (void)round();
  (void)model.run(std::vector<ImageInput>{ImageInput::bytes(jpeg, "a.jpg"), ImageInput::file(png)}, dflt, 2);
  (void)round();
  const std::size_t before = heap_in_use();
  for (int i = 0; i < 6; ++i) EXPECT_EQ(round(), keypoints) << "round " << i;
  const std::size_t after = heap_in_use();
  EXPECT_GT(before, 0u);
  // glibc's per-thread caches (tcache) hold freed chunks that mallinfo2 still counts as in use, a few KB that drift
  // with thread timing; ctest runs this program with them off (GLIBC_TUNABLES, tests/CMakeLists.txt), and then, as
  // under ASan, the count must not move at all. Run by hand without that, a leak of 4 KB per request still shows.
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  const bool exact = tunables != nullptr && std::string(tunables).find("tcache_count=0") != std::string::npos;
  const long long growth = static_cast<long long>(after) - static_cast<long long>(before);
  if (exact) {
    EXPECT_EQ(growth, 0) << "heap in use grew by " << growth << " bytes over 6 rounds of 6 requests";
  } else {
    EXPECT_LT(growth, 256 * 1024) << "heap in use grew by " << growth << " bytes over 6 rounds of 6 requests";
  }
}
