// Median time of one Pillow-exact plane resize to the 640x480 network frame: the scalar reference vs resize_plane
// (the kernel the CPU dispatches to; SUPERPOINT_RT_ISA=scalar|avx2 caps it). Single thread. Both the thread's CPU
// time (robust on a loaded machine: preemption does not count) and the wall time of the fast path are printed.
//   bench_resize [repeats]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <vector>

#include "image/resize.hpp"

namespace si = superpoint_rt::image;

namespace {

double thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) * 1e-3;
}

struct Timing {
  double cpu_us, wall_us;  // medians
};

template <class F>
Timing median_us(int repeats, F&& f) {
  std::vector<double> cpu, wall;
  f();  // warm the caches and the scratch
  for (int i = 0; i < repeats; ++i) {
    const double c0 = thread_cpu_us();
    const auto a = std::chrono::steady_clock::now();
    f();
    const auto b = std::chrono::steady_clock::now();
    cpu.push_back(thread_cpu_us() - c0);
    wall.push_back(std::chrono::duration<double, std::micro>(b - a).count());
  }
  std::sort(cpu.begin(), cpu.end());
  std::sort(wall.begin(), wall.end());
  return {cpu[cpu.size() / 2], wall[wall.size() / 2]};
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 21;
  struct Case {
    int w, h, step;
  };
  const Case cases[] = {{1600, 900, 3}, {1920, 1080, 3}, {4032, 3024, 3}, {640, 480, 3}, {324, 223, 1}};
  std::printf("kernel: %s, %d repeats, median microseconds, output 640x480\n", si::resize_kernel_name(), repeats);
  std::printf("%-12s %4s %14s %14s %8s %14s %14s\n", "input", "step", "reference_cpu", "fast_cpu", "speedup",
              "fast_wall", "plan_cpu");
  std::mt19937 rng(1);
  for (const Case& c : cases) {
    std::vector<std::uint8_t> img(static_cast<std::size_t>(c.w) * c.h * c.step);
    for (auto& v : img) v = static_cast<std::uint8_t>(rng() >> 24);
    const std::ptrdiff_t stride = static_cast<std::ptrdiff_t>(c.w) * c.step;
    si::ResizePlan plan;
    const Timing plan_t = median_us(repeats, [&] { plan = si::ResizePlan(c.w, c.h, 640, 480); });
    std::vector<std::uint8_t> out(640 * 480);
    si::ResizeScratch scratch;
    const Timing ref = median_us(std::max(3, repeats / 4), [&] {
      si::resize_plane_reference(plan, img.data(), stride, c.step, out.data(), scratch);
    });
    const Timing fast =
        median_us(repeats, [&] { si::resize_plane(plan, img.data(), stride, c.step, out.data(), scratch); });
    char name[32];
    std::snprintf(name, sizeof name, "%dx%d", c.w, c.h);
    std::printf("%-12s %4d %14.1f %14.1f %7.1fx %14.1f %14.1f\n", name, c.step, ref.cpu_us, fast.cpu_us,
                ref.cpu_us / fast.cpu_us, fast.wall_us, plan_t.cpu_us);
  }
  return 0;
}
