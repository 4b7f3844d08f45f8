#include "util/hdf5.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>
#include <string_view>

#include "superpoint_rt/errors.hpp"
#include "util/file.hpp"

namespace superpoint_rt::util::h5 {
namespace {

/// HDF5 prints its error stack to stderr by default; we report our own errors with the file name instead.
void quiet() {
  static std::atomic<bool> done{false};
  if (!done.exchange(true)) H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

struct Walk {
  std::set<std::string> names;
  std::set<haddr_t> seen;  // objects already listed (each group is walked once, whatever its reference count)
  std::uint64_t links = 0, max_links = 0;
  std::string prefix;  // the path of the group being walked, "" for the root
  std::string error;   // why the walk stopped early
};

herr_t link_cb(hid_t group, const char* name, const H5L_info_t* info, void* data);

// Walks `group`'s links (native order), depth first: our own walk rather than H5Ovisit, which tracks only objects
// whose reference count says they have several links, so that a group linked many times under a false count was
// walked once per path, inside HDF5, before any callback could stop it (fuzz_h5: 33 s for an 11 KB file under
// AddressSanitizer, fuzz/regressions/h5/timeout-c4127754...). Here every link examined counts against the bound.
herr_t walk_group(hid_t group, Walk& w) {
  return H5Literate(group, H5_INDEX_NAME, H5_ITER_NATIVE, nullptr, link_cb, &w);
}

// Returns 1 (stop) with Walk::error set when a bound is exceeded, before the name is copied; -1 when HDF5 fails.
herr_t link_cb(hid_t group, const char* name, const H5L_info_t* info, void* data) {
  auto& w = *static_cast<Walk*>(data);
  if (++w.links > w.max_links) {
    w.error = "more than " + std::to_string(w.max_links) + " links (a file of its size holds at most one per " +
              std::to_string(kMinLinkBytes) + " bytes)";
    return 1;
  }
  if (info->type != H5L_TYPE_HARD) return 0;  // soft and external links are not followed (as H5Ovisit)
  const std::size_t len = strnlen(name, kMaxObjectPathBytes + 1);
  if (len > kMaxObjectPathBytes || w.prefix.size() + 1 + len > kMaxObjectPathBytes) {
    w.error = "an object path over " + std::to_string(kMaxObjectPathBytes) + " bytes";
    return 1;
  }
  H5O_info_t oi;
  if (H5Oget_info_by_name2(group, name, &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0) return -1;
  if (!w.seen.insert(oi.addr).second) return 0;  // listed through another path already
  if (oi.type == H5O_TYPE_DATASET) {
    w.names.insert(w.prefix);
    return 0;
  }
  if (oi.type != H5O_TYPE_GROUP) return 0;
  const hid_t sub = H5Gopen2(group, name, H5P_DEFAULT);
  if (sub < 0) return -1;
  const std::size_t keep = w.prefix.size();
  if (!w.prefix.empty()) w.prefix += '/';
  w.prefix.append(name, len);
  const herr_t r = walk_group(sub, w);
  w.prefix.resize(keep);
  H5Gclose(sub);
  return r;
}

}  // namespace

std::recursive_mutex& lock() {
  static std::recursive_mutex m;
  return m;
}

void io_error(const std::string& what, const std::string& path) {
  throw Error(ErrorKind::Io, what + ": " + path);
}

void check(herr_t r, const std::string& what, const std::string& path) {
  if (r < 0) io_error(what, path);
}

Hid open_file(const std::string& path, unsigned flags) {
  quiet();
  Hid f(H5Fopen(path.c_str(), flags, H5P_DEFAULT), H5Fclose);
  if (!f.ok()) io_error("cannot open HDF5 file (missing, not HDF5, or damaged)", path);
  return f;
}

Hid open_image(const void* data, std::size_t size, const std::string& name) {
  quiet();
  // (An empty image would make the core driver open `name` on the disk instead.)
  if (data == nullptr || size == 0) io_error("cannot open HDF5 file image (empty)", name);
  Hid fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (!fapl.ok()) io_error("cannot create a file access property list", name);
  // Growth increment 64 KiB (unused: read-only), no backing store: the image stays in memory.
  check(H5Pset_fapl_core(fapl.get(), std::size_t{1} << 16, 0), "cannot select HDF5's in-memory driver", name);
  check(H5Pset_file_image(fapl.get(), const_cast<void*>(data), size), "cannot hand the file image to HDF5", name);
  Hid f(H5Fopen(name.c_str(), H5F_ACC_RDONLY, fapl.get()), H5Fclose);
  if (!f.ok()) io_error("cannot open HDF5 file image (not HDF5, or damaged)", name);
  return f;
}

Hid create_file(const std::string& path) {
  quiet();
  Hid f(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
  if (!f.ok()) io_error("cannot create HDF5 file", path);
  return f;
}

hid_t make_f16_type() {
  const hid_t t = H5Tcopy(H5T_IEEE_F32LE);
  H5Tset_fields(t, 15, 10, 5, 0, 10);
  H5Tset_size(t, 2);
  H5Tset_ebias(t, 15);
  return t;
}

void write_dataset(hid_t group, const char* name, hid_t file_type, hid_t mem_type, const std::vector<hsize_t>& dims,
                   const void* data, const std::string& where) {
  Hid space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose);
  Hid ds(H5Dcreate2(group, name, file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
  if (!ds.ok()) io_error(std::string("cannot create dataset ") + name, where);
  hsize_t n = 1;
  for (auto d : dims) n *= d;
  if (n) check(H5Dwrite(ds.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), "cannot write", where);
}

std::vector<std::string> dataset_parents(hid_t file, const std::string& path) {
  hsize_t bytes = 0;
  check(H5Fget_filesize(file, &bytes), "cannot read the size of", path);
  Walk w;
  w.max_links = bytes / kMinLinkBytes;
  H5O_info_t root;
  check(H5Oget_info2(file, &root, H5O_INFO_BASIC), "cannot list", path);
  w.seen.insert(root.addr);
  Hid g(H5Gopen2(file, "/", H5P_DEFAULT), H5Gclose);
  if (!g.ok()) io_error("cannot list", path);
  const herr_t r = walk_group(g.get(), w);
  if (!w.error.empty()) throw Error(ErrorKind::InvalidArgument, path + ": " + w.error);
  check(r, "cannot list", path);
  w.names.erase("");  // datasets at the root belong to no image
  return {w.names.begin(), w.names.end()};
}

std::string write_part_file(const std::string& dir, std::size_t seq,
                            const std::function<void(hid_t, const std::string&)>& fill) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) io_error("cannot create folder (" + ec.message() + ")", dir);
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  std::ostringstream base;
  base << dir << "/part-" << std::chrono::duration_cast<std::chrono::microseconds>(now).count() << "-" << ::getpid()
       << "-" << seq;
  const std::string tmp = base.str() + ".h5.tmp", final_path = base.str() + ".h5";
  {
    Hid f = create_file(tmp);
    fill(f.get(), tmp);
    check(f.close(), "cannot close", tmp);
  }
  util::rename_into_place(tmp, final_path);
  return final_path;
}

Hid intermediate_groups() {
  Hid lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  return lcpl;
}

}  // namespace superpoint_rt::util::h5
