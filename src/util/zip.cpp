#include "util/zip.hpp"

#include <algorithm>
#include <cstring>

namespace superpoint_rt::util {
namespace {

template <class T>
T rd(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);  // little-endian, as zip stores numbers (x86-64 reads them as they are)
  return v;
}

[[noreturn]] void fail(const std::string& what) {
  throw ZipError(what);
}

}  // namespace

std::vector<ZipEntry> zip_entries(const std::uint8_t* z, std::size_t size) {
  // `fits(off, len)`: [off, off + len) lies in the archive, without wrapping (every offset and size is a file field).
  auto fits = [size](std::uint64_t off, std::uint64_t len) { return off <= size && len <= size - off; };
  if (size < 22) fail("too short for a zip archive (" + std::to_string(size) + " bytes)");
  // The end record is the last 22 bytes, or fewer than 64 KiB earlier when it carries a comment.
  std::size_t eocd = std::string::npos;
  for (std::size_t i = size - 22 + 1; i-- > 0;) {
    if (rd<std::uint32_t>(z + i) == 0x06054b50u) {
      eocd = i;
      break;
    }
    if (size - i > 22 + 65535) break;
  }
  if (eocd == std::string::npos) fail("no zip end-of-central-directory record");
  std::uint64_t entries = rd<std::uint16_t>(z + eocd + 10);
  std::uint64_t cd = rd<std::uint32_t>(z + eocd + 16);
  if (cd == 0xFFFFFFFFu || entries == 0xFFFFu) {  // zip64 end of central directory, through its locator
    if (eocd < 20 || rd<std::uint32_t>(z + eocd - 20) != 0x07064b50u) fail("missing zip64 locator");
    const std::uint64_t z64 = rd<std::uint64_t>(z + eocd - 20 + 8);
    if (!fits(z64, 56) || rd<std::uint32_t>(z + z64) != 0x06064b50u) fail("bad zip64 record");
    entries = rd<std::uint64_t>(z + z64 + 32);
    cd = rd<std::uint64_t>(z + z64 + 48);
  }
  if (entries > size / 46) fail(std::to_string(entries) + " zip entries cannot fit " + std::to_string(size) + " bytes");
  std::vector<ZipEntry> out;
  out.reserve(static_cast<std::size_t>(entries));
  std::uint64_t p = cd;
  for (std::uint64_t e = 0; e < entries; ++e) {
    if (!fits(p, 46) || rd<std::uint32_t>(z + p) != 0x02014b50u)
      fail("bad central directory entry " + std::to_string(e) + " at offset " + std::to_string(p));
    ZipEntry m;
    m.method = rd<std::uint16_t>(z + p + 10);
    m.crc = rd<std::uint32_t>(z + p + 16);
    std::uint64_t csize = rd<std::uint32_t>(z + p + 20), usize = rd<std::uint32_t>(z + p + 24);
    const std::uint16_t nlen = rd<std::uint16_t>(z + p + 28), xlen = rd<std::uint16_t>(z + p + 30),
                        clen = rd<std::uint16_t>(z + p + 32);
    std::uint64_t loff = rd<std::uint32_t>(z + p + 42);
    if (!fits(p + 46, std::uint64_t{nlen} + xlen + clen)) fail("central entry past the end");
    m.name.assign(reinterpret_cast<const char*>(z + p + 46), nlen);
    const std::uint64_t xend = p + 46 + nlen + xlen;
    for (std::uint64_t x = p + 46 + nlen; x + 4 <= xend;) {
      const std::uint16_t id = rd<std::uint16_t>(z + x), len = rd<std::uint16_t>(z + x + 2);
      const std::uint64_t fend = std::min<std::uint64_t>(x + 4 + len, xend);  // a field cut by the extra's end
      if (id == 1) {  // zip64: the 0xFFFFFFFF fields, in the order usize, csize, offset
        std::uint64_t q = x + 4;
        for (std::uint64_t* f : {&usize, &csize, &loff})
          if (*f == 0xFFFFFFFFu && q + 8 <= fend) {
            *f = rd<std::uint64_t>(z + q);
            q += 8;
          }
      }
      x += 4u + len;
    }
    p = xend + clen;
    if (!fits(loff, 30) || rd<std::uint32_t>(z + loff) != 0x04034b50u)
      fail("member " + m.name + ": bad local header at offset " + std::to_string(loff));
    m.data = loff + 30 + rd<std::uint16_t>(z + loff + 26) + rd<std::uint16_t>(z + loff + 28);
    if (!fits(m.data, csize))
      fail("member " + m.name + ": " + std::to_string(csize) + " bytes at offset " + std::to_string(m.data) +
           " run past the end (" + std::to_string(size) + " bytes)");
    m.csize = csize;
    m.usize = usize;
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace superpoint_rt::util
