#include "train/safetensors.h"

#include <algorithm>
#include <bit>
#include <functional>
#include <limits>
#include <optional>
#include <tuple>
#include <vector>

#include "nn/json.h"
#include "tensor/transfer.h"
#include "train/file_io.h"

namespace linea::train {

// Tensor bytes go to and from the file as they lie in memory.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

// The reference implementation's limit: no real header comes near it, and it bounds what a
// hostile file can make the reader allocate.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr const char* kMetadataKey = "__metadata__";

struct DTypeName {
  DType dtype;
  const char* name;
};
constexpr DTypeName kDTypeNames[] = {
    {kFloat32, "F32"}, {kFloat64, "F64"}, {kBFloat16, "BF16"}, {kInt64, "I64"}, {kBool, "BOOL"}};

const char* safetensors_name(DType dtype) {
  for (const DTypeName& d : kDTypeNames)
    if (d.dtype == dtype) return d.name;
  fail("safetensors", "no safetensors name for dtype ", dtype_name(dtype));
}

std::optional<DType> dtype_named(const std::string& name) {
  for (const DTypeName& d : kDTypeNames)
    if (name == d.name) return d.dtype;
  return std::nullopt;
}

uint64_t tensor_bytes(const Tensor& t) { return static_cast<uint64_t>(t.numel()) * dtype_size(t.dtype()); }

// ---- writing ----

using Sink = std::function<void(const void* data, size_t n)>;

void write_safetensors(const Sink& sink, const NamedTensors& tensors, const Metadata& metadata) {
  std::vector<std::pair<std::string, Tensor>> order(tensors.begin(), tensors.end());
  for (const auto& [name, t] : order) {
    LINEA_CHECK(!name.empty() && name != kMetadataKey, "save_safetensors", "invalid tensor name '", name, "'");
    LINEA_CHECK(t.defined(), "save_safetensors", "tensor '", name, "' is undefined");
    safetensors_name(t.dtype());
  }
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return dtype_size(a.second.dtype()) > dtype_size(b.second.dtype());
  });

  json::Value header = json::Value::object();
  if (!metadata.empty()) {
    json::Value& meta = header[kMetadataKey] = json::Value::object();
    for (const auto& [key, value] : metadata) meta[key] = value;
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : order) {
    json::Value& entry = header[name];
    entry["dtype"] = safetensors_name(t.dtype());
    entry["shape"] = t.shape();
    entry["data_offsets"] = {offset, offset + tensor_bytes(t)};
    offset += tensor_bytes(t);
  }
  std::string text = json::dump(header);
  text.resize((text.size() + 7) / 8 * 8, ' ');

  unsigned char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(static_cast<uint64_t>(text.size()) >> (8 * i));
  sink(length, sizeof length);
  sink(text.data(), text.size());
  for (const auto& [name, t] : order) {
    const Tensor host = copy_to(t, kCPU);  // contiguous, one tensor at a time
    sink(host.raw_data(), tensor_bytes(host));
  }
}

// ---- reading ----

struct Source {
  std::string name;
  uint64_t size;
  std::function<void(uint64_t offset, void* dst, size_t n)> read;
};

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

class Decoder {
 public:
  explicit Decoder(const Source& source) : source_(source) {}

  Safetensors decode() {
    const json::Value header = read_header();
    Safetensors out;
    std::vector<Entry> entries;
    for (const auto& [key, value] : header.items()) {
      if (key == kMetadataKey) out.metadata = parse_metadata(value);
      else entries.push_back(parse_entry(key, value));
    }
    check_tiling(entries);
    for (const Entry& e : entries) out.tensors[e.name] = read_tensor(e);
    return out;
  }

 private:
  template <class... Parts>
  [[noreturn]] void error(const Parts&... parts) const {
    fail("safetensors", "'", source_.name, "': ", parts...);
  }

  json::Value read_header() {
    if (source_.size < 8) error("the file is ", source_.size, " bytes, too short for the 8-byte header length");
    unsigned char length[8];
    source_.read(0, length, 8);
    uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(length[i]) << (8 * i);
    if (n > source_.size - 8)
      error("the header length ", n, " runs past the end of the file (", source_.size, " bytes)");
    if (n > kMaxHeaderBytes) error("the header length ", n, " exceeds the limit of ", kMaxHeaderBytes, " bytes");
    std::string text(n, '\0');
    source_.read(8, text.data(), n);
    if (text.empty() || text[0] != '{') error("the header does not start with '{'");
    data_start_ = 8 + n;
    data_size_ = source_.size - data_start_;
    try {
      return json::parse(text, source_.name + " (safetensors header)");
    } catch (const Error& e) {
      error("the header is not valid JSON: ", e.what());
    }
  }

  Metadata parse_metadata(const json::Value& value) const {
    if (!value.is_object()) error("__metadata__ must be an object, got ", value.type_name());
    Metadata out;
    for (const auto& [key, v] : value.items()) {
      if (!v.is_string()) error("__metadata__ value '", key, "' must be a string, got ", v.type_name());
      out[key] = v.get<std::string>();
    }
    return out;
  }

  // A non-negative integer of the header.
  uint64_t count(const json::Value& v, const std::string& name, const char* what) const {
    const bool non_negative = v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
    if (!non_negative)
      error("tensor '", name, "': ", what, " must be non-negative integers, got ", json::dump(v));
    return v.get<uint64_t>();
  }

  Entry parse_entry(const std::string& name, const json::Value& value) const {
    if (!value.is_object()) error("tensor '", name, "' must be an object, got ", value.type_name());
    for (const auto& [key, v] : value.items())
      if (key != "dtype" && key != "shape" && key != "data_offsets") error("tensor '", name, "' has an unknown key '", key, "'");
    const json::Value* dtype = json::find(value, "dtype");
    const json::Value* shape = json::find(value, "shape");
    const json::Value* offsets = json::find(value, "data_offsets");
    if (!dtype || !shape || !offsets) error("tensor '", name, "' needs dtype, shape and data_offsets");

    Entry e{name, kFloat32, {}, 0, 0};
    const std::optional<DType> parsed = dtype->is_string() ? dtype_named(dtype->get<std::string>()) : std::nullopt;
    if (!parsed) error("tensor '", name, "' has dtype ", json::dump(*dtype), "; linea reads F32, F64, BF16, I64 and BOOL");
    e.dtype = *parsed;

    if (!shape->is_array()) error("tensor '", name, "': shape must be an array, got ", json::dump(*shape));
    if (shape->size() > static_cast<size_t>(kMaxDims))
      error("tensor '", name, "' has ", shape->size(), " dims; linea supports at most ", kMaxDims);
    // The product of the non-zero sizes must fit int64, or linea's own shape arithmetic (strides,
    // numel) would overflow even for an empty tensor.
    uint64_t numel = 1, nonzero_product = 1;
    for (const json::Value& size : *shape) {
      const uint64_t s = count(size, name, "shape sizes");
      e.shape.push_back(static_cast<int64_t>(s));
      if (s == 0) numel = 0;
      else if (__builtin_mul_overflow(nonzero_product, s, &nonzero_product) ||
               nonzero_product > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        error("tensor '", name, "' has shape ", json::dump(*shape), ", too large");
    }
    if (numel != 0) numel = nonzero_product;

    if (!offsets->is_array() || offsets->size() != 2)
      error("tensor '", name, "': data_offsets must be [begin, end], got ", json::dump(*offsets));
    e.begin = count((*offsets)[0], name, "data_offsets");
    e.end = count((*offsets)[1], name, "data_offsets");
    if (e.begin > e.end || e.end > data_size_)
      error("tensor '", name, "' has data_offsets [", e.begin, ", ", e.end, "] outside the data section of ",
            data_size_, " bytes");
    const uint64_t span = e.end - e.begin, element = dtype_size(e.dtype);
    if (span % element != 0 || span / element != numel)
      error("tensor '", name, "' of dtype ", dtype->get<std::string>(), " and shape ", json::dump(*shape), " needs ", numel,
            " elements, but data_offsets span ", span, " bytes");
    return e;
  }

  // The ranges, in file order, must cover the data section exactly once.
  void check_tiling(std::vector<Entry>& entries) const {
    std::sort(entries.begin(), entries.end(),
              [](const Entry& a, const Entry& b) { return std::tie(a.begin, a.end) < std::tie(b.begin, b.end); });
    uint64_t covered = 0;
    for (const Entry& e : entries) {
      if (e.begin < covered) error("tensor '", e.name, "' overlaps the tensor before it (data_offsets begin at ", e.begin, ")");
      if (e.begin > covered) error("there is a gap in the data before tensor '", e.name, "' (bytes ", covered, " to ", e.begin, ")");
      covered = e.end;
    }
    if (covered != data_size_)
      error(data_size_ - covered, " bytes after the last tensor are not part of any tensor (truncated header or trailing garbage)");
  }

  Tensor read_tensor(const Entry& e) const {
    const Tensor t = empty(e.shape, e.dtype, kCPU);
    source_.read(data_start_ + e.begin, t.raw_data(), e.end - e.begin);
    // Loading any byte but 0 or 1 into a C++ bool is undefined behaviour: check the bytes as bytes.
    if (e.dtype == kBool) {
      const auto* bytes = static_cast<const unsigned char*>(t.raw_data());
      if (!std::all_of(bytes, bytes + (e.end - e.begin), [](unsigned char b) { return b <= 1; }))
        error("tensor '", e.name, "' of dtype BOOL holds a byte that is neither 0 nor 1");
    }
    return t;
  }

  const Source& source_;
  uint64_t data_start_ = 0, data_size_ = 0;
};

}  // namespace

void save_safetensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata) {
  AtomicFile file(path);
  write_safetensors([&](const void* data, size_t n) { file.write(data, n); }, tensors, metadata);
  file.commit();
}

Safetensors load_safetensors(const std::string& path) {
  const InputFile file(path, "safetensors file");
  const Source source{path, file.size(), [&](uint64_t offset, void* dst, size_t n) { file.read_at(offset, dst, n); }};
  return Decoder(source).decode();
}

std::string encode_safetensors(const NamedTensors& tensors, const Metadata& metadata) {
  std::string out;
  write_safetensors([&](const void* data, size_t n) { out.append(static_cast<const char*>(data), n); }, tensors, metadata);
  return out;
}

Safetensors decode_safetensors(std::string_view bytes, const std::string& source) {
  const Source src{source, bytes.size(), [&](uint64_t offset, void* dst, size_t n) {
                     std::copy_n(bytes.data() + offset, n, static_cast<char*>(dst));
                   }};
  return Decoder(src).decode();
}

}  // namespace linea::train
