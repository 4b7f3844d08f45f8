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

#include "superpoint_rt/match.hpp"

namespace superpoint_rt::util::h5 {

/// The longest object path listed (dataset_parents): a pair's group (two image names of at most kMaxPairNameBytes
/// and the '/' between them, hloc's names_to_pair) and a dataset name. Checked as HDF5 walks the file, so that a file
/// of nested groups cannot make the walk build paths quadratic in its size.
inline constexpr std::size_t kMaxObjectPathBytes = 2 * kMaxPairNameBytes + 256;
/// The walk (dataset_parents) examines each group's links once, and a stored link takes at least this many bytes (a
/// compact link message: version, flags, name length, a 1-byte name and an 8-byte address; a v1 group's symbol table
/// entry takes 40): so a file of B bytes has at most B / kMinLinkBytes links to examine. A file whose walk examines
/// more is damaged (H5Ovisit walked a group linked many times under a false reference count once per path:
/// exponentially many from a few bytes; our walk lists each object once, by address).
inline constexpr std::uint64_t kMinLinkBytes = 8;

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
/// Opens a file image held in memory, read-only (HDF5's core driver with the bytes as its file image: HDF5 copies
/// them, nothing touches the disk), with HDF5's error printing off; `name` names it in messages (and must differ
/// between images open at once: HDF5 treats two core files of one name as one file). Throws Error(Io) naming it.
Hid open_image(const void* data, std::size_t size, const std::string& name);

/// h5py's float16: IEEE binary16 as an HDF5 float type (HDF5 1.10 has no predefined one). The caller closes it.
hid_t make_f16_type();

/// Creates dataset `name` in `group` with `dims` and writes `data` (in `mem_type`) into it; `where` names the
/// place in messages.
void write_dataset(hid_t group, const char* name, hid_t file_type, hid_t mem_type, const std::vector<hsize_t>& dims,
                   const void* data, const std::string& where);

/// hloc's list_h5_names: the parent group of every dataset, without the leading '/', sorted (datasets at the root
/// belong to no name and are left out). Throws Error(InvalidArgument) naming the path and the limit for an object
/// path over kMaxObjectPathBytes or more links than the file's size allows (kMinLinkBytes), Error(Io) when HDF5
/// cannot walk the file. Hard links only (soft and external links are not followed); an object reached by several
/// paths is listed under the first, in HDF5's native link order, depth first.
std::vector<std::string> dataset_parents(hid_t file, const std::string& path);

/// Writes a new part file <dir>/part-<microseconds>-<pid>-<seq>.h5 atomically: creates `dir` when missing, creates
/// <...>.h5.tmp, lets `fill` write into it (file id, path for messages), closes it (a failed close is Error(Io)) and
/// renames it into place. Returns the final path. The caller holds lock().
std::string write_part_file(const std::string& dir, std::size_t seq,
                            const std::function<void(hid_t, const std::string&)>& fill);

/// A link creation property list that creates missing intermediate groups (h5py's create_group("a/b")).
Hid intermediate_groups();

}  // namespace superpoint_rt::util::h5
