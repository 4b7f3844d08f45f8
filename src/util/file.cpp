#include "util/file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <new>
#include <random>

#include "superpoint_rt/errors.hpp"

namespace superpoint_rt::util {
namespace {

[[noreturn]] void too_large(const std::string& path, std::uint64_t max_bytes) {
  throw Error(ErrorKind::TooLarge,
              "file '" + path + "' is larger than the limit of " + std::to_string(max_bytes) + " bytes");
}

/// Closes the FILE on every path out of read_file.
struct FileCloser {
  std::FILE* f;
  ~FileCloser() { std::fclose(f); }
};

}  // namespace

std::vector<std::uint8_t> read_file(const std::string& path, std::uint64_t max_bytes) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (st.type() == std::filesystem::file_type::not_found) {
    throw Error(ErrorKind::NotFound, "file '" + path + "' does not exist");
  }
  if (st.type() == std::filesystem::file_type::directory) {
    throw Error(ErrorKind::Io, "'" + path + "' is a directory, not a file");
  }
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) {
    const int e = errno;
    throw Error(e == ENOENT ? ErrorKind::NotFound : ErrorKind::Io, "cannot open '" + path + "': " + std::strerror(e));
  }
  const FileCloser closer{f};
  std::vector<std::uint8_t> out;
  try {
    struct stat sb {};
    if (::fstat(::fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0) {
      if (static_cast<std::uint64_t>(sb.st_size) > max_bytes) too_large(path, max_bytes);
      out.resize(static_cast<std::size_t>(sb.st_size));
      const std::size_t got = std::fread(out.data(), 1, out.size(), f);
      out.resize(got);
    }
    // Read the rest (or everything, for pipes / files whose size changed meanwhile).
    std::uint8_t buf[65536];
    for (;;) {
      const std::size_t n = std::fread(buf, 1, sizeof buf, f);
      if (n == 0) break;
      if (n > max_bytes - out.size()) too_large(path, max_bytes);
      out.insert(out.end(), buf, buf + n);
    }
    if (std::ferror(f)) {
      const int e = errno;
      throw Error(ErrorKind::Io, "cannot read '" + path + "': " + std::strerror(e));
    }
  } catch (const std::bad_alloc&) {
    throw Error(ErrorKind::TooLarge, "file '" + path + "' is too large to read into memory");
  }
  return out;
}

std::string read_text_file(const std::string& path, std::uint64_t max_bytes) {
  const std::vector<std::uint8_t> b = read_file(path, max_bytes);
  return std::string(b.begin(), b.end());
}

std::string random_hex8() {
  static const char* hex = "0123456789abcdef";
  std::random_device rd;
  std::uint32_t v = rd();
  std::string out(8, '0');
  for (auto& c : out) {
    c = hex[v & 15];
    v >>= 4;
  }
  return out;
}

void rename_into_place(const std::string& tmp, const std::string& path) {
  const auto fail = [&](const std::string& why) {
    ::unlink(tmp.c_str());
    throw Error(ErrorKind::Io, "cannot move " + tmp + " to " + path + ": " + why);
  };
  // O_NOFOLLOW: a symbolic link (a hub snapshot pointer) has no data of its own to flush (open fails with ELOOP).
  const int fd = ::open(tmp.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) {
    // EINVAL: a file system without fsync support (nothing to flush there).
    const int rc = ::fsync(fd), e = errno;
    ::close(fd);
    if (rc != 0 && e != EINVAL) fail(std::string("fsync: ") + std::strerror(e));
  } else if (errno != ELOOP) {
    fail(std::strerror(errno));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail(std::strerror(errno));
}

void start_writeback(const std::string& path) noexcept {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  ::sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
  ::close(fd);
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  const std::string tmp = path + "." + random_hex8() + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0)
    throw Error(ErrorKind::Io, "cannot write " + path + ": cannot create " + tmp + ": " + std::strerror(errno));
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const std::string why = w < 0 ? std::strerror(errno) : "no progress";
      ::close(fd);
      ::unlink(tmp.c_str());
      throw Error(ErrorKind::Io, "cannot write " + path + ": " + why);
    }
    done += static_cast<std::size_t>(w);
  }
  if (::close(fd) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    throw Error(ErrorKind::Io, "cannot write " + path + ": " + why);
  }
  rename_into_place(tmp, path);
}

void write_file_atomic(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  write_file_atomic(path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

}  // namespace superpoint_rt::util
