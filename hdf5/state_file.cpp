#include "hdf5/state_file.h"

#include <algorithm>
#include <limits>
#include <type_traits>

#include "engine/error.h"
#include "hdf5/unverified.h"
#include "psi_version.h"

namespace psi::hdf5 {

namespace {

// Root attribute names of a psi-h5/1 file.
namespace root {
constexpr const char* schema = "schema";
constexpr const char* format = "format";  // the recordings' equivalent of `schema`
constexpr const char* psi_version = "psi_version";
constexpr const char* psi_git_revision = "psi_git_revision";
constexpr const char* experiment = "experiment";
constexpr const char* model_config = "model_config";
constexpr const char* backend = "backend";
constexpr const char* device_name = "device_name";
constexpr const char* seed = "seed";
constexpr const char* start_time_utc = "start_time_utc";
constexpr const char* end_time_utc = "end_time_utc";
constexpr const char* command_line = "command_line";
constexpr const char* bf16_storage = "bf16_storage";
constexpr const char* partial = "partial";
constexpr const char* unverified = "unverified";
}  // namespace root

template <class T>
void write_typed(hdf5::File& f, const std::string& ds, const Tensor<T>& t, const hdf5::Attrs& a) {
  if constexpr (std::is_same_v<T, Bf16>) f.write_bf16(ds, t, a);
  else if constexpr (std::is_same_v<T, float>) f.write_f32(ds, t, a);
  else f.write_f64(ds, t, a);
}

// Rows [first, last] of `axis` of a row-major tensor.
template <class T>
Tensor<T> slice_rows(const Tensor<T>& t, int axis, std::int64_t first, std::int64_t last) {
  std::int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= t.shape[i];
  for (std::size_t i = axis + 1; i < t.shape.size(); ++i) inner *= t.shape[i];
  const std::int64_t rows = t.shape[axis], kept = last - first + 1;
  Shape s = t.shape;
  s[axis] = kept;
  Tensor<T> out(s);
  for (std::int64_t o = 0; o < outer; ++o)
    std::copy_n(t.data.begin() + (o * rows + first) * inner, kept * inner,
                out.data.begin() + o * kept * inner);
  return out;
}

std::string string_or_empty(const hdf5::File& f, const std::string& obj, const char* name) {
  auto v = f.attr(obj, name);
  if (v && std::holds_alternative<std::string>(*v)) return std::get<std::string>(*v);
  return "";
}

std::optional<double> number(const hdf5::File& f, const std::string& obj, const char* name) {
  auto v = f.attr(obj, name);
  if (!v) return std::nullopt;
  if (auto* d = std::get_if<double>(&*v)) return *d;
  if (auto* i = std::get_if<std::int64_t>(&*v)) return double(*i);
  return std::nullopt;
}

}  // namespace

StateWriter::StateWriter(const std::filesystem::path& final_path, RunInfo run)
    : file_(hdf5::File::create(final_path)), run_(std::move(run)) {
  if (run_.seed > std::uint64_t(std::numeric_limits<std::int64_t>::max()))
    throw Error(final_path.string() + ": seed " + std::to_string(run_.seed) +
                " does not fit the int64 'seed' attribute");
  if (run_.start_time_utc.empty()) run_.start_time_utc = utc_now_iso8601();
  if (run_.command_line.empty()) run_.command_line = current_command_line();
}

template <class T>
void StateWriter::write_dataset(const std::string& dataset, const Tensor<T>& stored,
                                const Shape& full_shape, const StoredRegion& region,
                                const TensorStats& stats, const TensorMeta& meta) {
  if (meta.variant.empty())
    throw Error(path().string() + ":" + dataset + ": no variant given (dense, official-h200, baseline, modified, input, ...)",
                Exit::run_failed);
  hdf5::Attrs a = meta.extra;
  a[attr::full_shape] = shape_json(full_shape);
  a[attr::stored] = stored_name(region);
  a[attr::shape_semantics] = meta.shape_semantics;
  a[attr::variant] = meta.variant;
  if (!meta.synthinit_name.empty()) a[attr::synthinit_name] = meta.synthinit_name;
  a[attr::sha256_full] = stats.sha256_full;
  a[attr::sum_f64] = stats.sum_f64;
  a[attr::sumsq_f64] = stats.sumsq_f64;
  a[attr::absmax] = stats.absmax;
  a[attr::nonfinite_count] = stats.nonfinite_count;
  write_typed(file_, dataset, stored, a);
}

template <class T>
void StateWriter::write(const std::string& dataset, const Tensor<T>& t, const TensorMeta& meta) {
  write_dataset(dataset, t, t.shape, StoredRegion{}, tensor_stats(t), meta);
}

template <class T>
void StateWriter::write_rows(const std::string& dataset, const Tensor<T>& full, int axis,
                             std::int64_t first, std::int64_t last, const TensorMeta& meta) {
  if (axis < 0 || axis >= int(full.shape.size()) || first < 0 || last < first || last >= full.shape[axis])
    throw Error(path().string() + ":" + dataset + ": rows " + std::to_string(first) + ".." +
                    std::to_string(last) + " of axis " + std::to_string(axis) + " are outside " +
                    shape_str(full.shape),
                Exit::run_failed);
  StoredRegion r{StoredRegion::Kind::rows, axis, first, last};
  write_dataset(dataset, slice_rows(full, axis, first, last), full.shape, r, tensor_stats(full), meta);
}

void StateWriter::write_json(const std::string& dataset, const std::string& json, hdf5::Attrs a) {
  a.insert_or_assign(attr::content, std::string(kJsonContent));
  write_text(dataset, json, a);
}

void StateWriter::write_text(const std::string& dataset, const std::string& utf8, const hdf5::Attrs& a) {
  file_.write_text(dataset, utf8, a);
}

void StateWriter::set_attrs(const std::string& object, const hdf5::Attrs& a) { file_.set_attrs(object, a); }

void StateWriter::write_root_attrs() {
  file_.set_attrs("/", {
      {root::schema, std::string(kSchema)},
      {root::psi_version, std::string(PSI_VERSION)},
      {root::psi_git_revision, std::string(PSI_GIT_REVISION)},
      {root::experiment, run_.experiment},
      {root::model_config, run_.model_config},
      {root::backend, run_.backend},
      {root::device_name, run_.device_name},
      {root::seed, std::int64_t(run_.seed)},
      {root::start_time_utc, run_.start_time_utc},
      {root::end_time_utc, utc_now_iso8601()},
      {root::command_line, run_.command_line},
      {root::bf16_storage, std::string("bfloat16 tensors are uint16 datasets of the raw bits with "
                                       "attribute dtype='bfloat16'; sha256_full is over the "
                                       "little-endian bytes of the full row-major tensor")},
  });
  // What this file holds rests on data read unchecked (--allow-unverified): said in the file too.
  if (!unverified_data().empty()) file_.set_attr("/", root::unverified, unverified_summary(64));
}

void StateWriter::commit() {
  write_root_attrs();
  file_.commit();
}

void StateWriter::abandon_to(const std::filesystem::path& partial) {
  write_root_attrs();
  mark_partial("interrupted run: holds only what was written before the interrupt");
  file_.abandon_to(partial);
}

void StateWriter::mark_partial(const std::string& why) { file_.set_attr("/", root::partial, why); }

std::string unverified_marker(const hdf5::File& f) {
  if (!f.attr("/", root::unverified)) return "";
  const std::string what = string_or_empty(f, "/", root::unverified);
  return what.empty() ? "marked unverified" : what;
}

std::string partial_marker(const hdf5::File& f) {
  if (!f.attr("/", root::partial)) return "";
  // Any value marks the file; only a text can say why.
  const std::string why = string_or_empty(f, "/", root::partial);
  return why.empty() ? "marked partial" : why;
}

template void StateWriter::write(const std::string&, const Bf16Tensor&, const TensorMeta&);
template void StateWriter::write(const std::string&, const F32Tensor&, const TensorMeta&);
template void StateWriter::write(const std::string&, const F64Tensor&, const TensorMeta&);
template void StateWriter::write_rows(const std::string&, const Bf16Tensor&, int, std::int64_t,
                                      std::int64_t, const TensorMeta&);
template void StateWriter::write_rows(const std::string&, const F32Tensor&, int, std::int64_t,
                                      std::int64_t, const TensorMeta&);
template void StateWriter::write_rows(const std::string&, const F64Tensor&, int, std::int64_t,
                                      std::int64_t, const TensorMeta&);

StateReader::StateReader(const std::filesystem::path& p) : file_(hdf5::File::open_read(p)) {
  const std::string name = p.string();
  auto schema = file_.attr("/", root::schema);
  if (schema) {
    const auto* s = std::get_if<std::string>(&*schema);
    if (!s || *s != kSchema)
      throw Error(name + ": schema '" + (s ? *s : std::string("(not a string)")) +
                  "' is not supported; this psi reads " + std::string(kSchema) + " files and " +
                  std::string(kRecordingFormat) + " recordings");
    kind_ = FileKind::psi;
    format_ = *s;
    return;
  }
  std::string format = string_or_empty(file_, "/", root::format);
  if (format == kRecordingFormat) {
    kind_ = FileKind::recording;
    format_ = format;
    return;
  }
  if (!format.empty())
    throw Error(name + ": recording format '" + format + "' is not supported; this psi reads " +
                std::string(kRecordingFormat) + " recordings and " + std::string(kSchema) + " files");
  throw Error(name + ": not a psi file: no root attribute 'schema' (expected " + std::string(kSchema) +
              ") and no recording 'format' (expected " + std::string(kRecordingFormat) + ")");
}

RunInfo StateReader::run_info() const {
  if (kind_ != FileKind::psi)
    throw Error(path().string() + ": a " + format_ + " recording carries no psi run information");
  RunInfo r;
  r.experiment = string_or_empty(file_, "/", root::experiment);
  r.model_config = string_or_empty(file_, "/", root::model_config);
  r.backend = string_or_empty(file_, "/", root::backend);
  r.device_name = string_or_empty(file_, "/", root::device_name);
  if (auto v = file_.attr("/", root::seed); v && std::holds_alternative<std::int64_t>(*v))
    r.seed = std::uint64_t(std::get<std::int64_t>(*v));
  r.command_line = string_or_empty(file_, "/", root::command_line);
  r.start_time_utc = string_or_empty(file_, "/", root::start_time_utc);
  r.end_time_utc = string_or_empty(file_, "/", root::end_time_utc);
  r.psi_version = string_or_empty(file_, "/", root::psi_version);
  r.psi_git_revision = string_or_empty(file_, "/", root::psi_git_revision);
  return r;
}

TensorRecord StateReader::record(const std::string& dataset) const {
  const std::string where = path().string() + ":" + dataset;
  TensorRecord r;
  r.info = file_.info(dataset);
  std::string fs = string_or_empty(file_, dataset, attr::full_shape);
  r.full_shape = fs.empty() ? r.info.shape : parse_shape_json(fs, where);
  const Integrity integrity = read_integrity(file_, dataset);
  r.stored = parse_stored(integrity.stored, where);
  Shape expect = stored_shape(r.full_shape, r.stored);
  if (r.stored.kind == StoredRegion::Kind::none ? numel(r.info.shape) != 0 : expect != r.info.shape)
    throw Error(where + ": stored shape " + shape_str(r.info.shape) + " does not match stored='" +
                stored_name(r.stored) + "' of full_shape " + shape_str(r.full_shape));
  r.stats.sha256_full = integrity.sha256_full;
  auto sum = number(file_, dataset, attr::sum_f64), sumsq = number(file_, dataset, attr::sumsq_f64),
       absmax = number(file_, dataset, attr::absmax), nonfinite = number(file_, dataset, attr::nonfinite_count);
  r.has_stats = !r.stats.sha256_full.empty() && sum && sumsq && absmax && nonfinite;
  if (r.has_stats) {
    r.stats.sum_f64 = *sum;
    r.stats.sumsq_f64 = *sumsq;
    r.stats.absmax = *absmax;
    r.stats.nonfinite_count = std::int64_t(*nonfinite);
  }
  r.variant = string_or_empty(file_, dataset, attr::variant);
  r.shape_semantics = string_or_empty(file_, dataset, attr::shape_semantics);
  r.synthinit_name = string_or_empty(file_, dataset, attr::synthinit_name);
  return r;
}

}  // namespace psi::hdf5
