// The superpoint-rt executable: outputs, exit codes and messages as a user sees them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "common/test_util.hpp"
#include "superpoint_rt/superpoint.hpp"
#include "util/cpu.hpp"
#include "util/npz.hpp"

#include <nlohmann/json.hpp>

#ifndef SPRT_CLI
#error "tests/cli needs the superpoint-rt target"
#endif

namespace fs = std::filesystem;
using namespace superpoint_rt;

namespace {

std::string cli() {
  return std::string(SPRT_CLI) + " ";
}
std::string weights() {
  return " --weights " + sprt_test::weights_dir() + " --threads 2 ";
}
std::string img(const std::string& n) {
  return sprt_test::images_dir() + "/" + n;
}

// The "CPU units: ..." line that info and bench must print, built from /proc/cpuinfo's flags (what the kernel
// reports), independently of the product's CPUID reading: a check of the detection only. What RUNS on those units
// is the library's answer (precisions_on_this_cpu()), never re-derived here. The SUPERPOINT_RT_ISA cap (this test
// may run under it: ctest isa_*_precision) hides units as cpu.hpp documents: avx2 the AVX-512 ones, scalar all.
struct CpuinfoUnits {
  std::set<std::string> flags;
  bool has(const char* f) const { return flags.count(f) != 0; }
  bool avx512() const { return has("avx512f") && has("avx512bw") && has("avx512vl") && has("avx512dq"); }
  std::string line(std::string cap = env_cap()) const {
    auto yn = [](bool b) { return b ? " yes" : " no"; };
    const bool y = cap != "scalar", z = y && cap.rfind("avx2", 0) != 0;  // avx2 and avx2-novnni: no AVX-512
    return std::string("CPU units: AVX2") + yn(y && has("avx2")) + ", FMA" + yn(y && has("fma")) + ", AVX-512" +
           yn(z && avx512()) + ", VNNI" + yn(z && has("avx512_vnni")) + ", AVX512-BF16" + yn(z && has("avx512_bf16")) +
           ", AMX" + yn(z && has("amx_tile"));
  }
  // SUPERPOINT_RT_ISA caps the library; scripts/as-cpu.sh (SPRT_CPUID_CAP) caps what CPUID answers, while
  // /proc/cpuinfo still lists the machine's flags.
  static std::string env_cap() {
    for (const char* var : {"SUPERPOINT_RT_ISA", "SPRT_CPUID_CAP"})
      if (const char* c = std::getenv(var); c && *c) return c;
    return "";
  }
};

// The lines `info` prints for what runs here, from the library's own answer (after the SUPERPOINT_RT_ISA cap of
// this process, which the executable it starts inherits).
std::vector<std::string> precision_lines() {
  std::vector<std::string> out;
  for (const PrecisionReport& r : precisions_on_this_cpu())
    out.push_back("precision " + r.precision + (r.runs ? ": runs;" : ": does not run here (" + r.basis + ")"));
  out.push_back("fastest precision here: " + fastest_precision_on_this_cpu() + "\n");
  return out;
}

bool precision_runs(const std::string& name) {
  for (const PrecisionReport& r : precisions_on_this_cpu())
    if (r.precision == name) return r.runs;
  ADD_FAILURE() << "precisions_on_this_cpu() has no " << name;
  return false;
}

CpuinfoUnits cpuinfo_units() {
  CpuinfoUnits u;
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("flags", 0) == 0) {
      std::istringstream in(line.substr(line.find(':') + 1));
      for (std::string w; in >> w;) u.flags.insert(w);
      break;
    }
  return u;
}

TEST(Cli, ExtractWritesNpzEqualToTheLibrary) {
  sprt_test::TempDir out;
  std::string log;
  const int rc = sprt_test::run_command(cli() + "extract " + img("icl_250.png") + " " + img("skimage_coins.png") +
                                            " --out " + out.path() + weights() + "--max-keypoints 500",
                                        &log);
  ASSERT_EQ(rc, 0) << log;
  Options o;
  o.model = sprt_test::weights_dir();
  o.warmup = WarmupSpec::none();
  SuperPoint m = SuperPoint::from_pretrained(o);
  Params p;
  p.max_keypoints = 500;
  for (const char* name : {"icl_250.png", "skimage_coins.png"}) {
    const auto npz = util::load_npz(out.file(std::string(name) + ".npz"));
    const Features f = m.run(ImageInput::file(img(name)), p);
    ASSERT_TRUE(npz.count("keypoints") && npz.count("scores") && npz.count("descriptors") && npz.count("image_size"));
    EXPECT_EQ(npz.at("keypoints").as_float(), f.keypoints);
    EXPECT_EQ(npz.at("scores").as_float(), f.scores);
    EXPECT_EQ(npz.at("descriptors").as_float(), f.descriptors);
    EXPECT_EQ(npz.at("keypoints").shape, (std::vector<std::int64_t>{static_cast<std::int64_t>(f.size()), 2}));
    EXPECT_EQ(npz.at("image_size").as_int64(), (std::vector<std::int64_t>{f.image_size[0], f.image_size[1]}));
  }
}

TEST(Cli, JsonPlotAndNumpyCanReadTheNpz) {
  sprt_test::TempDir out;
  std::string log;
  ASSERT_EQ(sprt_test::run_command(cli() + "extract " + img("opencv_box.png") + " --out " + out.path() + weights() +
                                       "--format json --plot --no-descriptors --nms-radius 2",
                                   &log),
            0)
      << log;
  EXPECT_TRUE(fs::exists(out.file("opencv_box.png.json")));
  EXPECT_TRUE(fs::exists(out.file("opencv_box.png.png")));
  const Image plot = decode_file(out.file("opencv_box.png.png"));
  EXPECT_EQ(plot.width, 324);
  EXPECT_EQ(plot.height, 223);
  const std::string py = sprt_test::python_with(false);
  ASSERT_FALSE(py.empty());
  ASSERT_EQ(
      sprt_test::run_command(cli() + "extract " + img("opencv_box.png") + " --out " + out.path() + weights(), &log), 0)
      << log;
  const std::string check = py + " -c \"import json,numpy as np; j=json.load(open('" + out.file("opencv_box.png.json") +
                            "')); d=np.load('" + out.file("opencv_box.png.npz") +
                            "'); assert 'descriptors' not in j; assert d['descriptors'].shape==(len(d['scores']),256);"
                            " assert d['keypoints'].dtype==np.float32; assert list(d['image_size'])==[223,324];"
                            " print(len(j['scores']), len(d['scores']))\"";
  ASSERT_EQ(sprt_test::run_command(check, &log), 0) << log;
}

TEST(Cli, BadArgumentsExitWithCode2AndNameTheArgument) {
  struct Case {
    std::string args, expect;
  };
  const std::vector<Case> cases = {
      {"--max-keypoints 400000", "--max-keypoints"},
      {"--max-keypoints abc", "--max-keypoints"},
      {"--keypoint-threshold nan", "--keypoint-threshold"},
      {"--keypoint-threshold 2", "0..1"},
      {"--nms-radius 33", "0..32"},
      {"--nms-radius -1", "--nms-radius"},
      {"--threads x", "--threads"},
      {"--format xml", "--format"},
      {"--frobnicate", "--frobnicate"},
      {"--nms-radius", "needs a value"},
  };
  for (const auto& c : cases) {
    std::string log;
    const int rc = sprt_test::run_command(cli() + "extract " + img("icl_250.png") + " --out /tmp/x " + c.args, &log);
    EXPECT_EQ(rc, 2) << c.args << ": " << log;
    EXPECT_NE(log.find(c.expect), std::string::npos) << c.args << ": " << log;
  }
  std::string log;
  EXPECT_EQ(sprt_test::run_command(cli() + "nosuchcommand", &log), 2);
  EXPECT_EQ(sprt_test::run_command(cli() + "extract --out /tmp/x", &log), 2);
}

TEST(Cli, UnreadableImagesAreReportedOthersStillProcessed) {
  sprt_test::TempDir out;
  sprt_test::write_bytes(out.file("broken.jpg"), {0xFF, 0xD8, 0xFF, 0xE0, 0, 16, 'J', 'F'});
  std::string log;
  const int rc = sprt_test::run_command(cli() + "extract " + out.file("broken.jpg") + " /no/such.png " +
                                            img("icl_254.png") + " --out " + out.path() + weights(),
                                        &log);
  EXPECT_NE(rc, 0);
  EXPECT_NE(rc, 2);
  EXPECT_NE(log.find("broken.jpg"), std::string::npos) << log;
  EXPECT_NE(log.find("/no/such.png"), std::string::npos) << log;
  EXPECT_TRUE(fs::exists(out.file("icl_254.png.npz"))) << log;
}

TEST(Cli, InfoAndQuickstart) {
  std::string log;
  ASSERT_EQ(sprt_test::run_command(cli() + "info" + weights(), &log), 0) << log;
  EXPECT_NE(log.find("backend: onednn"), std::string::npos) << log;
  EXPECT_NE(log.find("cpu features"), std::string::npos) << log;
  EXPECT_NE(log.find(sprt_test::weights_dir()), std::string::npos) << log;
  // The units that decide the precision, consistent with the kernel's flags, and one line per precision: what the
  // library says runs here, its speed against fp32 and its quality by the homography protocol (never the retired
  // keypoint Jaccard).
  const CpuinfoUnits units = cpuinfo_units();
  ASSERT_FALSE(units.flags.empty()) << "no flags line in /proc/cpuinfo";
  EXPECT_NE(log.find(units.line() + "\n"), std::string::npos) << units.line() << "\n" << log;
  for (const std::string& l : precision_lines()) EXPECT_NE(log.find(l), std::string::npos) << l << "\n" << log;
  EXPECT_NE(log.find("precision fp32: runs; forward time 1.00x fp32's"), std::string::npos) << log;
  if (precision_runs("int8")) {
    EXPECT_NE(log.find("F1@2"), std::string::npos) << log;
  }
  EXPECT_EQ(log.find("Jaccard"), std::string::npos) << log;
  // A precision that does not run here is refused by name when asked for; bf16 loads where it runs (fp32 is the
  // run above, int8 Int8CalibrationFolder's).
  for (const PrecisionReport& r : precisions_on_this_cpu()) {
    if (r.runs && r.precision != "bf16") continue;
    const int rc = sprt_test::run_command(cli() + "info --precision " + r.precision + weights(), &log);
    if (r.runs) {
      EXPECT_EQ(rc, 0) << r.precision << "\n" << log;
      EXPECT_NE(log.find("backend: onednn on cpu, " + r.precision + ","), std::string::npos) << log;
    } else {
      EXPECT_NE(rc, 0) << r.precision << "\n" << log;
      EXPECT_NE(log.find("precision \"" + r.precision + "\" needs"), std::string::npos) << log;
    }
  }
  sprt_test::TempDir out;
  ASSERT_EQ(sprt_test::run_command(cli() + "quickstart --out-dir " + out.path() + weights(), &log), 0) << log;
  for (const char* f : {"keypoints.png", "keypoints.json", "descriptors.npy", "input.png"})
    EXPECT_TRUE(fs::exists(out.file(f))) << f << "\n" << log;
  const auto npy = sprt_test::read_bytes(out.file("descriptors.npy"));
  const auto arr = util::parse_npy(npy.data(), npy.size(), "descriptors.npy");
  ASSERT_EQ(arr.shape.size(), 2u);
  EXPECT_GT(arr.shape[0], 50);  // the synthetic image has plenty of corners
  EXPECT_EQ(arr.shape[1], 256);
}

TEST(Cli, Int8CalibrationFolder) {
  sprt_test::TempDir dir;
  for (const char* n : {"icl_250.png", "skimage_camera.png"}) fs::copy_file(img(n), dir.file(n));
  std::string log;
  const std::string calib = " --calibration " + dir.path();
  if (!precision_runs("int8")) {  // the library's answer for this CPU (and the SUPERPOINT_RT_ISA cap)
    EXPECT_NE(sprt_test::run_command(cli() + "info --precision int8" + calib + weights(), &log), 0) << log;
    EXPECT_NE(log.find("precision \"int8\" needs"), std::string::npos) << log;
    return;
  }
  ASSERT_EQ(sprt_test::run_command(cli() + "info --precision int8" + calib + weights(), &log), 0) << log;
  EXPECT_NE(log.find("int8 calibration: 2 image(s)"), std::string::npos) << log;
  EXPECT_NE(sprt_test::run_command(cli() + "info" + calib + weights(), &log), 0) << log;
  EXPECT_NE(log.find("only precision \"int8\" uses them"), std::string::npos) << log;
  sprt_test::TempDir empty;
  EXPECT_EQ(sprt_test::run_command(cli() + "info --precision int8 --calibration " + empty.path() + weights(), &log), 2)
      << log;
  EXPECT_NE(log.find("no images in"), std::string::npos) << log;
}

TEST(Cli, BenchPrintsOneTableAndJson) {
  sprt_test::TempDir out;
  const std::string json_path = out.file("bench.json");
  std::string log;
  // One small extra frame keeps the test quick (the default frames are 1024x768 and 1600x1200), and so do two
  // copies per throughput iteration and a folder of two small images. No peers, but a peer Python (the test one,
  // with numpy) for the float64 reference (bench/reference_f64.py) that every row's error is measured against.
  sprt_test::TempDir folder;
  for (const char* name : {"icl_250.png", "skimage_coins.png"})
    std::filesystem::copy_file(img(name), folder.file(name));
  const std::string py = sprt_test::python_with(false);
  ASSERT_FALSE(py.empty());
  const std::string args = " --rounds 1 --iters 2 --warmup 0 --threads 1 --precisions fp32 --peers '' --peer-python " +
                           py + " --peer-script " + SPRT_SOURCE_DIR + "/bench/peer_worker.py --jpeg " +
                           img("berlin01_1600x900.jpg") + " --png " + img("icl_250.png") + " --json " + json_path +
                           " --frames 320x240 --throughput-copies 2 --images " + folder.path();
  ASSERT_EQ(sprt_test::run_command(cli() + "bench" + args + weights(), &log), 0) << log;
  for (const std::string& s :
       std::vector<std::string>{"forward 480x640", "JPEG 1600x900", "PNG 640x480", "x ORT", "x OV", "ours fp32",
                                "error vs f64", "forward 640x480", "forward 320x240", "cost/px", "hloc request",
                                "hloc:superpoint_aachen on the JPEG 1600x900 (network 1024x576)",
                                "throughput: ms per image (p50) of 2 copies", "list JPEG", "batch folder", "x/ceil",
                                "the 2 images of " + folder.path()})
    EXPECT_NE(log.find(s), std::string::npos) << s << "\n" << log;
  const CpuinfoUnits units = cpuinfo_units();
  const auto units_at = log.find(units.line() + "\n");
  EXPECT_NE(units_at, std::string::npos) << units.line() << "\n" << log;
  EXPECT_LT(units_at, log.find("forward 480x640")) << "the units line comes above the table\n" << log;
  const std::string fastest = "fastest precision here: " + fastest_precision_on_this_cpu() + "\n";
  EXPECT_NE(log.find(fastest), std::string::npos) << fastest << log;
  const auto j = nlohmann::json::parse(sprt_test::read_bytes(json_path));
  ASSERT_EQ(j.at("rows").size(), 1u);
  const auto& row = j.at("rows")[0];
  EXPECT_EQ(row.at("row"), "ours fp32");
  for (const char* kind : {"forward", "plane", "jpeg", "png"}) {
    ASSERT_EQ(row.at(kind).at("ms").size(), 2u) << kind;
    EXPECT_GT(row.at(kind).at("p50").get<double>(), 0.0) << kind;
  }
  EXPECT_GT(row.at("peak_rss_mb_forward").get<double>(), 10.0);
  EXPECT_GT(row.at("peak_rss_mb_request").get<double>(), 10.0);
  EXPECT_NE(row.at("plan").get<std::string>().find("conv1a"), std::string::npos);
  // fp32 against the float64 network on the same plane: inside SPEC §2's bounds (scores 1e-5, descriptors 1e-4),
  // and not zero (float32 rounds). A layout mix-up (cell-major read as channel-major) gives errors near 1.
  const auto& err = row.at("error_vs_float64");
  for (const char* map : {"scores", "descriptors"}) EXPECT_GT(err.at(map).get<double>(), 0.0) << map;
  EXPECT_LE(err.at("scores").get<double>(), 1e-5);
  EXPECT_LE(err.at("descriptors").get<double>(), 1e-4);
  // The throughput table: every interface measured once per iteration (the folder once per round), and its share
  // of the network-only rate is the forward p50 over its own p50.
  for (const char* kind : {"list_jpeg", "batch_jpeg", "server_jpeg", "batch_images"}) {
    ASSERT_EQ(row.at(kind).at("ms").size(), std::string(kind) == "batch_images" ? 1u : 2u) << kind;
    const double p50 = row.at(kind).at("p50").get<double>();
    EXPECT_GT(p50, 0.0) << kind;
    EXPECT_NEAR(row.at(kind).at("x_net").get<double>(), row.at("forward").at("p50").get<double>() / p50, 1e-9) << kind;
    // The ceiling the host work leaves: the forward's CPU per image over the interface's (which includes a forward).
    const double cpu = row.at(kind).at("cpu_ms_per_image").get<double>();
    EXPECT_GT(cpu, 0.0) << kind;
    EXPECT_NEAR(row.at(kind).at("ceiling").get<double>(), row.at("forward").at("cpu_ms_per_image").get<double>() / cpu,
                1e-9)
        << kind;
    EXPECT_NEAR(row.at(kind).at("x_net_vs_ceiling").get<double>(),
                row.at(kind).at("x_net").get<double>() / row.at(kind).at("ceiling").get<double>(), 1e-9)
        << kind;
  }
  // The network frames and the hloc request: new keys beside the 640x480 ones.
  EXPECT_EQ(j.at("frames"), nlohmann::json::array({"640x480", "320x240"}));
  ASSERT_EQ(row.at("forward_320x240").at("ms").size(), 2u);
  const auto& frame = row.at("frames").at("320x240");
  EXPECT_NEAR(frame.at("p50").get<double>(), row.at("forward_320x240").at("p50").get<double>(), 1e-9);
  EXPECT_NEAR(frame.at("cost_per_pixel_vs_640x480").get<double>(),
              frame.at("p50").get<double>() / row.at("forward").at("p50").get<double>() / 0.25, 1e-9);
  EXPECT_DOUBLE_EQ(row.at("frames").at("640x480").at("cost_per_pixel_vs_640x480").get<double>(), 1.0);
  EXPECT_FALSE(frame.contains("vs_ort"));  // no peers
  ASSERT_EQ(row.at("hloc_jpeg").at("ms").size(), 2u);
  EXPECT_GT(row.at("hloc_jpeg").at("forward_p50").get<double>(), 0.0);
  EXPECT_GT(row.at("hloc_request").at("p50").get<double>(), 0.0);
  EXPECT_EQ(j.at("hloc_request").at("preset"), "hloc:superpoint_aachen");
  EXPECT_EQ(j.at("hloc_request").at("network_size"), nlohmann::json::array({576, 1024}));
  // The JSON's units are the same detection as the line above (after the cap); what runs is the library's answer.
  const auto& ju = j.at("cpu_units");
  const util::CpuFeatures& cf = util::cpu_features();
  EXPECT_EQ(ju.at("avx2").get<bool>(), cf.avx2);
  EXPECT_EQ(ju.at("fma").get<bool>(), cf.fma);
  EXPECT_EQ(ju.at("avx512").get<bool>(), cf.avx512());
  EXPECT_EQ(ju.at("avx512_vnni").get<bool>(), cf.avx512_vnni);
  EXPECT_EQ(ju.at("avx512_bf16").get<bool>(), cf.avx512_bf16);
  EXPECT_EQ(ju.at("amx").get<bool>(), cf.amx);
  EXPECT_EQ(j.at("fastest_precision").get<std::string>(), fastest_precision_on_this_cpu());
  const std::vector<PrecisionReport> precisions = precisions_on_this_cpu();
  ASSERT_EQ(j.at("precisions").size(), precisions.size());
  for (std::size_t i = 0; i < precisions.size(); ++i) {
    EXPECT_EQ(j.at("precisions")[i].at("precision"), precisions[i].precision);
    EXPECT_EQ(j.at("precisions")[i].at("runs").get<bool>(), precisions[i].runs);
  }

  // A precision name the product does not have and an unknown option are usage errors that name them.
  EXPECT_EQ(
      sprt_test::run_command(cli() + "bench --precisions fp64 --rounds 1 --iters 1 --peer-python ''" + weights(), &log),
      2)
      << log;
  EXPECT_NE(log.find("fp64"), std::string::npos) << log;
  EXPECT_EQ(sprt_test::run_command(cli() + "bench --frobnicate", &log), 2) << log;
  EXPECT_NE(log.find("--frobnicate"), std::string::npos) << log;
  for (const char* bad : {"1024x76a", "4x10", "640"}) {
    EXPECT_EQ(sprt_test::run_command(cli() + "bench --frames " + bad + " --peer-python ''" + weights(), &log), 2)
        << log;
    EXPECT_NE(log.find(bad), std::string::npos) << log;
  }
  EXPECT_EQ(sprt_test::run_command(cli() + "bench --help", &log), 0) << log;

  // A precision this CPU lacks (bf16 needs avx512_bf16; SUPERPOINT_RT_ISA=avx2 caps the kernels as on such a CPU)
  // drops its row with a note instead of failing the whole table. Without a peer Python (the last --peer-python
  // wins) the table says so, and has no error vs float64.
  ASSERT_EQ(sprt_test::run_command("SUPERPOINT_RT_ISA=avx2 " + cli() + "bench" + args + weights() +
                                       " --precisions fp32,bf16 --peer-python ''",
                                   &log),
            0)
      << log;
  EXPECT_NE(log.find("no peer Python"), std::string::npos) << log;
  const auto capped = nlohmann::json::parse(sprt_test::read_bytes(json_path));
  ASSERT_FALSE(capped.at("rows").empty());
  EXPECT_FALSE(capped.at("rows")[0].contains("error_vs_float64"));
  EXPECT_NE(log.find("ours bf16 at 2 thread(s) not measured"), std::string::npos) << log;
  EXPECT_NE(log.find("ours fp32"), std::string::npos) << log;
  EXPECT_NE(log.find(units.line("avx2") + "\n"), std::string::npos) << units.line("avx2") << "\n" << log;
}

}  // namespace
