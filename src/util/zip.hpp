// The central directory of a zip archive, read from bytes in memory: the one walk behind numpy's .npz
// (util/npz.cpp) and torch.save's .pth (model/pth.cpp). It reads what the PKWARE APPNOTE (4.3.16 end of central
// directory, 4.3.14/4.3.15 zip64, 4.3.12 central header, 4.3.7 local header) puts there and checks every offset and
// size against the bytes before it is used; what a member holds, and which compression methods are allowed, is the
// caller's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace superpoint_rt::util {

// A malformed archive. The message names the record (and the member, where there is one); callers prefix their
// file's name and kind (an npz's DecodeError, a state dict's Model error).
struct ZipError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct ZipEntry {
  std::string name;
  std::uint16_t method = 0;  // 0 stored, 8 deflated (the caller decides what it accepts)
  std::uint32_t crc = 0;     // CRC-32 of the uncompressed bytes, as the central directory states it
  std::uint64_t data = 0;    // offset of the member's (compressed) bytes in the archive, after its local header
  std::uint64_t csize = 0;   // compressed size; [data, data + csize) lies inside the archive
  std::uint64_t usize = 0;   // uncompressed size, as stated (not checked against anything: the caller's bound)
};

// Every entry in directory order. Throws ZipError when a record is missing or runs past the end, or when the
// directory states more entries than could fit in the archive (checked before the loop: each takes 46 bytes).
// Zip64 sizes and offsets (archives over 4 GiB) are taken from the zip64 records and extra fields.
std::vector<ZipEntry> zip_entries(const std::uint8_t* z, std::size_t size);

}  // namespace superpoint_rt::util
