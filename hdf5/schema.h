#pragma once
// The psi-h5/1 schema: names of the attributes psi writes on every tensor and on the root of
// every file, the per-tensor check values (SHA-256, sums, absmax, non-finite count), and the
// `stored` convention shared with the official recordings. docs/file-formats.md is the
// user-facing description of the same thing.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "engine/tensor.h"
#include "hdf5/h5.h"

namespace psi::hdf5 {

// Root attribute `schema` of every file psi writes; a reader refuses any other value.
inline constexpr std::string_view kSchema = "psi-h5/1";
// Root attribute `format` of the official recordings in shared/reference/ (they have no
// `schema`); psi reads them as "recording" files.
inline constexpr std::string_view kRecordingFormat = "record_official/1";

// Per-dataset attribute names (the recordings use the same ones, so one tool reads both).
namespace attr {
inline constexpr const char* dtype = "dtype";
inline constexpr const char* full_shape = "full_shape";
inline constexpr const char* shape_semantics = "shape_semantics";
inline constexpr const char* sha256_full = "sha256_full";
inline constexpr const char* sum_f64 = "sum_f64";
inline constexpr const char* sumsq_f64 = "sumsq_f64";
inline constexpr const char* absmax = "absmax";
inline constexpr const char* nonfinite_count = "nonfinite_count";
inline constexpr const char* stored = "stored";
inline constexpr const char* variant = "variant";
inline constexpr const char* synthinit_name = "synthinit_name";
}  // namespace attr

// Check values of a whole tensor. Sums run in float64 in flat row-major order (one fixed
// order, so every machine gets the same bits) over the finite elements only; absmax is over
// the finite elements; nonfinite_count counts NaN and +-Inf.
struct TensorStats {
  std::string sha256_full;  // of the raw little-endian bytes
  double sum_f64 = 0;
  double sumsq_f64 = 0;
  double absmax = 0;
  std::int64_t nonfinite_count = 0;
};

TensorStats tensor_stats(const Bf16Tensor& t);
TensorStats tensor_stats(const F32Tensor& t);
TensorStats tensor_stats(const F64Tensor& t);

// A dataset's integrity attributes, read by one rule in every command (compare, probe, oracle,
// report, merge): `sha256_full` absent means the dataset records no hash; present, it must be a
// scalar string of 64 hexadecimal digits. `stored` absent means the whole tensor; present, it
// must be a scalar string (its form is parse_stored's). An integrity attribute of any other
// type, shape or form is a refusal (psi::Error, exit 2) naming it, never a skipped check.
struct Integrity {
  std::string sha256_full;  // lowercase; empty: none recorded
  std::string stored;       // "full" when absent
};
Integrity read_integrity(const h5::File& f, const std::string& dataset);

// A dataset's data checked against its `sha256_full` attribute (read_integrity). The hash is over the whole
// tensor, so only a dataset that stores all of it (stored='full' or no `stored`) can be checked.
enum class Sha256Check { match, mismatch, not_recorded, not_whole };
// `data`/`bytes`: the dataset's elements as read, little-endian (the host order psi runs on).
Sha256Check check_sha256_full(const h5::File& f, const std::string& dataset, const void* data, std::size_t bytes);
// The one-line message for a mismatch: "<file>:<dataset>: data does not match its sha256_full ...".
std::string sha256_mismatch_message(const h5::File& f, const std::string& dataset);
// check_sha256_full for readers that must not go on with corrupt data: a mismatch throws a
// psi::Error (bad input) with sha256_mismatch_message.
void verify_sha256_full(const h5::File& f, const std::string& dataset, const void* data, std::size_t bytes);
template <class T>
void verify_sha256_full(const h5::File& f, const std::string& dataset, const Tensor<T>& t) {
  verify_sha256_full(f, dataset, t.ptr(), t.bytes());
}

// Which part of the full tensor a dataset holds, from its `stored` attribute: "full" (or no
// attribute), "rows_<first>_to_<last>_of_axis_<k>" (inclusive row range of axis k), or
// "none" (a zero-size dataset; only the check values describe the tensor).
struct StoredRegion {
  enum class Kind { full, rows, none };
  Kind kind = Kind::full;
  int axis = 0;
  std::int64_t first = 0;  // rows [first, last] of `axis`
  std::int64_t last = 0;
};

// Parses a `stored` value; an unknown form throws a psi::Error naming `where`.
StoredRegion parse_stored(std::string_view stored, const std::string& where);
std::string stored_name(const StoredRegion& r);
// The shape a dataset with full shape `full` and region `r` has on disk.
Shape stored_shape(const Shape& full, const StoredRegion& r);

// full_shape as JSON ("[1, 616, 512]") and back; a malformed value throws naming `where`.
std::string shape_json(const Shape& s);
Shape parse_shape_json(std::string_view json, const std::string& where);

// The current UTC time as ISO-8601 with seconds, e.g. "2026-11-29T22:40:19Z".
std::string utc_now_iso8601();

// This process's command line, arguments shell-quoted where needed (from /proc/self/cmdline;
// empty where that is unavailable).
std::string current_command_line();

}  // namespace psi::hdf5
