#include "common/test_util.hpp"

#include <sys/wait.h>
#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>

namespace sprt_test {

std::string shared_dir() {
  if (const char* s = std::getenv("SUPERPOINT_RT_SHARED"); s && *s) return s;
  return SPRT_DEFAULT_SHARED_DIR;
}
std::string weights_dir() {
  return shared_dir() + "/weights/superpoint";
}
std::string images_dir() {
  return shared_dir() + "/images";
}
std::string golden_dir() {
  return shared_dir() + "/golden";
}

TempDir::TempDir() {
  std::random_device rd;
  const auto base = std::filesystem::temp_directory_path();
  for (int i = 0; i < 100; ++i) {
    auto p = base / ("sprt-test-" + std::to_string(rd()));
    if (std::filesystem::create_directory(p)) {
      path_ = p.string();
      return;
    }
  }
  throw std::runtime_error("cannot create a temporary directory");
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::vector<std::uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::vector<std::string> shared_jpegs() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(images_dir())) {
    std::string ext = e.path().extension().string();
    for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (ext == ".jpg" || ext == ".jpeg") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<float> random_plane(int h, int w, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> px(0, 255);
  std::vector<float> p(static_cast<std::size_t>(h) * static_cast<std::size_t>(w));
  for (auto& v : p) v = static_cast<float>(px(rng)) / 255.0f;
  return p;
}

void write_bytes(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw std::runtime_error("cannot write " + path);
}

int run_command(const std::string& cmd, std::string* output) {
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  std::array<char, 4096> buf{};
  std::string out;
  while (std::fgets(buf.data(), static_cast<int>(buf.size()), p)) out += buf.data();
  const int st = ::pclose(p);
  if (output) *output = out;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::string python_with(bool need_pil) {
  const char* env = std::getenv("SUPERPOINT_RT_PYTHON");
  std::vector<std::string> candidates;
  if (env && *env) candidates.emplace_back(env);
  candidates.emplace_back("/usr/bin/python3");
  candidates.emplace_back("python3");
  const std::string probe = need_pil ? "import numpy, PIL" : "import numpy";
  for (const auto& c : candidates) {
    if (run_command(c + " -c '" + probe + "'") == 0) return c;
  }
  return {};
}

}  // namespace sprt_test
