// Replays fuzz inputs without libFuzzer: runs LLVMFuzzerTestOneInput once on every file named on the command line
// (folders: every file under them, recursively, in name order; names starting with '.' are skipped, e.g. .gitkeep).
// ctest runs it over the seed corpus and fuzz/regressions/<harness>/ in every build, so a crash that libFuzzer found
// once fails the Release and the sanitizer builds too. Exit status: 0 when every input ran, 1 when an argument does
// not exist or no input file was found at all (an empty corpus must not pass silently) or when the harness's closing
// check (SprtFuzzReplayCheck) fails; a crash aborts as it would under libFuzzer (the sanitizers report it).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) __attribute__((weak));
// Optional, defined by a harness whose corpus must reach a path (fuzz_decode_plane.cpp: the two-thread JPEG decode):
// called after every input ran; prints what it counted and returns non-zero when the corpus missed the path.
extern "C" int SprtFuzzReplayCheck() __attribute__((weak));

namespace {

namespace fs = std::filesystem;

bool hidden(const fs::path& p) {
  const std::string n = p.filename().string();
  return !n.empty() && n[0] == '.';
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    const fs::path arg = argv[i];
    std::error_code ec;
    if (fs::is_directory(arg, ec)) {
      std::vector<fs::path> found;
      for (const auto& e : fs::recursive_directory_iterator(arg)) {
        if (e.is_regular_file() && !hidden(e.path())) found.push_back(e.path());
      }
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else if (fs::is_regular_file(arg, ec)) {
      files.push_back(arg);
    } else {
      std::fprintf(stderr, "replay: '%s' is neither a file nor a folder\n", argv[i]);
      return 1;
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "replay: no input files in the %d path(s) given\n", argc - 1);
    return 1;
  }
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      std::fprintf(stderr, "replay: cannot read '%s'\n", f.c_str());
      return 1;
    }
    // A copy of exactly `size` bytes on the heap, as libFuzzer passes it: ASan then sees a read past the end.
    std::vector<std::uint8_t> data(bytes.begin(), bytes.end());
    std::fprintf(stderr, "replay: %s (%zu bytes)\n", f.c_str(), data.size());
    LLVMFuzzerTestOneInput(data.empty() ? nullptr : data.data(), data.size());
  }
  std::fprintf(stderr, "replay: %zu inputs ran\n", files.size());
  if (SprtFuzzReplayCheck && SprtFuzzReplayCheck() != 0) {
    std::fprintf(stderr, "replay: the harness's closing check failed (see above)\n");
    return 1;
  }
  return 0;
}
