#include "engine/checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "engine/error.h"
#include "engine/input_file.h"
#include "engine/json_read.h"

namespace psi::ckpt {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

using json = nlohmann::json;

// The size of one element of a dtype psi reads as weights (BF16, F16, F32); with `any`, of every
// numeric dtype; 0 for the others.
std::uint64_t dtype_size(std::string_view dtype, SafetensorsDtypes dtypes = SafetensorsDtypes::weights) {
  if (dtype == "BF16" || dtype == "F16") return 2;
  if (dtype == "F32") return 4;
  if (dtypes == SafetensorsDtypes::weights) return 0;
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL") return 1;
  return 0;
}

// The first byte offset where `s` stops being well-formed UTF-8 (overlong forms, surrogates and
// code points above U+10FFFF are ill-formed), or nothing.
std::optional<std::size_t> first_invalid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto b0 = std::uint8_t(s[i]);
    int n;
    std::uint32_t cp, min;
    if (b0 < 0x80) { ++i; continue; }
    if ((b0 & 0xe0) == 0xc0) { n = 1; cp = b0 & 0x1f; min = 0x80; }
    else if ((b0 & 0xf0) == 0xe0) { n = 2; cp = b0 & 0x0f; min = 0x800; }
    else if ((b0 & 0xf8) == 0xf0) { n = 3; cp = b0 & 0x07; min = 0x10000; }
    else return i;
    if (i + std::size_t(n) >= s.size()) return i;  // the sequence is cut off
    for (int k = 1; k <= n; ++k) {
      const auto b = std::uint8_t(s[i + std::size_t(k)]);
      if ((b & 0xc0) != 0x80) return i;
      cp = (cp << 6) | (b & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
    i += std::size_t(n) + 1;
  }
  return std::nullopt;
}

std::string offsets_str(const SafetensorsEntry& e) {
  std::string s = "[";  // built with += (GCC 12 warns falsely on "[" + std::to_string(...))
  s += std::to_string(e.begin);
  s += ", ";
  s += std::to_string(e.end);
  s += "]";
  return s;
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path, std::string strip_prefix, SafetensorsDtypes dtypes)
    : path_(path) {
  const std::string p = path.string();
  const int fd = open_input_file(path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw Error(p + ": cannot stat: " + std::strerror(e));
  }
  size_ = std::uint64_t(st.st_size);
  fd_ = fd;
  try {
    if (size_ < 8)
      throw Error(p + ": truncated: " + std::to_string(size_) + " bytes, shorter than the 8-byte header length");
    std::uint64_t header_len = 0;
    read_exact(0, &header_len, 8);
    if (header_len > size_ - 8)
      throw Error(p + ": header length " + std::to_string(header_len) + " runs past the end of the file (" +
                  std::to_string(size_) + " bytes)");
    // The format's own limit; it also bounds what is read into memory here.
    if (header_len > kMaxHeaderBytes)
      throw Error(p + ": header length " + std::to_string(header_len) + " exceeds the format's limit of " +
                  std::to_string(kMaxHeaderBytes) + " bytes");
    data_offset_ = 8 + header_len;
    data_size_ = size_ - data_offset_;
    std::string header(header_len, '\0');
    read_exact(8, header.data(), header_len);
    parse_header(header, strip_prefix, dtypes);
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() { ::close(fd_); }

// pread, not a mapping: a file that shrinks while psi reads it is a short read and one clear
// error, where a mapping would end psi with SIGBUS.
void SafetensorsFile::read_exact(std::uint64_t offset, void* dst, std::uint64_t bytes) const {
  auto* d = static_cast<char*>(dst);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd_, d, std::size_t(std::min<std::uint64_t>(bytes, 1u << 30)), off_t(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(path_.string() + ": read failed at byte " + std::to_string(offset) + ": " + std::strerror(errno));
    if (n == 0)
      throw Error(path_.string() + ": ends at byte " + std::to_string(offset) + ", before the " +
                  std::to_string(size_) + " bytes it had when opened (changed while psi read it?)");
    d += n;
    offset += std::uint64_t(n);
    bytes -= std::uint64_t(n);
  }
}

namespace {

// A SAX pass that records the first key repeated within one object; it stops there, and at
// malformed JSON.
struct DuplicateKeys : nlohmann::json_sax<json> {
  std::vector<std::set<std::string>> open;
  std::string duplicate;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    open.emplace_back();
    return true;
  }
  bool key(string_t& k) override {
    if (open.back().insert(k).second) return true;
    duplicate = k;
    return false;
  }
  bool end_object() override {
    open.pop_back();
    return true;
  }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  // Malformed JSON: the plain parse after this pass reports it.
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }
};

}  // namespace

void SafetensorsFile::parse_header(std::string_view text, const std::string& strip_prefix, SafetensorsDtypes dtypes) {
  const std::string p = path_.string();
  if (auto bad = first_invalid_utf8(text))
    throw Error(p + ": header is not valid UTF-8 at header byte " + std::to_string(*bad) +
                " (tensor names must be UTF-8)");

  // nlohmann keeps the last of duplicate keys silently, so a first SAX pass sees every key and
  // catches duplicates per object; then the plain parse. (nlohmann's callback parser would do
  // both at once, but it rescans an object's members at each nested object's end: quadratic in
  // the tensor count, minutes for a 100,000-tensor header.)
  DuplicateKeys dup;
  json::sax_parse(text.begin(), text.end(), &dup);
  if (!dup.duplicate.empty()) throw Error(p + ": duplicate key \"" + dup.duplicate + "\" in the header");
  std::string why;
  auto parsed = read_json_if_valid(text, p + ": header", &why);
  if (!parsed) throw Error(p + ": header is not valid JSON: " + why);
  json header = std::move(*parsed);
  if (!header.is_object()) throw Error(p + ": header is not a JSON object");

  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) throw Error(p + ": __metadata__ is not an object");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) throw Error(p + ": __metadata__ value of \"" + mk + "\" is not a string");
        metadata_[mk] = mv.get<std::string>();
      }
      continue;
    }
    const std::string where = p + ": tensor " + key;
    if (!value.is_object()) throw Error(where + ": entry is not an object");
    for (const auto& [field, unused] : value.items())
      if (field != "dtype" && field != "shape" && field != "data_offsets")
        throw Error(where + ": unexpected field \"" + field + "\"");
    if (!value.contains("dtype") || !value["dtype"].is_string()) throw Error(where + ": dtype missing or not a string");
    if (!value.contains("shape") || !value["shape"].is_array()) throw Error(where + ": shape missing or not an array");
    if (!value.contains("data_offsets") || !value["data_offsets"].is_array() || value["data_offsets"].size() != 2)
      throw Error(where + ": data_offsets missing or not [begin, end]");
    SafetensorsEntry e;
    e.dtype = value["dtype"].get<std::string>();
    const std::uint64_t esize = dtype_size(e.dtype, dtypes);
    if (esize == 0)
      throw Error(where + ": dtype " + e.dtype + " is not supported (" +
                  (dtypes == SafetensorsDtypes::weights ? "BF16; F16/F32 converted exactly"
                                                        : "F64, F32, F16, BF16, I64 to I8, U64 to U8, BOOL") +
                  ")");
    std::uint64_t numel = 1;
    for (const json& d : value["shape"]) {
      if (!d.is_number_unsigned()) throw Error(where + ": shape entry " + d.dump() + " is not a non-negative integer");
      const std::uint64_t v = d.get<std::uint64_t>();
      // Beside a zero dimension a huge one passes the product check; Shape holds int64.
      if (v > std::uint64_t(std::numeric_limits<std::int64_t>::max()) ||
          (v > 0 && numel > (std::uint64_t(1) << 62) / v))
        throw Error(where + ": shape is too large");
      numel *= v;
      e.shape.push_back(std::int64_t(v));
    }
    for (const json& o : value["data_offsets"])
      if (!o.is_number_unsigned()) throw Error(where + ": data_offsets entry " + o.dump() + " is not a non-negative integer");
    e.begin = value["data_offsets"][0].get<std::uint64_t>();
    e.end = value["data_offsets"][1].get<std::uint64_t>();
    if (e.begin > e.end || e.end > data_size_)
      throw Error(where + ": data_offsets " + offsets_str(e) + " out of range of the " + std::to_string(data_size_) +
                  "-byte data section");
    if (e.end - e.begin != numel * esize)
      throw Error(where + ": data_offsets " + offsets_str(e) + " span " + std::to_string(e.end - e.begin) +
                  " bytes but shape " + shape_str(e.shape) + " of " + e.dtype + " needs " + std::to_string(numel * esize));
    std::string name = key;
    if (!strip_prefix.empty() && name.starts_with(strip_prefix)) name = name.substr(strip_prefix.size());
    if (!entries_.emplace(name, std::move(e)).second)
      throw Error(p + ": duplicate tensor name " + name + " after stripping the prefix \"" + strip_prefix + "\"");
  }

  std::vector<std::pair<std::string, const SafetensorsEntry*>> order;
  for (const auto& [name, e] : entries_)
    if (e.end > e.begin) order.emplace_back(name, &e);
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.second->begin < b.second->begin; });
  for (std::size_t i = 1; i < order.size(); ++i)
    if (order[i].second->begin < order[i - 1].second->end)
      throw Error(p + ": tensors " + order[i - 1].first + " and " + order[i].first + " overlap (data_offsets " +
                  offsets_str(*order[i - 1].second) + " and " + offsets_str(*order[i].second) + ")");
}

bool SafetensorsFile::contains(std::string_view name) const { return entries_.find(name) != entries_.end(); }

const SafetensorsEntry& SafetensorsFile::entry(std::string_view name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw Error(path_.string() + ": no tensor named " + std::string(name));
  return it->second;
}

Shape SafetensorsFile::shape(std::string_view name) const { return entry(name).shape; }

void SafetensorsFile::read(std::string_view name, const Slice& s, std::span<Bf16> out) const {
  const SafetensorsEntry& e = entry(name);
  if (dtype_size(e.dtype) == 0)
    throw Error(path_.string() + ": tensor " + std::string(name) + " is " + e.dtype + ", not read as BF16 weights (BF16; F16/F32 converted exactly)");
  check_slice(name, e.shape, s, out.size());
  const Matrix2d m = matrix_view(e.shape);
  const std::uint64_t esize = dtype_size(e.dtype);
  const std::size_t cols = std::size_t(s.cols());
  std::vector<std::byte> row(e.dtype == "BF16" ? 0 : cols * esize);
  for (std::int64_t r = s.r0; r < s.r1; ++r) {
    const std::uint64_t first = std::uint64_t(r * m.cols + s.c0);
    const std::uint64_t at = data_offset_ + e.begin + first * esize;
    Bf16* dst = out.data() + std::size_t(r - s.r0) * cols;
    if (e.dtype == "BF16") {
      read_exact(at, dst, cols * 2);
      continue;
    }
    read_exact(at, row.data(), row.size());
    const std::byte* src = row.data();
    for (std::size_t j = 0; j < cols; ++j) {
      float f;
      if (e.dtype == "F32") {
        std::memcpy(&f, src + j * 4, 4);
      } else {
        std::uint16_t h;
        std::memcpy(&h, src + j * 2, 2);
        f = half_to_float(h);
      }
      const Bf16 b = bf16_rne(f);
      if (!(b.to_float() == f) && !(std::isinf(f) && b.is_inf()))
        throw Error(path_.string() + ": tensor " + std::string(name) + " element " + std::to_string(first + j) + " (" +
                    e.dtype + " " + std::to_string(f) + ") is not exactly representable in BF16");
      dst[j] = b;
    }
  }
}

std::vector<std::byte> SafetensorsFile::bytes(std::string_view name) const {
  const SafetensorsEntry& e = entry(name);
  std::vector<std::byte> out(std::size_t(e.end - e.begin));
  read_exact(data_offset_ + e.begin, out.data(), out.size());
  return out;
}

float half_to_float(std::uint16_t h) {
  const float sign = (h & 0x8000u) ? -1.0f : 1.0f;
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  if (exp == 0) return sign * std::ldexp(float(mant), -24);
  // Inf, or a NaN with its sign and its payload in the top fraction bits.
  if (exp == 31) return std::bit_cast<float>(std::uint32_t(h & 0x8000u) << 16 | 0x7f800000u | std::uint32_t(mant) << 13);
  return sign * std::ldexp(float(mant + 1024), exp - 25);
}

SafetensorsTensor bf16_tensor(std::string name, Shape shape, std::span<const Bf16> values) {
  SafetensorsTensor t{std::move(name), "BF16", std::move(shape), std::vector<std::byte>(values.size() * 2)};
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

void write_safetensors(const std::filesystem::path& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::string p = path.string();
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  for (const SafetensorsTensor& t : tensors) {
    const std::uint64_t esize = dtype_size(t.dtype);
    if (esize == 0) throw Error(p + ": cannot write tensor " + t.name + " of dtype " + t.dtype);
    if (t.name == "__metadata__" || header.contains(t.name)) throw Error(p + ": duplicate tensor name " + t.name);
    if (first_invalid_utf8(t.name)) throw Error(p + ": tensor name is not valid UTF-8");
    if (std::uint64_t(numel(t.shape)) * esize != t.bytes.size())
      throw Error(p + ": tensor " + t.name + " has " + std::to_string(t.bytes.size()) + " bytes but shape " +
                  shape_str(t.shape) + " of " + t.dtype + " needs " + std::to_string(std::uint64_t(numel(t.shape)) * esize));
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned
  const std::uint64_t len = text.size();

  const std::filesystem::path tmp = path.string() + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw Error(tmp.string() + ": cannot create");
    f.write(reinterpret_cast<const char*>(&len), 8);
    f.write(text.data(), std::streamsize(text.size()));
    for (const SafetensorsTensor& t : tensors)
      f.write(reinterpret_cast<const char*>(t.bytes.data()), std::streamsize(t.bytes.size()));
    f.flush();
    if (!f) {
      f.close();
      std::filesystem::remove(tmp);
      throw Error(tmp.string() + ": write failed");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp);
    throw Error(p + ": cannot rename the finished file into place: " + ec.message());
  }
}

std::shared_ptr<const SafetensorsFile> open_official_checkpoint(const std::filesystem::path& path) {
  return std::make_shared<const SafetensorsFile>(path, "model.diffusion_model.");
}

}  // namespace psi::ckpt
