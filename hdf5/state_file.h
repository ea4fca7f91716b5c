#pragma once
// Writing and reading psi-h5/1 files (see hdf5/schema.h and docs/file-formats.md).
// StateWriter computes every tensor's check values itself and only makes the file visible
// under its final name at commit(); StateReader opens psi files and the official recordings
// and refuses anything else with a one-line error naming the file and the versions.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "hdf5/h5.h"
#include "hdf5/schema.h"

namespace psi::hdf5 {

// The run a file comes from; written as root attributes.
struct RunInfo {
  std::string experiment;    // e.g. "block_small_fidelity"
  std::string model_config;  // a config name ("tiny") or its JSON
  std::string backend;       // "cpu", "cuda", ...
  std::string device_name;   // e.g. "NVIDIA H200" or the CPU model
  std::uint64_t seed = 0;    // SynthInit global seed G (at most 2^63-1: stored as int64)
  std::string command_line;  // empty: the writer records this process's command line
  std::string start_time_utc;  // empty: the writer records when it was created
  // Filled by StateReader; the writer always writes its own values.
  std::string end_time_utc;
  std::string psi_version;
  std::string psi_git_revision;
};

// What the writer cannot compute about a tensor.
struct TensorMeta {
  std::string variant;          // required: "dense", "baseline", "modified", "input", ...
  std::string shape_semantics;  // e.g. "[1, tokens, channels] video self-attention output"
  std::string synthinit_name;   // written only when not empty
  hdf5::Attrs extra;              // further attributes, e.g. spec_probe_name
};

class StateWriter {
 public:
  // Starts a file under a temporary name beside `final_path`.
  StateWriter(const std::filesystem::path& final_path, RunInfo run);

  // Writes a whole tensor with dtype, full_shape, stored='full', shape_semantics, variant,
  // sha256_full, sum_f64, sumsq_f64, absmax, nonfinite_count and the meta's extras.
  // T is Bf16, float or double.
  template <class T>
  void write(const std::string& dataset, const Tensor<T>& t, const TensorMeta& meta);

  // Stores rows [first, last] of `axis` only (as the recordings do for big tensors); the
  // check values and full_shape still describe the whole tensor.
  template <class T>
  void write_rows(const std::string& dataset, const Tensor<T>& full, int axis, std::int64_t first,
                  std::int64_t last, const TensorMeta& meta);

  // UTF-8 text (e.g. JSON) as a uint8 dataset with dtype='utf8'.
  void write_text(const std::string& dataset, const std::string& utf8, const hdf5::Attrs& a = {});
  // JSON text: write_text with content='application/json' (hdf5::is_json_text).
  void write_json(const std::string& dataset, const std::string& json, hdf5::Attrs a = {});
  // Attributes on a group (created if needed) or on "/" (extras beside the schema's own).
  void set_attrs(const std::string& object, const hdf5::Attrs& a);

  // Writes the root attributes (end time now) and renames the file into place. Without it,
  // destroying the writer (an exception, an early return) leaves no file behind.
  void commit();

  const std::filesystem::path& path() const { return file_.path(); }
  std::filesystem::path temp_path() const { return file_.temp_path(); }
  // Keeps what was written so far under `partial` (an interrupted run); nothing appears under
  // the final name.
  // It is a psi-h5/1 file like any other (root attributes written, end time now) with root
  // attribute `partial`.
  void abandon_to(const std::filesystem::path& partial);
  // Marks the file as holding part of a run only (root attribute `partial`, saying why), as a
  // merge of partial shards does.
  void mark_partial(const std::string& why);
  // The file being written, for copying objects in (psi merge).
  hdf5::File& file() { return file_; }

 private:
  void write_root_attrs();
  template <class T>
  void write_dataset(const std::string& dataset, const Tensor<T>& stored, const Shape& full_shape,
                     const StoredRegion& region, const TensorStats& stats, const TensorMeta& meta);

  hdf5::File file_;
  RunInfo run_;
};

// The root attribute `partial` of a file that holds part of a run only (an interrupted run, a
// merge of such files): its text says why; empty for any other file.
std::string partial_marker(const hdf5::File& f);

// The root attribute `unverified` of a file whose content rests on data psi read unchecked
// (--allow-unverified, hdf5/unverified.h): what that data was; empty for any other file.
std::string unverified_marker(const hdf5::File& f);

enum class FileKind { psi, recording };

// One dataset's description as the reader sees it.
struct TensorRecord {
  hdf5::DatasetInfo info;  // path, stored shape, element kind
  Shape full_shape;      // from full_shape, else the stored shape
  StoredRegion stored;
  bool has_stats = false;  // sha256_full and the sums are present
  TensorStats stats;
  std::string variant;  // psi files; empty in recordings
  std::string shape_semantics;
  std::string synthinit_name;
};

class StateReader {
 public:
  // Opens a psi-h5/1 file or an official recording (root format='record_official/1'). A
  // missing file, a non-HDF5 file, another schema version or a file with neither attribute
  // throws a one-line psi::Error naming the file and the versions.
  explicit StateReader(const std::filesystem::path& p);

  FileKind kind() const { return kind_; }
  const std::string& format() const { return format_; }  // "psi-h5/1" or "record_official/1"
  const std::filesystem::path& path() const { return file_.path(); }
  const hdf5::File& file() const { return file_; }

  RunInfo run_info() const;  // psi files only (a recording throws)
  hdf5::Attrs root_attrs() const { return file_.attrs("/"); }

  std::vector<hdf5::DatasetInfo> datasets(const std::string& under = "/") const {
    return file_.list_datasets(under);
  }
  TensorRecord record(const std::string& dataset) const;

  Bf16Tensor read_bf16(const std::string& dataset) const { return file_.read_bf16(dataset); }
  F32Tensor read_f32(const std::string& dataset) const { return file_.read_f32(dataset); }
  F64Tensor read_f64(const std::string& dataset) const { return file_.read_f64(dataset); }
  std::string read_text(const std::string& dataset) const { return file_.read_text(dataset); }

 private:
  hdf5::File file_;
  FileKind kind_ = FileKind::psi;
  std::string format_;
};

}  // namespace psi::hdf5
