#pragma once
// What the HDF5 fuzz targets do with a file: everything psi reads HDF5 with. hdf5::File (open,
// list, info, attributes, typed reads), compare::compare_datasets on each dataset against itself
// (psi's parsing of full_shape and stored), hdf5::StateReader (schema, run info, tensor
// records), the experiment-report reader behind `psi report` (JSON tables in the file), the
// recording reader of the probes (probes::Recording) and `psi merge` with the file as a shard.
// psi must refuse bad input with a one-line psi::Error; any other exception escapes the fuzz
// target and counts as a crash, as does a sanitizer report.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "engine/error.h"
#include "experiments/report.h"
#include "compare/compare.h"
#include "hdf5/h5.h"
#include "hdf5/state_file.h"
#include "probes/recording.h"
#include "report/table.h"

namespace psi::fuzz {

constexpr std::size_t kMaxDatasets = 32;
constexpr std::int64_t kMaxElements = std::int64_t(1) << 20;  // the typed reads load whole datasets

// A path per process, in memory where /dev/shm exists (the file system is the slow part).
inline std::string temp_path(const std::string& stem) {
  return std::string(::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") + "/psi_fuzz_" + stem + "_" +
         std::to_string(::getpid()) + ".h5";
}

// Runs one reading step; a psi::Error is the expected refusal and must be one line.
template <class F>
void step(F&& f) {
  try {
    f();
  } catch (const psi::Error& e) {
    if (std::strchr(e.what(), '\n')) __builtin_trap();
  }
}

inline void read_datasets(const hdf5::File& f) {
  std::vector<hdf5::DatasetInfo> list;
  step([&] { list = f.list_datasets("/"); });
  if (list.size() > kMaxDatasets) list.resize(kMaxDatasets);
  step([&] { f.attrs("/"); });
  for (const auto& d : list) {
    step([&] { f.attrs(d.path); });
    if (numel(d.shape) > kMaxElements) continue;
    step([&] {
      switch (d.kind) {
        case hdf5::ElemKind::bf16: f.read_bf16(d.path); break;
        case hdf5::ElemKind::f32: f.read_f32(d.path); break;
        case hdf5::ElemKind::f64: f.read_f64(d.path); break;
        case hdf5::ElemKind::u8: f.read_text(d.path); break;
        default: break;
      }
    });
    step([&] { compare::compare_datasets(f, d.path, f, d.path); });
  }
}

inline void read_state(const std::string& p) {
  hdf5::StateReader r(p);
  if (r.kind() == hdf5::FileKind::psi) step([&] { r.run_info(); });
  std::vector<hdf5::DatasetInfo> list;
  step([&] { list = r.datasets(); });
  if (list.size() > kMaxDatasets) list.resize(kMaxDatasets);
  for (const auto& d : list) step([&] { r.record(d.path); });
}

// The file as a recording (probes/recording.h): each top-level group, each of its datasets
// as a stored output and as an input (regenerated from SynthInit when only rows are stored).
inline void read_recording(const std::string& p) {
  const hdf5::File f = hdf5::File::open_read(p);
  std::vector<hdf5::DatasetInfo> list;
  step([&] { list = f.list_datasets("/"); });
  if (list.size() > kMaxDatasets) list.resize(kMaxDatasets);
  for (const auto& d : list) {
    const std::size_t slash = d.path.find('/', 1);
    if (slash == std::string::npos) continue;
    const std::string group = d.path.substr(1, slash - 1), rel = d.path.substr(slash + 1);
    step([&] {
      probes::Recording rec(p, group);
      step([&] { rec.stored_bf16(rel); });
      step([&] { rec.input_bf16(rel); });
    });
  }
}

// psi merge on the file as its only shard (partial files allowed, so that the marker is read).
inline void merge_alone(const std::string& p) {
  const std::string out = temp_path("merged");
  step([&] { exp::merge_reports({p}, out, true); });
  std::remove(out.c_str());
}

// Every reader on the HDF5 file at `p`.
inline void read_everything(const std::string& p) {
  step([&] { read_datasets(hdf5::File::open_read(p)); });
  step([&] { read_state(p); });
  step([&] { report::render(exp::read_tables(p), report::Format::markdown); });
  step([&] { read_recording(p); });
  step([&] { merge_alone(p); });
}

}  // namespace psi::fuzz
