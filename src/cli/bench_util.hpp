// Small pieces shared by the `superpoint-rt bench` tables (bench.cpp, bench_match.cpp): process measurements,
// percentiles, formatting, where the test data is.
#pragma once

#include <string>
#include <vector>

namespace superpoint_rt::cli {

/// CPU time of the whole process (every thread), ms: how many cores a measurement really kept busy.
double process_cpu_ms();
/// The process's peak resident set, MB.
double peak_rss_mb();
/// numpy's default percentile (linear interpolation between closest ranks); NaN for an empty list.
double percentile(std::vector<double> v, double q);
/// `v` right-aligned in `width` with `prec` decimals; "-" for NaN.
std::string fmt(double v, int width, int prec = 1);
std::string now_string();
/// The CPU's model name from /proc/cpuinfo.
std::string cpu_model();

/// The defaults come from the environment and the current directory, never from where the program was built: an
/// installed superpoint-rt must not carry (or depend on) the build machine's source path.
inline constexpr const char* kSharedEnv = "SUPERPOINT_RT_SHARED";
/// $SUPERPOINT_RT_SHARED, else ../shared.
std::string shared_dir();
/// This program's path (/proc/self/exe).
std::string self_exe();

/// superpoint-rt bench --matching (bench_match.cpp).
class ArgReader;
int bench_matching_main(ArgReader& args);

}  // namespace superpoint_rt::cli
