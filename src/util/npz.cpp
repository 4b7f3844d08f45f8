#include "util/npz.hpp"

#include <zlib.h>

#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "superpoint_rt/errors.hpp"
#include "util/file.hpp"
#include "util/half.hpp"
#include "util/zip.hpp"

namespace superpoint_rt::util {
namespace {

// numpy's own limit on the number of dimensions (NPY_MAXDIMS is 32 in numpy 1.x, 64 in 2.x).
constexpr std::size_t kNpyMaxDims = 64;
// The largest member parse_npz reads: zlib's counters are 32-bit (uInt).
constexpr std::uint64_t kNpzMaxMemberBytes = std::numeric_limits<uInt>::max();
// Deflate's largest expansion: one 258-byte match per 2 bits at best, so about 1032:1 (zlib's zlib_tech.html).
constexpr std::uint64_t kDeflateMaxRatio = 1032;
// The largest file load_npz reads: far above any file of ours (feature and golden files are a few MB).
constexpr std::uint64_t kNpzMaxFileBytes = std::uint64_t{4} << 30;

[[noreturn]] void bad(const std::string& source, const std::string& what) {
  throw Error(ErrorKind::DecodeError, source + ": not a valid npy/npz file: " + what);
}

std::size_t item_size(const std::string& dt) {
  if (dt == "f8" || dt == "i8" || dt == "u8") return 8;
  if (dt == "f4" || dt == "i4" || dt == "u4") return 4;
  if (dt == "f2" || dt == "i2" || dt == "u2") return 2;
  if (dt == "i1" || dt == "u1" || dt == "b1") return 1;
  return 0;
}

template <class T>
T rd(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <class Out>
std::vector<Out> convert(const NpyArray& a) {
  const std::size_t item = item_size(a.dtype);
  if (item == 0) throw Error(ErrorKind::InvalidArgument, "npy array: unsupported dtype '" + a.dtype + "'");
  const auto n = static_cast<std::size_t>(a.size());
  // from_bytes() takes the shape and the bytes separately: never read past the bytes.
  if (a.data.size() / item < n || a.data.size() != n * item)
    throw Error(ErrorKind::InvalidArgument, "npy array: " + std::to_string(a.data.size()) + " bytes of dtype " +
                                                a.dtype + " do not hold the " + std::to_string(n) +
                                                " elements of its shape");
  std::vector<Out> out(n);
  const std::uint8_t* p = a.data.data();
  const std::string& d = a.dtype;
  for (std::size_t i = 0; i < n; ++i) {
    double v = 0;
    if (d == "f4")
      v = rd<float>(p + 4 * i);
    else if (d == "f8")
      v = rd<double>(p + 8 * i);
    else if (d == "f2")
      v = half_to_float(rd<std::uint16_t>(p + 2 * i));
    else if (d == "i1")
      v = rd<std::int8_t>(p + i);
    else if (d == "u1" || d == "b1")
      v = p[i];
    else if (d == "i2")
      v = rd<std::int16_t>(p + 2 * i);
    else if (d == "u2")
      v = rd<std::uint16_t>(p + 2 * i);
    else if (d == "i4")
      v = rd<std::int32_t>(p + 4 * i);
    else if (d == "u4")
      v = rd<std::uint32_t>(p + 4 * i);
    else if (d == "i8") {
      out[i] = static_cast<Out>(rd<std::int64_t>(p + 8 * i));
      continue;
    } else if (d == "u8") {
      out[i] = static_cast<Out>(rd<std::uint64_t>(p + 8 * i));
      continue;
    }
    if constexpr (std::is_integral_v<Out>) {
      // A float that is NaN, infinite or outside Out's range has no integer value (the cast would be undefined):
      // refuse it, as numpy's astype would give garbage. Bounds are powers of two, exact in double.
      const double hi = std::ldexp(1.0, std::numeric_limits<Out>::digits);
      const double lo = std::is_signed_v<Out> ? -hi : -1.0;
      if (!(v > lo || (std::is_signed_v<Out> && v == lo)) || !(v < hi))
        throw Error(ErrorKind::InvalidArgument, "npy array: element " + std::to_string(i) + " of dtype " + d + " (" +
                                                    std::to_string(v) + ") has no integer value in range");
    }
    out[i] = static_cast<Out>(v);
  }
  return out;
}

}  // namespace

std::int64_t NpyArray::size() const {
  std::int64_t n = 1;
  for (auto s : shape) {
    if (s < 0) throw Error(ErrorKind::InvalidArgument, "npy array: negative dimension " + std::to_string(s));
    if (s != 0 && n > std::numeric_limits<std::int64_t>::max() / s)
      throw Error(ErrorKind::InvalidArgument, "npy array: the element count of its shape overflows int64");
    n *= s;
  }
  return n;
}
std::vector<float> NpyArray::as_float() const {
  return convert<float>(*this);
}
std::vector<double> NpyArray::as_double() const {
  return convert<double>(*this);
}
std::vector<std::int64_t> NpyArray::as_int64() const {
  return convert<std::int64_t>(*this);
}

NpyArray NpyArray::from_bytes(std::string dtype, const void* p, std::size_t bytes, std::vector<std::int64_t> shape) {
  NpyArray a;
  a.dtype = std::move(dtype);
  a.shape = std::move(shape);
  a.data.resize(bytes);
  if (bytes) std::memcpy(a.data.data(), p, bytes);
  return a;
}
NpyArray NpyArray::from_float(const std::vector<float>& v, std::vector<std::int64_t> shape) {
  return from_bytes("f4", v.data(), v.size() * sizeof(float), std::move(shape));
}
NpyArray NpyArray::from_int64(const std::vector<std::int64_t>& v, std::vector<std::int64_t> shape) {
  return from_bytes("i8", v.data(), v.size() * sizeof(std::int64_t), std::move(shape));
}

namespace {

// The .npy header (format 1.0) of an array: magic, version, length, the dict padded so the data starts on 64 bytes.
std::string npy_header(const std::string& dtype, const std::vector<std::int64_t>& dims) {
  std::string shape = "(";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    shape += std::to_string(dims[i]);
    if (dims.size() == 1 || i + 1 < dims.size()) shape += ",";
    if (i + 1 < dims.size()) shape += " ";
  }
  shape += ")";
  const char order = item_size(dtype) == 1 ? '|' : '<';
  std::string header =
      "{'descr': '" + std::string(1, order) + dtype + "', 'fortran_order': False, 'shape': " + shape + ", }";
  const std::size_t pre = 10;  // magic(6) + version(2) + header length(2)
  std::size_t total = pre + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::string out = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0};
  out.push_back(static_cast<char>(header.size() & 0xFF));
  out.push_back(static_cast<char>(header.size() >> 8));
  return out + header;
}

void put16(std::string& b, std::uint32_t v) {
  b.push_back(static_cast<char>(v & 0xFF));
  b.push_back(static_cast<char>((v >> 8) & 0xFF));
}
void put32(std::string& b, std::uint32_t v) {
  put16(b, v & 0xFFFFu);
  put16(b, v >> 16);
}
void set32(std::string& b, std::size_t at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + static_cast<std::size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

}  // namespace

std::vector<std::uint8_t> npy_bytes(const NpyArray& a) {
  const std::string header = npy_header(a.dtype, a.shape);
  std::vector<std::uint8_t> out(header.begin(), header.end());
  out.insert(out.end(), a.data.begin(), a.data.end());
  return out;
}

std::size_t NpzWriter::begin(const std::string& name, const std::string& dtype, const std::vector<std::int64_t>& shape,
                             std::size_t bytes) {
  const std::string fname = name + ".npy";
  const std::string npy = npy_header(dtype, shape);
  if (out_.size() + 30 + fname.size() + npy.size() + bytes > std::numeric_limits<std::uint32_t>::max())
    throw Error(ErrorKind::TooLarge, "npz: member " + fname + " of " + std::to_string(bytes) +
                                         " bytes ends past 4 GiB (the writer has no zip64)");
  header_ = out_.size();
  // local file header (stored, no compression); the CRC is set by end()
  put32(out_, 0x04034b50u);
  put16(out_, 20);
  put16(out_, 0);
  put16(out_, 0);
  put16(out_, 0);
  put16(out_, 0x21);
  put32(out_, 0);
  const auto sz = static_cast<std::uint32_t>(npy.size() + bytes);
  put32(out_, sz);
  put32(out_, sz);
  put16(out_, static_cast<std::uint32_t>(fname.size()));
  put16(out_, 0);
  out_ += fname;
  members_.push_back({fname, 0, sz, static_cast<std::uint32_t>(header_)});
  npy_ = out_.size();
  out_ += npy;
  const std::size_t data = out_.size();
  out_.resize(data + bytes);
  return data;
}

void NpzWriter::end() {
  Member& m = members_.back();
  m.crc = static_cast<std::uint32_t>(
      crc32(0L, reinterpret_cast<const Bytef*>(out_.data() + npy_), static_cast<uInt>(out_.size() - npy_)));
  set32(out_, header_ + 14, m.crc);
}

void NpzWriter::finish() {
  const auto cd_offset = static_cast<std::uint32_t>(out_.size());
  for (const Member& m : members_) {
    put32(out_, 0x02014b50u);
    put16(out_, 20);
    put16(out_, 20);
    put16(out_, 0);
    put16(out_, 0);
    put16(out_, 0);
    put16(out_, 0x21);
    put32(out_, m.crc);
    put32(out_, m.size);
    put32(out_, m.size);
    put16(out_, static_cast<std::uint32_t>(m.fname.size()));
    put16(out_, 0);
    put16(out_, 0);
    put16(out_, 0);
    put16(out_, 0);
    put32(out_, 0);
    put32(out_, m.offset);
    out_ += m.fname;
  }
  const auto cd_size = static_cast<std::uint32_t>(out_.size() - cd_offset);
  put32(out_, 0x06054b50u);
  put16(out_, 0);
  put16(out_, 0);
  put16(out_, static_cast<std::uint32_t>(members_.size()));
  put16(out_, static_cast<std::uint32_t>(members_.size()));
  put32(out_, cd_size);
  put32(out_, cd_offset);
  put16(out_, 0);
}

std::vector<std::uint8_t> npz_bytes(const std::map<std::string, NpyArray>& arrays) {
  std::string out;
  NpzWriter w(out);
  for (const auto& member : arrays) {
    const NpyArray& arr = member.second;  // (not a structured binding: clang 14 cannot capture those)
    w.add(member.first, arr.dtype, arr.shape, arr.data.size(), [&arr](std::uint8_t* dst) {
      if (!arr.data.empty()) std::memcpy(dst, arr.data.data(), arr.data.size());
    });
  }
  w.finish();
  return {out.begin(), out.end()};
}

NpyArray parse_npy(const std::uint8_t* p, std::size_t n, const std::string& source) {
  // Every size below comes from the file: each one is checked against the bytes that are there before it is used,
  // with arithmetic that cannot wrap (sizes are compared by subtraction from n).
  if (n < 10 || std::memcmp(p, "\x93NUMPY", 6) != 0) bad(source, "missing \\x93NUMPY magic");
  const int major = p[6];
  std::size_t hlen = 0, pre = 0;
  if (major == 1) {
    hlen = rd<std::uint16_t>(p + 8);
    pre = 10;
  } else if (major == 2 || major == 3) {
    if (n < 12) bad(source, "short header");
    hlen = rd<std::uint32_t>(p + 8);
    pre = 12;
  } else {
    bad(source, "format version " + std::to_string(major) + " is not 1, 2 or 3");
  }
  if (hlen > n - pre)
    bad(source, "header of " + std::to_string(hlen) + " bytes runs past the end (" + std::to_string(n) + " bytes)");
  const std::string h(reinterpret_cast<const char*>(p + pre), hlen);
  NpyArray a;
  // The header is a Python dict literal: {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
  const auto dpos = h.find("'descr'");
  const auto colon = dpos == std::string::npos ? dpos : h.find(':', dpos);
  const auto q1 = colon == std::string::npos ? colon : h.find('\'', colon);
  const auto q2 = q1 == std::string::npos ? q1 : h.find('\'', q1 + 1);
  if (q2 == std::string::npos) bad(source, "no 'descr' string in the header");
  std::string descr = h.substr(q1 + 1, q2 - q1 - 1);
  if (!descr.empty() && (descr[0] == '<' || descr[0] == '|' || descr[0] == '=')) descr = descr.substr(1);
  if (!descr.empty() && descr[0] == '>') bad(source, "big-endian arrays are not supported");
  if (descr == "?") descr = "b1";
  const std::size_t item = item_size(descr);
  if (item == 0) bad(source, "unsupported dtype '" + descr + "'");
  a.dtype = descr;
  if (h.find("'fortran_order': True") != std::string::npos) bad(source, "fortran order is not supported");
  const auto shape_key = h.find("'shape'");
  const auto spos = shape_key == std::string::npos ? shape_key : h.find('(', shape_key);
  const auto send = spos == std::string::npos ? spos : h.find(')', spos);
  if (send == std::string::npos) bad(source, "no 'shape' tuple in the header");
  const std::string dims = h.substr(spos + 1, send - spos - 1);
  std::size_t i = 0;
  while (i < dims.size()) {
    while (i < dims.size() && (dims[i] == ' ' || dims[i] == ',')) ++i;
    if (i >= dims.size()) break;
    std::size_t j = i;
    std::uint64_t d = 0;
    for (; j < dims.size() && dims[j] >= '0' && dims[j] <= '9'; ++j) {
      const auto digit = static_cast<std::uint64_t>(dims[j] - '0');
      if (d > (static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) - digit) / 10)
        bad(source, "dimension " + dims.substr(i, j + 1 - i) + "... is larger than int64");
      d = d * 10 + digit;
    }
    if (j == i) bad(source, "bad shape (" + dims + ")");
    if (a.shape.size() == kNpyMaxDims) bad(source, "more than " + std::to_string(kNpyMaxDims) + " dimensions");
    a.shape.push_back(static_cast<std::int64_t>(d));
    i = j;
  }
  // The data must hold product(shape) * item bytes: each dimension is checked against the bytes left, so neither the
  // product nor the byte count can overflow, and nothing is allocated beyond the file's own bytes.
  const std::size_t avail = n - pre - hlen;
  std::size_t bytes = 0;
  if (std::find(a.shape.begin(), a.shape.end(), 0) == a.shape.end()) {
    std::size_t elems = 1;
    for (const std::int64_t d : a.shape) {
      if (static_cast<std::uint64_t>(d) > avail / item / elems)
        bad(source, "shape (" + dims + ") of dtype " + descr + " needs more than the " + std::to_string(avail) +
                        " data bytes in the file");
      elems *= static_cast<std::size_t>(d);
    }
    // A 0-d array (shape ()) holds one element: the loop above checked nothing for it (found by fuzz/fuzz_npz.cpp).
    if (elems > avail / item)
      bad(source, "shape (" + dims + ") of dtype " + descr + " needs more than the " + std::to_string(avail) +
                      " data bytes in the file");
    bytes = elems * item;
  }
  a.data.assign(p + pre + hlen, p + pre + hlen + bytes);
  return a;
}

std::map<std::string, NpyArray> parse_npz(const std::vector<std::uint8_t>& z, const std::string& source) {
  // The central directory (util/zip.hpp: authoritative sizes, zip64 aware, every range checked against the file),
  // then npz's own bounds on each member, all before anything is allocated.
  std::vector<ZipEntry> members;
  try {
    members = zip_entries(z.data(), z.size());
  } catch (const ZipError& e) {
    bad(source, e.what());
  }
  for (const ZipEntry& m : members) {
    const std::string& name = m.name;
    const std::uint64_t csize = m.csize, usize = m.usize;
    // zlib counts in uInt (32 bits); numpy writes members that large only for arrays over 4 GiB.
    if (csize > kNpzMaxMemberBytes || usize > kNpzMaxMemberBytes)
      bad(source, "member " + name + " of " + std::to_string(std::max(csize, usize)) + " bytes is over the limit of " +
                      std::to_string(kNpzMaxMemberBytes) + " bytes");
    if (m.method == 0 && usize != csize)
      bad(source, "stored member " + name + " has sizes " + std::to_string(csize) + " and " + std::to_string(usize));
    // Deflate expands at most 1032:1: a larger uncompressed size is a lie, refused before allocating it.
    if (m.method == 8 && usize / kDeflateMaxRatio > csize)
      bad(source, "member " + name + ": " + std::to_string(csize) + " compressed bytes cannot inflate to " +
                      std::to_string(usize));
    if (m.method != 0 && m.method != 8)
      bad(source, "member " + name + " uses unsupported compression " + std::to_string(m.method));
  }
  // The members of a zip file hold disjoint bytes. Entries that share one member's data would each pass the ratio
  // check above and together ask for any amount of memory (an 82 KB file with one deflated member and many entries
  // pointing at it asked for 19 GB): with disjoint data, the sum of the compressed sizes is at most the file's and
  // the total to allocate at most 1032 times the file.
  std::vector<const ZipEntry*> by_offset;
  for (const ZipEntry& m : members) by_offset.push_back(&m);
  std::sort(by_offset.begin(), by_offset.end(), [](const ZipEntry* a, const ZipEntry* b) { return a->data < b->data; });
  for (std::size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i]->data < by_offset[i - 1]->data + by_offset[i - 1]->csize ||
        (by_offset[i - 1]->csize == 0 && by_offset[i]->data == by_offset[i - 1]->data))
      bad(source, "members " + by_offset[i - 1]->name + " and " + by_offset[i]->name +
                      " share their data (a zip file's members are disjoint)");

  // Pass 2: read each member. The totals are bounded (above), but a machine may still lack the memory for a real
  // file: that is an Error too, not a std::bad_alloc out of the parser.
  std::map<std::string, NpyArray> out;
  std::uint64_t total = 0;
  for (const ZipEntry& m : members) total += m.usize;
  const ZipEntry* current = nullptr;
  try {
    for (const ZipEntry& m : members) {
      current = &m;
      const std::string& name = m.name;
      std::vector<std::uint8_t> body;
      const std::uint8_t* in = z.data() + static_cast<std::size_t>(m.data);
      if (m.method == 0) {
        body.assign(in, in + m.csize);
      } else {
        body.resize(static_cast<std::size_t>(m.usize));
        z_stream s{};
        if (inflateInit2(&s, -MAX_WBITS) != Z_OK) bad(source, "inflate init");
        s.next_in = const_cast<Bytef*>(in);
        s.avail_in = static_cast<uInt>(m.csize);
        s.next_out = body.data();
        s.avail_out = static_cast<uInt>(body.size());
        const int rc = inflate(&s, Z_FINISH);
        const uLong produced = s.total_out;
        inflateEnd(&s);
        if (rc != Z_STREAM_END)
          bad(source, "member " + name + " does not inflate to its " + std::to_string(m.usize) + " bytes");
        if (produced != m.usize)
          bad(source,
              "member " + name + " inflates to " + std::to_string(produced) + " bytes, not " + std::to_string(m.usize));
      }
      const auto got = static_cast<std::uint32_t>(crc32(0L, body.data(), static_cast<uInt>(body.size())));
      if (got != m.crc) bad(source, "member " + name + ": CRC-32 mismatch (corrupt data)");
      std::string key = name;
      if (key.size() > 4 && key.compare(key.size() - 4, 4, ".npy") == 0) key.resize(key.size() - 4);
      out[key] = parse_npy(body.data(), body.size(), source + ":" + name);
    }
  } catch (const std::bad_alloc&) {
    throw Error(ErrorKind::TooLarge, source + ": not enough memory for its " + std::to_string(total) +
                                         " bytes of arrays (member " + current->name + ")");
  }
  return out;
}

std::map<std::string, NpyArray> load_npz(const std::string& path) {
  return parse_npz(read_file(path, kNpzMaxFileBytes), path);
}

}  // namespace superpoint_rt::util
