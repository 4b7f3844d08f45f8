// The .pth reader (src/model/pth.hpp) on files made here byte by byte: a state dict as torch.save writes it (zip of
// data.pkl + storages), views with strides and offsets, float16 / bfloat16 storages; and every refusal names what it
// refused: other globals and opcodes, extents past a storage, compressed members, corrupt data.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>
#include <string>
#include <vector>

#include "model/pth.hpp"
#include "superpoint_rt/errors.hpp"

using superpoint_rt::Error;
namespace model = superpoint_rt::model;

namespace {

void put16(std::string& b, unsigned v) {
  b += static_cast<char>(v & 0xff);
  b += static_cast<char>((v >> 8) & 0xff);
}
void put32(std::string& b, unsigned v) {
  put16(b, v & 0xffff);
  put16(b, v >> 16);
}

// A zip archive of stored members (what torch.save writes), with correct CRCs unless `bad_crc`.
std::vector<std::uint8_t> zip(const std::vector<std::pair<std::string, std::string>>& members, bool bad_crc = false,
                              unsigned method = 0) {
  std::string out, cd;
  for (const auto& [name, data] : members) {
    const unsigned crc =
        static_cast<unsigned>(crc32(0, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size()))) ^
        (bad_crc ? 1u : 0u);
    const auto off = static_cast<unsigned>(out.size());
    std::string h;
    put32(h, 0x04034b50);
    put16(h, 20), put16(h, 0), put16(h, method), put16(h, 0), put16(h, 0);
    put32(h, crc), put32(h, static_cast<unsigned>(data.size())), put32(h, static_cast<unsigned>(data.size()));
    put16(h, static_cast<unsigned>(name.size())), put16(h, 0);
    out += h + name + data;
    put32(cd, 0x02014b50);
    put16(cd, 20), put16(cd, 20), put16(cd, 0), put16(cd, method), put16(cd, 0), put16(cd, 0);
    put32(cd, crc), put32(cd, static_cast<unsigned>(data.size())), put32(cd, static_cast<unsigned>(data.size()));
    put16(cd, static_cast<unsigned>(name.size())), put16(cd, 0), put16(cd, 0), put16(cd, 0), put16(cd, 0);
    put32(cd, 0), put32(cd, off);
    cd += name;
  }
  const auto cd_off = static_cast<unsigned>(out.size());
  out += cd;
  put32(out, 0x06054b50);
  put16(out, 0), put16(out, 0), put16(out, static_cast<unsigned>(members.size())),
      put16(out, static_cast<unsigned>(members.size()));
  put32(out, static_cast<unsigned>(cd.size())), put32(out, cd_off), put16(out, 0);
  return {out.begin(), out.end()};
}

std::string str(const std::string& s) {  // BINUNICODE
  std::string b = "X";
  put32(b, static_cast<unsigned>(s.size()));
  return b + s;
}

// The pickle of one _rebuild_tensor_v2 call, as torch.save (protocol 2) writes it.
std::string tensor(const std::string& storage_type, const std::string& key, unsigned numel, unsigned offset,
                   const std::vector<unsigned>& shape, const std::vector<unsigned>& stride) {
  std::string b = std::string("ctorch._utils\n_rebuild_tensor_v2\n((") + str("storage") + "ctorch\n" + storage_type +
                  "\n" + str(key) + str("cpu") + "J";
  put32(b, numel);
  b += "tQJ";
  put32(b, offset);
  b += "(";
  for (unsigned d : shape) b += "J", put32(b, d);
  b += "t(";
  for (unsigned d : stride) b += "J", put32(b, d);
  b += "t\x89";
  b += "ccollections\nOrderedDict\n)RtR";
  return b;
}

std::string floats(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

std::string message_of(const std::vector<std::uint8_t>& bytes) {
  try {
    model::parse_pth(bytes, "t.pth");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), superpoint_rt::ErrorKind::Model);
    return e.what();
  }
  ADD_FAILURE() << "accepted";
  return "";
}

}  // namespace

TEST(Pth, ReadsAStateDictWithViewsAndHalfStorages) {
  const std::string pkl = std::string("\x80\x02") + "ccollections\nOrderedDict\nq" + std::string(1, '\0') + ")Rq\x01(" +
                          str("w") + tensor("FloatStorage", "0", 12, 1, {2, 3}, {4, 1}) + str("h") +
                          tensor("HalfStorage", "1", 2, 0, {2}, {1}) + str("bf") +
                          tensor("BFloat16Storage", "2", 1, 0, {}, {}) + "u}bq\x02.";
  std::vector<float> s0(12);
  for (int i = 0; i < 12; ++i) s0[static_cast<std::size_t>(i)] = static_cast<float>(i);
  const std::string half("\x00\x3c\x00\xc0", 4);  // 1.0, -2.0
  const std::string bf("\x80\x3f", 2);            // 1.0
  const auto t = model::parse_pth(zip({{"m/data.pkl", pkl},
                                       {"m/byteorder", "little"},
                                       {"m/data/0", floats(s0)},
                                       {"m/data/1", half},
                                       {"m/data/2", bf}}),
                                  "t.pth");
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t.at("w").shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(t.at("w").data, (std::vector<float>{1, 2, 3, 5, 6, 7}));  // offset 1, row stride 4
  EXPECT_EQ(t.at("h").data, (std::vector<float>{1.0f, -2.0f}));
  EXPECT_EQ(t.at("bf").data, (std::vector<float>{1.0f}));
  EXPECT_TRUE(t.at("bf").shape.empty());
}

TEST(Pth, RefusesWhatTorchSaveOfAStateDictDoesNotWrite) {
  auto one = [](const std::string& body, const std::string& storage = std::string(48, '\0')) {
    return zip({{"a/data.pkl", std::string("\x80\x02") + body}, {"a/data/0", storage}});
  };
  EXPECT_NE(message_of(one(std::string("cos\nsystem\n") + str("true") + "\x85R.")).find("global os.system"),
            std::string::npos);
  EXPECT_NE(message_of(one("]q\x00.")).find("opcode 0x5d"), std::string::npos);
  EXPECT_NE(message_of(one(std::string("}") + str("w") + tensor("FloatStorage", "0", 12, 6, {2, 4}, {4, 1}) + "s."))
                .find("reaches past its storage of 12 elements"),
            std::string::npos);
  EXPECT_NE(message_of(one(std::string("}") + str("w") + tensor("FloatStorage", "0", 100, 0, {10}, {1}) + "s."))
                .find("storage of 100"),
            std::string::npos);
  EXPECT_NE(message_of(one(std::string("}") + str("w") + "K\x01s.")).find("entry 'w' is not a tensor"),
            std::string::npos);
  EXPECT_NE(message_of(one(std::string("}") + str("w") + tensor("FloatStorage", "7", 1, 0, {1}, {1}) + "s."))
                .find("a/data/7"),
            std::string::npos);
  EXPECT_NE(message_of(one(std::string("}") + str("w"))).find("truncated"), std::string::npos);
  EXPECT_NE(message_of(zip({{"a/data.pkl", "\x80\x02}."}}, true)).find("CRC-32"), std::string::npos);
  EXPECT_NE(message_of(zip({{"a/data.pkl", "\x80\x02}."}}, false, 8)).find("compressed"), std::string::npos);
  EXPECT_NE(message_of({'P', 'K'}).find("zip"), std::string::npos);
  // A memo reference never set, and a stack that does not end with one object.
  EXPECT_NE(message_of(one("h\x05.")).find("never set"), std::string::npos);
  EXPECT_NE(message_of(one("}}.")).find("one object"), std::string::npos);
  // An empty dict is a state dict with nothing in it.
  EXPECT_TRUE(model::parse_pth(zip({{"a/data.pkl", "\x80\x02}."}}), "t.pth").empty());
}
