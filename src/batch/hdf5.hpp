// The HDF5 plumbing of the hloc files (batch/h5.cpp writes feature files, batch/hloc_read.cpp reads feature and match
// files): identifier ownership, the process-wide lock, and errors that name the file. Internal to the library.
//
// Thread-safety: Debian's HDF5 is built without its thread-safety option, so every HDF5 call of the library is made
// while holding hdf5_mutex() (recursive: a locked function may call another).
#pragma once

#include <hdf5.h>

#include <mutex>
#include <string>
#include <utility>

#include "superpoint_rt/errors.hpp"

namespace superpoint_rt::batch {

/// Owns one HDF5 identifier; `close` is the matching H5?close.
class Hid {
 public:
  Hid(hid_t id, herr_t (*closer)(hid_t)) : id_(id), close_(closer) {}
  Hid(Hid&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  Hid(const Hid&) = delete;
  Hid& operator=(const Hid&) = delete;
  Hid& operator=(Hid&& o) noexcept {
    if (this != &o) {
      close();
      std::swap(id_, o.id_);
      std::swap(close_, o.close_);
    }
    return *this;
  }
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

/// The lock every HDF5 call of the library holds (see the file comment).
std::recursive_mutex& hdf5_mutex();

/// Turns off HDF5's printing of its error stack to stderr (once per process); we report our own errors with the
/// file name instead.
void quiet_hdf5();

[[noreturn]] inline void io_error(const std::string& what, const std::string& path) {
  throw Error(ErrorKind::Io, what + ": " + path);
}

inline void check(herr_t r, const std::string& what, const std::string& path) {
  if (r < 0) io_error(what, path);
}

/// Opens an existing file (H5F_ACC_RDONLY / H5F_ACC_RDWR); Error(Io) naming it when it is missing, not HDF5 or
/// damaged. Call with hdf5_mutex() held.
Hid open_h5(const std::string& path, unsigned flags);

}  // namespace superpoint_rt::batch
