#include "hdf5/seal.h"

#include "engine/error.h"
#include "engine/interrupt.h"
#include "engine/sha256.h"
#include "hdf5/schema.h"
#include "hdf5/tensor_file.h"
#include "hdf5/unverified.h"

namespace psi::hdf5 {

namespace {

// The dataset's elements as stored, little-endian, and the kind to write them as.
struct Elements {
  ElemKind kind = ElemKind::other;
  std::vector<std::uint8_t> bytes;
};

template <class V>
std::vector<std::uint8_t> bytes_of(const V& v) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(v.data());
  return {p, p + v.size() * sizeof(v[0])};
}

Elements read_elements(const File& f, const DatasetInfo& di, bool as_bf16) {
  switch (di.kind) {
    case ElemKind::bf16: return {ElemKind::bf16, bytes_of(f.read_bf16(di.path).data)};
    case ElemKind::u16:
      return as_bf16 ? Elements{ElemKind::bf16, bytes_of(f.read_bf16_bits(di.path).data)}
                     : Elements{ElemKind::u16, bytes_of(f.read_u16(di.path))};
    case ElemKind::f32: return {ElemKind::f32, bytes_of(f.read_f32(di.path).data)};
    case ElemKind::f64: return {ElemKind::f64, bytes_of(f.read_f64(di.path).data)};
    case ElemKind::u8: return {ElemKind::u8, f.read_u8(di.path)};
    case ElemKind::i64: return {ElemKind::i64, bytes_of(f.read_i64(di.path))};
    case ElemKind::other: break;
  }
  throw Error(f.path().string() + ":" + di.path + ": an element type psi does not read (not BF16, float32, float64, "
              "uint8, uint16 or int64), so it cannot be sealed");
}

// The reading every reader of tensors does: a recorded hash must match, a missing one is refused
// only where the file hashes every tensor.
void check_integrity(const File& f, const DatasetInfo& di, const std::vector<std::uint8_t>& bytes) {
  const Sha256Check c = check_sha256_full(f, di.path, bytes.data(), bytes.size());
  if (c == Sha256Check::mismatch || (c == Sha256Check::not_recorded && hashes_every_tensor(f)))
    verify_sha256_full(f, di.path, bytes.data(), bytes.size());
}

std::string where_from(const File& f, const DatasetInfo& di) {
  std::string s = f.path().string() + ":" + di.path;
  for (const char* a : {"safetensors_dtype", "npy_descr"})
    if (auto v = f.attr(di.path, a); v && std::holds_alternative<std::string>(*v))
      s += " (" + std::string(a) + " " + std::get<std::string>(*v) + ")";
  return s;
}

}  // namespace

std::vector<SealedTensor> seal(const std::filesystem::path& in, const std::filesystem::path& out, bool as_bf16) {
  const File src = open_tensor_file(in);
  File dst = File::create(out);
  std::vector<SealedTensor> sealed;
  for (const DatasetInfo& di : src.list_datasets()) {
    check_interrupt("psi seal " + in.string());
    if (const std::string p = dtype_label_problem(di); !p.empty())
      throw Error(src.path().string() + ":" + di.path + ": " + p);
    if (is_text_dataset(src, di)) {
      Attrs a{{"sealed_from", where_from(src, di)}};
      // JSON text stays declared JSON: psi compare reads it field by field only then.
      if (is_json_text(src, di)) a[attr::content] = std::string(kJsonContent);
      dst.write_text(di.path, src.read_text(di.path), a);
      sealed.push_back({di.path, "utf8", ""});
      continue;
    }
    const Elements e = read_elements(src, di, as_bf16);
    check_integrity(src, di, e.bytes);
    const std::string sha = sha256_hex(e.bytes.data(), e.bytes.size());
    dst.write_elements(di.path, e.kind, di.shape, e.bytes.data(),
                       {{attr::sha256_full, sha}, {"sealed_from", where_from(src, di)}});
    sealed.push_back({di.path, std::string(kind_name(e.kind)), sha});
  }
  dst.set_attr("/", "schema", std::string(kSealSchema));
  dst.set_attr("/", "sealed_from", in.string());
  dst.set_attr("/", "created", utc_now_iso8601());
  dst.commit();
  return sealed;
}

}  // namespace psi::hdf5
