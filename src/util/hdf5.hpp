// HDF5 helpers shared by hloc's file formats: feature files (batch/h5.cpp) and match files (match/h5.cpp).
//
// Thread-safety: Debian's HDF5 is built without its thread-safety option, so every caller holds h5::lock() around
// everything it does with HDF5 (recursive: helpers that take it may call each other).
#pragma once

#include <hdf5.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace superpoint_rt::util::h5 {

/// Owns one HDF5 identifier; `close` is the matching H5?close.
class Hid {
 public:
  Hid(hid_t id, herr_t (*closer)(hid_t)) : id_(id), close_(closer) {}
  Hid(Hid&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  Hid(const Hid&) = delete;
  Hid& operator=(const Hid&) = delete;
  Hid& operator=(Hid&&) = delete;
  ~Hid() {
    if (id_ >= 0) close_(id_);
  }
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }
  /// Closes now and reports failure (a failed H5Fclose means the data did not reach the file).
  herr_t close() {
    herr_t r = 0;
    if (id_ >= 0) r = close_(id_);
    id_ = -1;
    return r;
  }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

/// The process-wide HDF5 lock (recursive).
std::recursive_mutex& lock();

/// Throws Error(Io) "<what>: <path>".
[[noreturn]] void io_error(const std::string& what, const std::string& path);
/// io_error when r < 0.
void check(herr_t r, const std::string& what, const std::string& path);

/// Opens / creates a file, with HDF5's own error printing turned off (we report errors with the file name). Throw
/// Error(Io) naming the path.
Hid open_file(const std::string& path, unsigned flags);
Hid create_file(const std::string& path);

/// h5py's float16: IEEE binary16 as an HDF5 float type (HDF5 1.10 has no predefined one). The caller closes it.
hid_t make_f16_type();

/// Creates dataset `name` in `group` with `dims` and writes `data` (in `mem_type`) into it; `where` names the
/// place in messages.
void write_dataset(hid_t group, const char* name, hid_t file_type, hid_t mem_type, const std::vector<hsize_t>& dims,
                   const void* data, const std::string& where);

/// hloc's list_h5_names: the parent group of every dataset, without the leading '/', sorted (datasets at the root
/// belong to no name and are left out).
std::vector<std::string> dataset_parents(hid_t file, const std::string& path);

/// Writes a new part file <dir>/part-<microseconds>-<pid>-<seq>.h5 atomically: creates `dir` when missing, creates
/// <...>.h5.tmp, lets `fill` write into it (file id, path for messages), closes it (a failed close is Error(Io)) and
/// renames it into place. Returns the final path. The caller holds lock().
std::string write_part_file(const std::string& dir, std::size_t seq,
                            const std::function<void(hid_t, const std::string&)>& fill);

/// A link creation property list that creates missing intermediate groups (h5py's create_group("a/b")).
Hid intermediate_groups();

}  // namespace superpoint_rt::util::h5
