#include "oracle/operand_read.h"

#include <algorithm>
#include <bit>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "engine/error.h"
#include "engine/sha256.h"
#include "hdf5/schema.h"

namespace psi::oracle {

namespace {

std::string place(const hdf5::File& f, const std::string& object) { return f.path().string() + ":" + object; }

// The tensors of a file (its datasets less the JSON texts psi and the recordings keep beside them).
std::vector<std::string> tensor_names(const hdf5::File& f) {
  std::vector<std::string> names;
  for (const auto& d : f.list_datasets())
    if (!hdf5::is_text_dataset(f, d)) names.push_back(d.path);
  return names;
}

std::string listing(const std::vector<std::string>& names) {
  std::string s;
  for (std::size_t i = 0; i < names.size() && i < 8; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > 8) s += ", and " + std::to_string(names.size() - 8) + " more";
  return names.empty() ? "none" : s;
}

std::string index_str(const Shape& shape, std::int64_t flat) {
  std::string s;
  for (std::size_t k = shape.size(); k-- > 0;) {
    const std::int64_t d = shape[k] > 0 ? shape[k] : 1;
    s = std::to_string(flat % d) + (s.empty() ? "" : ", ") + s;
    flat /= d;
  }
  return "[" + s + "]";
}

std::string hex_bits(std::uint64_t bits, int digits) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%0*" PRIx64, digits, bits);
  return b;
}

// A float32 value is a BF16 value when its 16 low bits are zero (NaN payloads included).
bool exact_bf16(float v) { return (std::bit_cast<std::uint32_t>(v) & 0xffffu) == 0; }
bool exact_bf16(double v) {
  if (std::isnan(v)) return false;  // a float64 NaN's payload has no BF16 counterpart to keep
  const float f = float(v);
  return double(f) == v && exact_bf16(f);
}
Bf16 to_bf16(float v) { return Bf16::from_bits(std::uint16_t(std::bit_cast<std::uint32_t>(v) >> 16)); }
Bf16 to_bf16(double v) { return to_bf16(float(v)); }

template <class T>
Bf16Tensor exact_values(const hdf5::File& f, const std::string& path, std::string_view role, const Tensor<T>& t) {
  Bf16Tensor out(t.shape, std::vector<Bf16>(t.data.size()));
  for (std::size_t i = 0; i < t.data.size(); ++i) {
    const T v = t.data[i];
    if (!exact_bf16(v)) {
      char value[40];
      std::snprintf(value, sizeof value, "%.9g", double(v));
      const std::uint64_t bits = sizeof(T) == 4 ? std::bit_cast<std::uint32_t>(float(v)) : std::bit_cast<std::uint64_t>(double(v));
      throw Error(place(f, path) + ": " + std::string(role) + " element " + index_str(t.shape, std::int64_t(i)) + " is " +
                  value + " (" + (sizeof(T) == 4 ? "float32 " : "float64 ") + hex_bits(bits, 2 * int(sizeof(T))) +
                  "), not a BF16 value; the oracle's operands are BF16: store them as BF16, as their 16-bit patterns, "
                  "or as floats holding exact BF16 values");
    }
    out.data[i] = to_bf16(v);
  }
  return out;
}

}  // namespace

std::string dataset_path(const std::string& name) { return name.starts_with("/") ? name : "/" + name; }

TensorRef parse_tensor_ref(const std::string& text) {
  std::error_code ec;
  const std::size_t colon = text.rfind(':');
  if (colon == std::string::npos || std::filesystem::exists(text, ec)) return {text, ""};
  return {text.substr(0, colon), text.substr(colon + 1)};
}

ReadOperand read_operand(const hdf5::File& f, const std::string& name, std::string_view role) {
  ReadOperand r;
  const std::vector<std::string> names = tensor_names(f);
  if (name.empty()) {
    if (names.size() != 1)
      throw Error(f.path().string() + ": holds " + std::to_string(names.size()) + " tensors (" + listing(names) +
                  "); name the " + std::string(role) + " operand as FILE:NAME");
    r.dataset = names.front();
  } else {
    r.dataset = dataset_path(name);
    if (!f.exists(r.dataset) || std::find(names.begin(), names.end(), r.dataset) == names.end())
      throw Error(place(f, r.dataset) + ": no such tensor for " + std::string(role) + " (the file's tensors: " +
                  listing(names) + ")");
  }
  const hdf5::DatasetInfo di = f.info(r.dataset);
  const void* stored = nullptr;
  std::size_t bytes = 0;
  F32Tensor f32;
  F64Tensor f64;
  switch (di.kind) {
    case hdf5::ElemKind::bf16:
    case hdf5::ElemKind::u16:
      r.t = f.read_bf16_bits(r.dataset);
      stored = r.t.ptr();
      bytes = r.t.bytes();
      r.stored = di.kind == hdf5::ElemKind::bf16 ? "bf16" : "uint16, taken as BF16 bits";
      break;
    case hdf5::ElemKind::f32:
      f32 = f.read_f32(r.dataset);
      stored = f32.ptr();
      bytes = f32.bytes();
      if (role == "y") {
        std::int64_t rounded = 0;
        r.t = Bf16Tensor(f32.shape, std::vector<Bf16>(f32.data.size()));
        for (std::size_t i = 0; i < f32.data.size(); ++i) {
          r.t.data[i] = bf16_rne(f32.data[i]);
          rounded += !exact_bf16(f32.data[i]);
        }
        r.stored = "float32, rounded to the nearest BF16 (ties to even) to be judged; " + std::to_string(rounded) +
                   " of " + std::to_string(f32.data.size()) + " values were not BF16 values";
      } else {
        r.t = exact_values(f, r.dataset, role, f32);
        r.stored = "float32 holding BF16 values";
      }
      break;
    case hdf5::ElemKind::f64:
      f64 = f.read_f64(r.dataset);
      stored = f64.ptr();
      bytes = f64.bytes();
      r.t = exact_values(f, r.dataset, role, f64);
      r.stored = "float64 holding BF16 values";
      break;
    default:
      throw Error(place(f, r.dataset) + ": " + std::string(role) + " is " + std::string(hdf5::kind_name(di.kind)) +
                  "; the oracle's operands are BF16 (stored as BF16, as 16-bit unsigned BF16 patterns, or as "
                  "float32/float64 holding exact BF16 values)");
  }
  r.sha256 = sha256_hex(stored, bytes);
  // A recorded hash is always checked; a missing one is refused only where every tensor has one.
  const hdf5::Sha256Check c = hdf5::check_sha256_full(f, r.dataset, stored, bytes);
  // Its sha256_full is the whole tensor's, so rows of it cannot be checked; nor are they an operand.
  if (c == hdf5::Sha256Check::not_whole)
    throw Error(place(f, r.dataset) + ": stores part of the tensor (stored='" +
                hdf5::read_integrity(f, r.dataset).stored.substr(0, 80) + "'); the oracle's " + std::string(role) +
                " is a whole tensor, checked against its sha256_full");
  if (c == hdf5::Sha256Check::mismatch || (c == hdf5::Sha256Check::not_recorded && hdf5::hashes_every_tensor(f)))
    r.hash_checked = hdf5::verify_sha256_full(f, r.dataset, stored, bytes);
  return r;
}

}  // namespace psi::oracle
