#pragma once
// The safetensors format (Hugging Face), so that linea's weights load anywhere
// (safetensors.torch.load_file, transformers, candle, ...) and theirs load here:
//
//   8 bytes    N, the header's length, unsigned 64-bit little-endian
//   N bytes    a JSON object, padded with spaces to a multiple of 8 bytes:
//                {"__metadata__": {"key": "value", ...},                  (optional, strings only)
//                 "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
//   the rest   the tensors' bytes, row-major and little-endian; offsets count from the first byte
//              after the header, and the ranges tile the data exactly (no gaps, no overlap, nothing
//              after the last)
//
// linea writes F32, F64, BF16, I64 and BOOL, 8-byte types first, then 4-, 2- and 1-byte, by name
// within each, so that every tensor is aligned to its element size in the file (mmap-friendly,
// as the reference writer does). The reader treats the file as hostile: every number in the
// header is checked before it is used, and any problem is a linea::Error naming the file and the
// problem, never a crash; tensor memory is allocated only for byte ranges the file really holds.
#include <map>
#include <string>
#include <string_view>

#include "tensor/tensor.h"

namespace linea::train {

using NamedTensors = std::map<std::string, Tensor>;
using Metadata = std::map<std::string, std::string>;

struct Safetensors {
  NamedTensors tensors;  // on the CPU
  Metadata metadata;
};

// Tensors may live on any device and be any view; they are copied to the host one at a time.
// The file is written atomically (train/file_io.h).
void save_safetensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata = {});
Safetensors load_safetensors(const std::string& path);

// The same, in memory; `source` names the bytes in errors.
std::string encode_safetensors(const NamedTensors& tensors, const Metadata& metadata = {});
Safetensors decode_safetensors(std::string_view bytes, const std::string& source = "<memory>");

}  // namespace linea::train
