// PyTorch checkpoints (.pth, torch.save's zip format) read safely: a state dict of tensors and nothing else.
//
// torch.save writes a zip archive (members stored, not compressed) holding <prefix>/data.pkl, a pickle of the object,
// and one member <prefix>/data/<key> per tensor storage, the raw little-endian values. Loading such a pickle with
// Python's pickle runs arbitrary code. This reader is not a pickle interpreter: it runs only the opcodes and calls
// torch.save emits for a dict of tensors, on a stack of plain values it builds itself:
//   - the globals collections.OrderedDict, torch._utils._rebuild_tensor_v2 and the storage types torch.FloatStorage,
//     torch.HalfStorage, torch.BFloat16Storage (float32, float16, bfloat16); any other global is an Error naming it;
//   - persistent ids ('storage', <storage type>, key, location, numel) for the storages;
//   - the opcodes of protocols 2 to 4 that such a pickle holds (PROTO FRAME GLOBAL STACK_GLOBAL MARK STOP, the
//     memo, None / bools / ints / strings, tuples, EMPTY_DICT SETITEM(S), REDUCE, BUILD (the state dict's
//     _metadata, ignored), BINPERSID); any other opcode is an Error naming it and its offset.
// The object must be a dict (or OrderedDict) whose keys are strings and whose values are tensors (an Error names the
// first key that is not). Every size is checked before memory is allocated for it: the file, the number of opcodes,
// the stack and memo, a string against the bytes left, a tensor's extent (offset + strides x shape) against its
// storage's numel and the storage's numel against its zip member's size.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/weights.hpp"

namespace superpoint_rt::model {

/// The largest .pth file read (LightGlue's are 47 MB; SuperGlue's 48 MB).
inline constexpr std::uint64_t kMaxPthBytes = std::uint64_t{1} << 30;
/// The most values of all tensors together (float32 after conversion: 1 GiB).
inline constexpr std::uint64_t kMaxPthValues = std::uint64_t{1} << 28;

/// The tensors of a torch.save'd state dict (float32, float16 and bfloat16 widened to float32, row-major whatever
/// their strides). Throws Error(Model) naming `source` and what is wrong (the member, opcode, global or key).
std::map<std::string, Tensor> parse_pth(const std::vector<std::uint8_t>& bytes, const std::string& source);

/// Reads and parses a .pth file (at most kMaxPthBytes). Throws Error(NotFound / Io / TooLarge) for the file, as
/// parse_pth for its contents.
std::map<std::string, Tensor> load_pth(const std::string& path);

}  // namespace superpoint_rt::model
