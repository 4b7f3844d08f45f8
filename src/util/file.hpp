// Whole-file reads and crash-safe file replacement: the one implementation of each, used by the image API
// (superpoint_rt::read_file), weights and hub files (model/), NPZ files (util/npz, the CLI) and the batch feature
// files and reports (batch/). Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace superpoint_rt::util {

/// No limit (the caller bounds the size some other way, or reads what the user chose to give).
inline constexpr std::uint64_t kNoSizeLimit = std::numeric_limits<std::uint64_t>::max();

/// The whole content of `path` (a regular file, a pipe or a device). Throws Error: NotFound (no such file), Io (a
/// folder, cannot open or read it), TooLarge (more than `max_bytes` bytes, or no memory for it; names the path and
/// the limit).
std::vector<std::uint8_t> read_file(const std::string& path, std::uint64_t max_bytes);
/// read_file as text.
std::string read_text_file(const std::string& path, std::uint64_t max_bytes);

/// 8 random hex digits (from the kernel's entropy on every call, so processes forked from one parent never draw the
/// same ones, as a seeded generator would), for temporary file names.
std::string random_hex8();

/// Moves the finished temporary file `tmp` over `path` atomically (rename(2) within one folder): first fsync(2)s it
/// (a regular file; a symbolic link is renamed as it is), so that a crash after the rename cannot leave `path`
/// empty. On failure removes `tmp` and throws Error(Io) naming both.
void rename_into_place(const std::string& tmp, const std::string& path);

/// Asks the kernel to start writing `path`'s dirty pages to disk now, without waiting (sync_file_range(2) with
/// SYNC_FILE_RANGE_WRITE), so that the fsync of rename_into_place() later has less to wait for. Best effort: does
/// nothing where that fails.
void start_writeback(const std::string& path) noexcept;

/// Writes `bytes` to `path` atomically: a new temporary file <path>.<8 hex>.tmp next to it, fsync, rename. A reader
/// sees the old file or the new one, never a part. On failure the temporary file is removed; throws Error(Io)
/// naming the path.
void write_file_atomic(const std::string& path, std::string_view bytes);
void write_file_atomic(const std::string& path, const std::vector<std::uint8_t>& bytes);

}  // namespace superpoint_rt::util
