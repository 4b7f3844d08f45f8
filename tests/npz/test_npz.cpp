// The .npy / .npz reader (util/npz.hpp, used by the golden, post and resize tests and the benchmarks) on corrupt
// input: every size field of the file is checked against the bytes that are there, without wrapping, before it is
// used or allocated, and a bad file is an Error(DecodeError) naming the file and the field, never a crash, a read
// past the buffer, std::length_error / bad_alloc, or a huge allocation (issue 14 §2). The ASan+UBSan build runs the
// same cases.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "superpoint_rt/errors.hpp"
#include "util/npz.hpp"

using namespace superpoint_rt;
using util::NpyArray;

namespace {

using Bytes = std::vector<std::uint8_t>;

// The message of the DecodeError `fn` throws; fails the test on any other outcome.
std::string decode_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::DecodeError) << e.what();
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a superpoint_rt::Error: " << e.what();
    return "";
  }
  ADD_FAILURE() << "no error";
  return "";
}

void expect_npy_error(const std::string& header, const Bytes& data, const std::string& words) {
  // A version 1.0 .npy with this header text, padded like numpy's (ends in '\n').
  Bytes b = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  const std::string h = header + "\n";
  b.push_back(static_cast<std::uint8_t>(h.size() & 0xFF));
  b.push_back(static_cast<std::uint8_t>(h.size() >> 8));
  b.insert(b.end(), h.begin(), h.end());
  b.insert(b.end(), data.begin(), data.end());
  const std::string msg = decode_error([&] { util::parse_npy(b.data(), b.size(), "t.npy"); });
  EXPECT_NE(msg.find("t.npy"), std::string::npos) << msg;
  EXPECT_NE(msg.find(words), std::string::npos) << "'" << words << "' not in: " << msg;
}

void put16(Bytes& b, std::size_t at, std::uint16_t v) {
  std::memcpy(&b[at], &v, 2);
}
void put32(Bytes& b, std::size_t at, std::uint32_t v) {
  std::memcpy(&b[at], &v, 4);
}
void put64(Bytes& b, std::size_t at, std::uint64_t v) {
  std::memcpy(&b[at], &v, 8);
}
// Byte by byte: GCC 12 at -O3 reports false -Warray-bounds / -Wstringop-overflow for vector::insert of these ranges.
void append(Bytes& b, const Bytes& src, std::size_t from, std::size_t to) {
  for (std::size_t i = from; i < to; ++i) b.push_back(src[i]);
}
std::uint32_t get32(const Bytes& b, std::size_t at) {
  std::uint32_t v;
  std::memcpy(&v, &b[at], 4);
  return v;
}

// A one-member npz as npz_bytes writes it, and the offsets of its records (stored member "a.npy").
struct Zip {
  Bytes bytes;
  std::size_t central = 0;  // the central directory entry
  std::size_t eocd = 0;     // the end-of-central-directory record
};

Zip one_member() {
  Zip z;
  z.bytes = util::npz_bytes({{"a", NpyArray::from_float({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3})}});
  z.eocd = z.bytes.size() - 22;
  z.central = get32(z.bytes, z.eocd + 16);
  return z;
}

std::string npz_error(const Bytes& b) {
  const std::string msg = decode_error([&] { util::parse_npz(b, "t.npz"); });
  EXPECT_NE(msg.find("t.npz"), std::string::npos) << msg;
  return msg;
}

}  // namespace

TEST(Npz, RoundTripStoredAndDeflated) {
  std::map<std::string, NpyArray> in;
  in["f"] = NpyArray::from_float({1.5f, -2.f, 3.25f, 0.f, 7.f, 8.f}, {3, 2});
  in["i"] = NpyArray::from_int64({-5, 1LL << 40}, {2});
  in["e"] = NpyArray::from_float({}, {0, 256});
  const auto out = util::parse_npz(util::npz_bytes(in), "rt.npz");
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out.at("f").shape, (std::vector<std::int64_t>{3, 2}));
  EXPECT_EQ(out.at("f").as_float(), in["f"].as_float());
  EXPECT_EQ(out.at("i").as_int64(), (std::vector<std::int64_t>{-5, 1LL << 40}));
  EXPECT_EQ(out.at("e").size(), 0);
  EXPECT_EQ(out.at("e").shape, (std::vector<std::int64_t>{0, 256}));

  // The same member deflated (np.savez_compressed): method 8, the central sizes and CRC of the raw stream.
  Zip z = one_member();
  const Bytes npy = util::npy_bytes(NpyArray::from_float({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3}));
  Bytes deflated(compressBound(static_cast<uLong>(npy.size())) + 64);
  z_stream s{};
  ASSERT_EQ(deflateInit2(&s, 9, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  s.next_in = const_cast<Bytef*>(npy.data());
  s.avail_in = static_cast<uInt>(npy.size());
  s.next_out = deflated.data();
  s.avail_out = static_cast<uInt>(deflated.size());
  ASSERT_EQ(deflate(&s, Z_FINISH), Z_STREAM_END);
  deflated.resize(s.total_out);
  deflateEnd(&s);
  const std::size_t name_len = 5;  // "a.npy"
  Bytes zb;
  append(zb, z.bytes, 0, 30 + name_len);
  put16(zb, 8, 8);
  put32(zb, 18, static_cast<std::uint32_t>(deflated.size()));
  append(zb, deflated, 0, deflated.size());
  const std::size_t cd = zb.size();
  append(zb, z.bytes, z.central, z.bytes.size());
  put16(zb, cd + 10, 8);
  put32(zb, cd + 20, static_cast<std::uint32_t>(deflated.size()));
  const std::size_t eocd = zb.size() - 22;
  put32(zb, eocd + 16, static_cast<std::uint32_t>(cd));
  const auto d = util::parse_npz(zb, "deflated.npz");
  EXPECT_EQ(d.at("a").as_float(), (std::vector<float>{1.f, 2.f, 3.f, 4.f, 5.f, 6.f}));

  // A deflated member whose central directory claims 1 GiB more than 1032x its compressed size is refused before
  // anything is allocated (under ASan a 2^40-byte allocation would abort the test).
  Bytes lie = zb;
  put32(lie, cd + 24, 0xFFFFFFFEu);
  EXPECT_NE(npz_error(lie).find("cannot inflate"), std::string::npos);
  // The inflated bytes must be as many as the central directory says.
  Bytes short_claim = zb;
  put32(short_claim, cd + 24, static_cast<std::uint32_t>(npy.size() + 1));
  EXPECT_NE(npz_error(short_claim).find("inflate"), std::string::npos);
}

TEST(Npz, CorruptNpyHeadersAreErrorsNamingTheField) {
  const Bytes eight(8, 0);
  // Sizes: a shape whose byte count exceeds the data, overflows size_t, or int64.
  expect_npy_error("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", eight, "needs more than the 8");
  expect_npy_error("{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904, 4), }", eight,
                   "needs more than");
  expect_npy_error("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 2), }", eight,
                   "needs more than");
  expect_npy_error("{'descr': '<u1', 'fortran_order': False, 'shape': (99999999999999999999,), }", eight,
                   "larger than int64");
  expect_npy_error("{'descr': '<u1', 'fortran_order': False, 'shape': (-1,), }", eight, "bad shape");
  // Structure: missing or unterminated fields, unsupported dtypes, too many dimensions.
  expect_npy_error("{'fortran_order': False, 'shape': (2,), }", eight, "no 'descr'");
  expect_npy_error("{'descr': '<f4', 'fortran_order': False, }", eight, "no 'shape'");
  expect_npy_error("{'descr': '<f4', 'fortran_order': False, 'shape': (2, ", eight, "no 'shape'");
  expect_npy_error("{'descr': '<f4", eight, "no 'descr'");
  expect_npy_error("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", eight, "unsupported dtype 'c8'");
  expect_npy_error("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", eight, "big-endian");
  std::string many = "{'descr': '<u1', 'fortran_order': False, 'shape': (";
  for (int i = 0; i < 65; ++i) many += "1, ";
  expect_npy_error(many + "), }", eight, "more than 64 dimensions");

  // The header length field: past the end, version 2's 32-bit length, an unknown version.
  Bytes b = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0xFF, 0xFF, '{', '}'};
  EXPECT_NE(decode_error([&] { util::parse_npy(b.data(), b.size(), "h.npy"); }).find("runs past the end"),
            std::string::npos);
  b = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, 0xFF, 0xFF, 0xFF, 0xFF, '{', '}'};
  EXPECT_NE(decode_error([&] { util::parse_npy(b.data(), b.size(), "h.npy"); }).find("runs past the end"),
            std::string::npos);
  b = {0x93, 'N', 'U', 'M', 'P', 'Y', 9, 0, 2, 0, '{', '}'};
  EXPECT_NE(decode_error([&] { util::parse_npy(b.data(), b.size(), "h.npy"); }).find("version 9"), std::string::npos);
  b = {0x93, 'N', 'U', 'M', 'P'};
  EXPECT_NE(decode_error([&] { util::parse_npy(b.data(), b.size(), "h.npy"); }).find("magic"), std::string::npos);
}

TEST(Npz, CorruptZipFieldsAreErrorsNamingTheField) {
  const Zip good = one_member();
  ASSERT_EQ(util::parse_npz(good.bytes, "good.npz").at("a").as_float().size(), 6u);

  Bytes b = good.bytes;  // central directory offset past the end
  put32(b, good.eocd + 16, 0xFFFFFFF0u);
  EXPECT_NE(npz_error(b).find("bad central directory"), std::string::npos);

  b = good.bytes;  // local header offset past the end
  put32(b, good.central + 42, 0xFFFFFFF0u);
  EXPECT_NE(npz_error(b).find("bad local header"), std::string::npos);

  b = good.bytes;  // compressed size past the end
  put32(b, good.central + 20, 0x7FFFFFFFu);
  EXPECT_NE(npz_error(b).find("run past the end"), std::string::npos);

  b = good.bytes;  // name length past the end of the file
  put16(b, good.central + 28, 0xFFFF);
  EXPECT_NE(npz_error(b).find("central entry past the end"), std::string::npos);

  b = good.bytes;  // more entries than the directory holds (2 could fit the file's bytes: the walk finds the lie)
  put16(b, good.eocd + 10, 2);
  put16(b, good.eocd + 8, 2);
  EXPECT_NE(npz_error(b).find("bad central directory entry 1"), std::string::npos);

  b = good.bytes;  // more entries than 46-byte central entries could fit: refused before the walk
  put16(b, good.eocd + 10, 0xFFFE);
  put16(b, good.eocd + 8, 0xFFFE);
  EXPECT_NE(npz_error(b).find("65534 zip entries cannot fit"), std::string::npos) << npz_error(b);

  b = good.bytes;  // one flipped data byte
  b[30 + 5 + 80] ^= 0x40;
  EXPECT_NE(npz_error(b).find("CRC-32 mismatch"), std::string::npos);

  b = good.bytes;  // stored member with different sizes
  put32(b, good.central + 24, get32(b, good.central + 20) - 1);
  EXPECT_NE(npz_error(b).find("sizes"), std::string::npos);

  b = good.bytes;
  put16(b, good.central + 10, 12);  // bzip2
  EXPECT_NE(npz_error(b).find("unsupported compression 12"), std::string::npos);

  // zip64: the directory offset 0xFFFFFFFF sends the reader to a zip64 record; a locator pointing near 2^64 must not
  // wrap around to a small offset.
  b = good.bytes;
  put32(b, good.eocd + 16, 0xFFFFFFFFu);
  EXPECT_NE(npz_error(b).find("zip64 locator"), std::string::npos);
  Bytes loc(20, 0);
  put32(loc, 0, 0x07064b50u);
  put64(loc, 8, std::numeric_limits<std::uint64_t>::max() - 10);
  b.insert(b.begin() + static_cast<std::ptrdiff_t>(good.eocd), loc.begin(), loc.end());
  EXPECT_NE(npz_error(b).find("bad zip64 record"), std::string::npos);

  // A zip64 extra field whose local header offset wraps (2^64 - 8 + 30 would be 22).
  b = good.bytes;
  put32(b, good.central + 42, 0xFFFFFFFFu);
  put16(b, good.central + 30, 12);  // extra field length
  Bytes extra(12, 0);
  put16(extra, 0, 1);
  put16(extra, 2, 8);
  put64(extra, 4, std::numeric_limits<std::uint64_t>::max() - 7);
  b.insert(b.begin() + static_cast<std::ptrdiff_t>(good.central + 46 + 5), extra.begin(), extra.end());
  EXPECT_NE(npz_error(b).find("bad local header"), std::string::npos);

  EXPECT_NE(npz_error(Bytes(10, 0)).find("too short"), std::string::npos);
  EXPECT_NE(npz_error(Bytes(100, 0)).find("end-of-central-directory"), std::string::npos);
}

// Issue 19 §4: many central-directory entries pointing at one deflated member each pass the per-member ratio check;
// together they asked for any amount of memory (an 82 KB file for 19 GB, ending in std::bad_alloc). Members of a zip
// file hold disjoint bytes: entries that share a member's data are refused before anything is allocated.
TEST(Npz, EntriesSharingOneMemberAreRefused) {
  // One deflated member: 1 MiB of float zeros (about 1 KB deflated).
  const Bytes npy = util::npy_bytes(NpyArray::from_float(std::vector<float>(1 << 18, 0.f), {1 << 18}));
  Bytes deflated(compressBound(static_cast<uLong>(npy.size())) + 64);
  z_stream s{};
  ASSERT_EQ(deflateInit2(&s, 9, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  s.next_in = const_cast<Bytef*>(npy.data());
  s.avail_in = static_cast<uInt>(npy.size());
  s.next_out = deflated.data();
  s.avail_out = static_cast<uInt>(deflated.size());
  ASSERT_EQ(deflate(&s, Z_FINISH), Z_STREAM_END);
  deflated.resize(s.total_out);
  deflateEnd(&s);
  const auto crc = static_cast<std::uint32_t>(crc32(0L, npy.data(), static_cast<uInt>(npy.size())));
  const Zip z = one_member();  // its records as templates: local header, central entry, end record ("a.npy")
  auto build = [&](int entries) {
    Bytes b;
    append(b, z.bytes, 0, 30 + 5);
    put16(b, 8, 8);
    put32(b, 14, crc);
    put32(b, 18, static_cast<std::uint32_t>(deflated.size()));
    put32(b, 22, static_cast<std::uint32_t>(npy.size()));
    append(b, deflated, 0, deflated.size());
    const std::size_t cd = b.size();
    for (int e = 0; e < entries; ++e) {  // each entry names another array, all at the member of offset 0
      const std::size_t at = b.size();
      append(b, z.bytes, z.central, z.central + 46 + 5);
      put16(b, at + 10, 8);
      put32(b, at + 16, crc);
      put32(b, at + 20, static_cast<std::uint32_t>(deflated.size()));
      put32(b, at + 24, static_cast<std::uint32_t>(npy.size()));
      b[at + 46] = static_cast<std::uint8_t>('a' + e);
    }
    const std::size_t eocd = b.size();
    append(b, z.bytes, z.eocd, z.bytes.size());
    put16(b, eocd + 8, static_cast<std::uint16_t>(entries));
    put16(b, eocd + 10, static_cast<std::uint16_t>(entries));
    put32(b, eocd + 12, static_cast<std::uint32_t>(eocd - cd));
    put32(b, eocd + 16, static_cast<std::uint32_t>(cd));
    return b;
  };
  const Bytes one = build(1);
  ASSERT_EQ(util::parse_npz(one, "one.npz").at("a").size(), 1 << 18);  // the member itself is fine
  const Bytes many = build(20);                                        // 20 MiB asked for by a file of about 2 KB
  ASSERT_LT(many.size(), 4096u);
  EXPECT_NE(npz_error(many).find("share their data"), std::string::npos) << npz_error(many);
  // Stored members likewise: two entries for one stored member.
  Zip twice = one_member();
  Bytes b;
  append(b, twice.bytes, 0, twice.eocd);
  append(b, twice.bytes, twice.central, twice.eocd);
  b[b.size() - 5] = 'b';
  const std::size_t eocd = b.size();
  append(b, twice.bytes, twice.eocd, twice.bytes.size());
  put16(b, eocd + 8, 2);
  put16(b, eocd + 10, 2);
  put32(b, eocd + 12, static_cast<std::uint32_t>(eocd - twice.central));
  EXPECT_NE(npz_error(b).find("share their data"), std::string::npos) << npz_error(b);
}

TEST(Npz, ArraysWhoseBytesDoNotMatchTheirShapeAreNotRead) {
  const float v[2] = {1.f, 2.f};
  const NpyArray short_data = NpyArray::from_bytes("f4", v, sizeof v, {3});  // 8 bytes, 3 elements
  EXPECT_THROW(short_data.as_float(), Error);
  EXPECT_THROW(short_data.as_int64(), Error);
  const NpyArray huge_shape = NpyArray::from_bytes("f4", v, sizeof v, {1LL << 62, 1LL << 62});
  EXPECT_THROW((void)huge_shape.size(), Error);
  EXPECT_THROW(huge_shape.as_double(), Error);
  EXPECT_EQ(NpyArray::from_bytes("f4", v, sizeof v, {2}).as_float(), (std::vector<float>{1.f, 2.f}));
}
