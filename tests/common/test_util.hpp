// Helpers shared by the test programs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sprt_test {

/// The shared test-data folder: $SUPERPOINT_RT_SHARED, else the configure-time default (../shared beside the
/// checkout). Read-only in CI: never write there.
std::string shared_dir();
std::string weights_dir();  // <shared>/weights/superpoint
std::string images_dir();   // <shared>/images
std::string golden_dir();   // <shared>/golden

/// A fresh temporary directory, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::vector<std::uint8_t> read_bytes(const std::string& path);
/// The JPEG files (.jpg / .jpeg, any case) of images_dir(), sorted.
std::vector<std::string> shared_jpegs();
/// A 8-bit-valued network input plane (v / 255, h x w) from a seeded generator.
std::vector<float> random_plane(int h, int w, unsigned seed);
void write_bytes(const std::string& path, const std::vector<std::uint8_t>& bytes);

/// Runs a shell command, returns its exit status (-1 if it could not run) and captures stdout+stderr.
int run_command(const std::string& cmd, std::string* output = nullptr);

/// A python3 with numpy (and Pillow when `need_pil`) for tests that compare with Pillow / numpy; empty if none.
std::string python_with(bool need_pil);

}  // namespace sprt_test
