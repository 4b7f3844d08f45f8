// torch.save's zip + pickle format, restricted to a state dict of tensors (pth.hpp).
#include "model/pth.hpp"

#include <zlib.h>

#include <bit>
#include <cstring>
#include <memory>
#include <optional>
#include <variant>

#include "superpoint_rt/errors.hpp"
#include "util/file.hpp"
#include "util/half.hpp"
#include "util/zip.hpp"

namespace superpoint_rt::model {
namespace {

[[noreturn]] void bad(const std::string& source, const std::string& what) {
  throw Error(ErrorKind::Model, source + ": not a PyTorch state dict of tensors: " + what);
}

template <class T>
T rd(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);  // little-endian, as zip and pickle store numbers (x86-64 reads them as they are)
  return v;
}

// ---- zip: the central directory of a torch.save archive (stored members) -------------------------------------------

struct Member {
  std::uint64_t data = 0, size = 0;
  std::uint32_t crc = 0;
};

// Every member of the archive by name (util/zip.hpp walks the directory). torch.save stores its members uncompressed
// (method 0); another method is an Error naming the member.
std::map<std::string, Member> zip_members(const std::vector<std::uint8_t>& z, const std::string& source) {
  std::vector<util::ZipEntry> entries;
  try {
    entries = util::zip_entries(z.data(), z.size());
  } catch (const util::ZipError& e) {
    bad(source, std::string(e.what()) + " (torch.save writes a zip archive; a legacy, non-zip file?)");
  }
  std::map<std::string, Member> out;
  for (const util::ZipEntry& e : entries) {
    if (e.method != 0)
      bad(source, "zip member " + e.name + " is compressed (method " + std::to_string(e.method) +
                      "); torch.save stores its members uncompressed");
    if (e.csize != e.usize)
      bad(source,
          "stored zip member " + e.name + " has sizes " + std::to_string(e.csize) + " and " + std::to_string(e.usize));
    out[e.name] = Member{e.data, e.csize, e.crc};
  }
  return out;
}

// ---- the pickle ---------------------------------------------------------------------------------------------------

enum class Global { OrderedDict, RebuildTensor, FloatStorage, HalfStorage, BFloat16Storage };

struct Value;
using ValuePtr = std::shared_ptr<const Value>;

struct Storage {
  Global type;
  std::string key;
  std::int64_t numel;
};
struct TensorRef {
  std::shared_ptr<const Storage> storage;
  std::int64_t offset;
  std::vector<std::int64_t> shape, stride;
};
struct Mark {};
using Items = std::vector<std::pair<ValuePtr, ValuePtr>>;

struct Value {
  std::variant<std::monostate, bool, std::int64_t, std::string, std::vector<ValuePtr>, std::shared_ptr<Items>, Global,
               std::shared_ptr<const Storage>, TensorRef, Mark>
      v;
};

// Limits of the pickle machine: a LightGlue state dict runs about 20,000 opcodes with a memo of 2,500 and a stack
// of 6.
constexpr std::size_t kMaxOps = std::size_t{1} << 22;
constexpr std::size_t kMaxStack = 1 << 16;
constexpr std::size_t kMaxMemo = std::size_t{1} << 20;
constexpr std::size_t kMaxTensors = 1 << 20;
constexpr std::size_t kMaxDims = 16;

const char* global_name(Global g) {
  switch (g) {
    case Global::OrderedDict: return "collections.OrderedDict";
    case Global::RebuildTensor: return "torch._utils._rebuild_tensor_v2";
    case Global::FloatStorage: return "torch.FloatStorage";
    case Global::HalfStorage: return "torch.HalfStorage";
    case Global::BFloat16Storage: return "torch.BFloat16Storage";
  }
  return "?";
}

std::optional<Global> find_global(const std::string& module, const std::string& name) {
  for (Global g :
       {Global::OrderedDict, Global::RebuildTensor, Global::FloatStorage, Global::HalfStorage, Global::BFloat16Storage})
    if (module + "." + name == global_name(g)) return g;
  return std::nullopt;
}

std::size_t element_bytes(Global storage) {
  return storage == Global::FloatStorage ? 4 : 2;
}

class Unpickler {
 public:
  Unpickler(const std::uint8_t* p, std::size_t n, const std::string& source) : p_(p), n_(n), source_(source) {}

  ValuePtr run() {
    for (std::size_t ops = 0;; ++ops) {
      if (ops >= kMaxOps) fail("more than " + std::to_string(kMaxOps) + " opcodes");
      const std::size_t at = pos_;
      const std::uint8_t op = u8();
      switch (op) {
        case 0x80: {  // PROTO
          const int v = u8();
          if (v < 2 || v > 5) fail("pickle protocol " + std::to_string(v) + " (torch.save writes 2)");
          break;
        }
        case 0x95: take(8); break;  // FRAME: a length hint
        case '.':                   // STOP
          if (stack_.size() != 1 || is<Mark>(stack_.back())) fail("the pickle does not end with one object");
          return stack_.back();
        case 'c': {  // GLOBAL module\nname\n
          const std::string module = line(), name = line();
          push_global(module, name, at);
          break;
        }
        case 0x93: {  // STACK_GLOBAL
          const std::string name = str(pop()), module = str(pop());
          push_global(module, name, at);
          break;
        }
        case 'q': memo(u8()); break;                           // BINPUT
        case 'r': memo(rd32()); break;                         // LONG_BINPUT
        case 0x94: memo(memo_.size()); break;                  // MEMOIZE
        case 'h': push(get(u8())); break;                      // BINGET
        case 'j': push(get(rd32())); break;                    // LONG_BINGET
        case '(': push(make(Mark{})); break;                   // MARK
        case ')': push(make(std::vector<ValuePtr>{})); break;  // EMPTY_TUPLE
        case 't': push(make(pop_to_mark())); break;            // TUPLE
        case 0x85:
        case 0x86:
        case 0x87: {  // TUPLE1..3
          const std::size_t k = static_cast<std::size_t>(op - 0x84);
          if (stack_.size() < k) fail("TUPLE" + std::to_string(k) + " on a short stack");
          std::vector<ValuePtr> t(stack_.end() - static_cast<std::ptrdiff_t>(k), stack_.end());
          stack_.resize(stack_.size() - k);
          for (const auto& x : t)
            if (is<Mark>(x)) fail("TUPLE" + std::to_string(k) + " over a MARK");
          push(make(std::move(t)));
          break;
        }
        case '}': push(make(std::make_shared<Items>())); break;  // EMPTY_DICT
        case 's': {                                              // SETITEM
          ValuePtr v = pop(), k = pop();
          items(top()).emplace_back(std::move(k), std::move(v));
          break;
        }
        case 'u': {  // SETITEMS
          std::vector<ValuePtr> kv = pop_to_mark();
          if (kv.size() % 2) fail("SETITEMS with an odd number of values");
          Items& d = items(top());
          for (std::size_t i = 0; i < kv.size(); i += 2) d.emplace_back(kv[i], kv[i + 1]);
          break;
        }
        case 'X': push(make(std::string(text(rd32())))); break;                 // BINUNICODE
        case 0x8c: push(make(std::string(text(u8())))); break;                  // SHORT_BINUNICODE
        case 0x8d: push(make(std::string(text(rd64())))); break;                // BINUNICODE8
        case 'J': push(make(std::int64_t{rd<std::int32_t>(take(4))})); break;   // BININT
        case 'K': push(make(std::int64_t{u8()})); break;                        // BININT1
        case 'M': push(make(std::int64_t{rd<std::uint16_t>(take(2))})); break;  // BININT2
        case 0x8a: {                                                            // LONG1
          const std::size_t k = u8();
          if (k > 8) fail("an integer of " + std::to_string(k) + " bytes");
          const std::uint8_t* b = take(k);
          std::uint64_t u = 0;
          for (std::size_t i = k; i-- > 0;) u = (u << 8) | b[i];
          if (k > 0 && k < 8 && (b[k - 1] & 0x80)) u |= ~std::uint64_t{0} << (8 * k);  // sign-extend
          push(make(static_cast<std::int64_t>(u)));
          break;
        }
        case 'N': push(make(std::monostate{})); break;  // NONE
        case 0x88: push(make(true)); break;             // NEWTRUE
        case 0x89: push(make(false)); break;            // NEWFALSE
        case 'Q': push(persistent(pop())); break;       // BINPERSID
        case 'R': {                                     // REDUCE
          ValuePtr args = pop(), fn = pop();
          push(reduce(fn, args, at));
          break;
        }
        case 'b': {  // BUILD: only the state dict's _metadata (a dict, or None) on a dict
          ValuePtr state = pop();
          if (!is<std::shared_ptr<Items>>(top()) || !(is<std::shared_ptr<Items>>(state) || is<std::monostate>(state)))
            fail("BUILD at offset " + std::to_string(at) + " on something other than a dict");
          break;
        }
        default: {
          char hex[8];
          std::snprintf(hex, sizeof hex, "0x%02x", op);
          fail(std::string("pickle opcode ") + hex + " at offset " + std::to_string(at) +
               " (only the opcodes torch.save uses for a dict of tensors are read)");
        }
      }
    }
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { bad(source_, what); }

  template <class T>
  static bool is(const ValuePtr& v) {
    return std::holds_alternative<T>(v->v);
  }
  template <class T>
  static ValuePtr make(T x) {
    return std::make_shared<const Value>(Value{std::move(x)});
  }

  const std::uint8_t* take(std::uint64_t k) {
    if (k > n_ - pos_) fail("the pickle ends in the middle of an opcode (truncated?)");
    const std::uint8_t* r = p_ + pos_;
    pos_ += static_cast<std::size_t>(k);
    return r;
  }
  std::uint8_t u8() { return *take(1); }
  std::uint32_t rd32() { return rd<std::uint32_t>(take(4)); }
  std::uint64_t rd64() { return rd<std::uint64_t>(take(8)); }
  std::string_view text(std::uint64_t k) {
    const auto* b = take(k);  // checked against the bytes left before anything is allocated
    return {reinterpret_cast<const char*>(b), static_cast<std::size_t>(k)};
  }
  std::string line() {
    const std::size_t start = pos_;
    while (pos_ < n_ && p_[pos_] != '\n') ++pos_;
    if (pos_ >= n_) fail("GLOBAL without its newline");
    std::string s(reinterpret_cast<const char*>(p_ + start), pos_ - start);
    ++pos_;
    return s;
  }

  void push(ValuePtr v) {
    if (stack_.size() >= kMaxStack) fail("a stack deeper than " + std::to_string(kMaxStack));
    stack_.push_back(std::move(v));
  }
  ValuePtr pop() {
    if (stack_.empty() || is<Mark>(stack_.back())) fail("an opcode pops an empty stack");
    ValuePtr v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  const ValuePtr& top() const {
    if (stack_.empty()) fail("an opcode reads an empty stack");
    return stack_.back();
  }
  std::vector<ValuePtr> pop_to_mark() {
    std::size_t m = stack_.size();
    while (m > 0 && !is<Mark>(stack_[m - 1])) --m;
    if (m == 0) fail("no MARK on the stack");
    std::vector<ValuePtr> out(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m - 1);
    return out;
  }
  void memo(std::size_t i) {
    if (i >= kMaxMemo) fail("memo index " + std::to_string(i) + " over " + std::to_string(kMaxMemo));
    if (memo_.size() <= i) memo_.resize(i + 1);
    memo_[i] = top();
  }
  ValuePtr get(std::size_t i) const {
    if (i >= memo_.size() || !memo_[i]) fail("memo index " + std::to_string(i) + " was never set");
    return memo_[i];
  }
  Items& items(const ValuePtr& v) const {
    const auto* d = std::get_if<std::shared_ptr<Items>>(&v->v);
    if (!d) fail("SETITEM(S) on something other than a dict");
    // The dict is shared by the stack and the memo; it is filled in place, as pickle does.
    return **d;
  }
  std::string str(const ValuePtr& v) const {
    const auto* s = std::get_if<std::string>(&v->v);
    if (!s) fail("a string was expected");
    return *s;
  }
  std::int64_t integer(const ValuePtr& v, const char* what) const {
    const auto* i = std::get_if<std::int64_t>(&v->v);
    if (!i) fail(std::string(what) + " is not an integer");
    return *i;
  }
  const std::vector<ValuePtr>& tuple(const ValuePtr& v, const char* what) const {
    const auto* t = std::get_if<std::vector<ValuePtr>>(&v->v);
    if (!t) fail(std::string(what) + " is not a tuple");
    return *t;
  }

  void push_global(const std::string& module, const std::string& name, std::size_t at) {
    const auto g = find_global(module, name);
    if (!g)
      fail("global " + module + "." + name + " at offset " + std::to_string(at) +
           " (allowed: collections.OrderedDict, torch._utils._rebuild_tensor_v2, torch.FloatStorage, "
           "torch.HalfStorage, torch.BFloat16Storage)");
    push(make(*g));
  }

  ValuePtr persistent(const ValuePtr& pid) const {
    const auto& t = tuple(pid, "a persistent id");
    if (t.size() != 5 || !is<std::string>(t[0]) || str(t[0]) != "storage")
      fail("a persistent id other than ('storage', type, key, location, numel)");
    const auto* type = std::get_if<Global>(&t[1]->v);
    if (!type || *type == Global::OrderedDict || *type == Global::RebuildTensor)
      fail("a storage whose type is not FloatStorage, HalfStorage or BFloat16Storage");
    const std::int64_t numel = integer(t[4], "a storage's size");
    if (numel < 0) fail("a storage of " + std::to_string(numel) + " elements");
    return make(std::make_shared<const Storage>(Storage{*type, str(t[2]), numel}));
  }

  ValuePtr reduce(const ValuePtr& fn, const ValuePtr& args, std::size_t at) {
    const auto* g = std::get_if<Global>(&fn->v);
    const auto& a = tuple(args, "REDUCE's arguments");
    if (g && *g == Global::OrderedDict) {
      if (!a.empty()) fail("OrderedDict called with arguments at offset " + std::to_string(at));
      return make(std::make_shared<Items>());
    }
    if (!g || *g != Global::RebuildTensor)
      fail("REDUCE at offset " + std::to_string(at) + " calls no allowed function");
    // _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
    if (a.size() < 6 || a.size() > 7) fail("_rebuild_tensor_v2 with " + std::to_string(a.size()) + " arguments");
    const auto* st = std::get_if<std::shared_ptr<const Storage>>(&a[0]->v);
    if (!st) fail("_rebuild_tensor_v2 without a storage");
    if (++tensors_ > kMaxTensors) fail("more than " + std::to_string(kMaxTensors) + " tensors");
    TensorRef t{*st, integer(a[1], "a storage offset"), {}, {}};
    const auto &shape = tuple(a[2], "a tensor's size"), &stride = tuple(a[3], "a tensor's stride");
    if (shape.size() != stride.size() || shape.size() > kMaxDims)
      fail("a tensor with " + std::to_string(shape.size()) + " sizes and " + std::to_string(stride.size()) +
           " strides (at most " + std::to_string(kMaxDims) + ")");
    for (std::size_t i = 0; i < shape.size(); ++i) {
      t.shape.push_back(integer(shape[i], "a tensor's size"));
      t.stride.push_back(integer(stride[i], "a tensor's stride"));
    }
    return make(std::move(t));
  }

  const std::uint8_t* p_;
  std::size_t n_, pos_ = 0, tensors_ = 0;
  const std::string& source_;
  std::vector<ValuePtr> stack_, memo_;
};

std::string shape_text(const std::vector<std::int64_t>& s) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

}  // namespace

std::map<std::string, Tensor> parse_pth(const std::vector<std::uint8_t>& bytes, const std::string& source) {
  const std::map<std::string, Member> members = zip_members(bytes, source);
  // The pickle is <prefix>/data.pkl (torch names the prefix after the file; any single folder is accepted).
  std::string prefix;
  const Member* pkl = nullptr;
  for (const auto& [name, m] : members) {
    const auto slash = name.find('/');
    if (slash != std::string::npos && name.compare(slash, std::string::npos, "/data.pkl") == 0) {
      if (pkl) bad(source, "two data.pkl members");
      prefix = name.substr(0, slash + 1);
      pkl = &m;
    }
  }
  if (!pkl) bad(source, "no <name>/data.pkl member");
  auto member_bytes = [&](const Member& m) { return bytes.data() + static_cast<std::size_t>(m.data); };
  auto check_crc = [&](const std::string& name, const Member& m) {
    uLong c = crc32(0L, Z_NULL, 0);
    for (std::uint64_t off = 0; off < m.size;) {
      const auto chunk = static_cast<uInt>(std::min<std::uint64_t>(m.size - off, 1u << 30));
      c = crc32(c, member_bytes(m) + off, chunk);
      off += chunk;
    }
    if (static_cast<std::uint32_t>(c) != m.crc) bad(source, "zip member " + name + ": CRC-32 mismatch (corrupt data)");
  };
  if (const auto it = members.find(prefix + "byteorder"); it != members.end()) {
    const std::string order(reinterpret_cast<const char*>(member_bytes(it->second)),
                            static_cast<std::size_t>(std::min<std::uint64_t>(it->second.size, 16)));
    if (order != "little") bad(source, "byte order '" + order + "' (only little-endian files are read)");
  }
  check_crc(prefix + "data.pkl", *pkl);
  Unpickler u(member_bytes(*pkl), static_cast<std::size_t>(pkl->size), source);
  const ValuePtr root = u.run();
  const auto* dict = std::get_if<std::shared_ptr<Items>>(&root->v);
  if (!dict) bad(source, "the pickled object is not a dict");

  // Check every entry and the total size first, then allocate and convert.
  std::uint64_t total = 0;
  std::map<std::string, const TensorRef*> refs;
  for (const auto& [k, v] : **dict) {
    const auto* key = std::get_if<std::string>(&k->v);
    if (!key) bad(source, "a key of the state dict is not a string");
    const auto* t = std::get_if<TensorRef>(&v->v);
    if (!t) bad(source, "entry '" + *key + "' is not a tensor");
    if (refs.count(*key)) bad(source, "entry '" + *key + "' appears twice");
    const Storage& s = *t->storage;
    const std::string where = "tensor '" + *key + "' (storage " + s.key + ")";
    // The extent: offset + sum (size - 1) * stride must lie inside the storage; sizes and strides are non-negative.
    std::uint64_t count = 1, last = static_cast<std::uint64_t>(t->offset);
    if (t->offset < 0) bad(source, where + ": negative storage offset");
    bool empty = false;
    for (std::size_t i = 0; i < t->shape.size(); ++i) {
      const std::int64_t d = t->shape[i], st = t->stride[i];
      if (d < 0 || st < 0) bad(source, where + ": size " + shape_text(t->shape) + " or stride with a negative entry");
      if (d == 0) empty = true;
      if (d > 0 && count > kMaxPthValues / static_cast<std::uint64_t>(d))
        bad(source, where + ": size " + shape_text(t->shape) + " is over the limit of " +
                        std::to_string(kMaxPthValues) + " values");
      count *= static_cast<std::uint64_t>(d);
      if (d > 0) {
        if (static_cast<std::uint64_t>(st) > kMaxPthValues) bad(source, where + ": stride " + std::to_string(st));
        last += static_cast<std::uint64_t>(d - 1) * static_cast<std::uint64_t>(st);
      }
    }
    if (!empty && last >= static_cast<std::uint64_t>(s.numel))
      bad(source, where + ": size " + shape_text(t->shape) + " at offset " + std::to_string(t->offset) +
                      " reaches past its storage of " + std::to_string(s.numel) + " elements");
    const auto m = members.find(prefix + "data/" + s.key);
    if (m == members.end()) bad(source, where + ": no zip member " + prefix + "data/" + s.key);
    if (static_cast<std::uint64_t>(s.numel) > m->second.size / element_bytes(s.type))
      bad(source, where + ": storage of " + std::to_string(s.numel) + " " + global_name(s.type) + " elements in " +
                      std::to_string(m->second.size) + " bytes");
    total += count;
    if (total > kMaxPthValues)
      bad(source, "the tensors hold more than " + std::to_string(kMaxPthValues) + " values in all");
    refs[*key] = t;
  }
  std::map<std::string, Tensor> out;
  std::map<std::string, bool> checked;
  for (const auto& [key, t] : refs) {
    const Storage& s = *t->storage;
    const Member& m = members.at(prefix + "data/" + s.key);
    if (!checked[s.key]) {
      check_crc(prefix + "data/" + s.key, m);
      checked[s.key] = true;
    }
    const std::uint8_t* base = member_bytes(m);
    Tensor r;
    r.shape = t->shape;
    std::uint64_t count = 1;
    for (const auto d : t->shape) count *= static_cast<std::uint64_t>(d);
    r.data.resize(static_cast<std::size_t>(count));
    // Row-major walk of the index space with the tensor's strides.
    std::vector<std::int64_t> idx(t->shape.size(), 0);
    for (std::uint64_t i = 0; i < count; ++i) {
      std::uint64_t e = static_cast<std::uint64_t>(t->offset);
      for (std::size_t d = 0; d < idx.size(); ++d) e += static_cast<std::uint64_t>(idx[d] * t->stride[d]);
      float v;
      if (s.type == Global::FloatStorage)
        v = rd<float>(base + 4 * e);
      else if (s.type == Global::HalfStorage)
        v = util::half_to_float(rd<std::uint16_t>(base + 2 * e));
      else
        v = std::bit_cast<float>(static_cast<std::uint32_t>(rd<std::uint16_t>(base + 2 * e)) << 16);
      r.data[static_cast<std::size_t>(i)] = v;
      for (std::size_t d = idx.size(); d-- > 0;) {
        if (++idx[d] < t->shape[d]) break;
        idx[d] = 0;
      }
    }
    out.emplace(key, std::move(r));
  }
  return out;
}

std::map<std::string, Tensor> load_pth(const std::string& path) {
  return parse_pth(util::read_file(path, kMaxPthBytes), path);
}

}  // namespace superpoint_rt::model
