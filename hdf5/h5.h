#pragma once
// A thin RAII layer over the HDF5 C API: open/create files, read and write tensors and
// attributes with errors that name the file and the dataset. BF16 is stored as psi and the
// recordings store it: a uint16 dataset of raw bits with attribute dtype='bfloat16'.
#include <hdf5.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "engine/tensor.h"
#include "hdf5/h5_handle.h"
#include "outputs/pending_output.h"

namespace psi::hdf5 {

using AttrValue = std::variant<std::string, std::int64_t, double>;
using Attrs = std::map<std::string, AttrValue>;

// The most dimensions an HDF5 dataspace has (H5S_MAX_RANK): writing more is refused up front.
inline constexpr int kMaxRank = H5S_MAX_RANK;

enum class ElemKind { bf16, f32, f64, u8, u16, i64, other };

struct DatasetInfo {
  std::string path;  // "/group/name"
  Shape shape;
  ElemKind kind = ElemKind::other;
  std::string dtype_attr;  // the 'dtype' attribute if any ("bfloat16", "float32", ...)
};

std::string_view kind_name(ElemKind k);

class File {
 public:
  // Opens an existing file read-only; a missing file or one that is not HDF5 throws a
  // one-line psi::Error naming it.
  static File open_read(const std::filesystem::path& p);
  // Creates a file that has no name until commit() closes it and puts it at `final_path`
  // (outputs/pending_output.h); a File destroyed without commit() leaves nothing. A `final_path`
  // the output rule refuses is refused (outputs/output_path.h).
  static File create(const std::filesystem::path& final_path);
  // An HDF5 image in memory, never on disk (libhdf5's core driver): the tensors of a file of
  // another format are written into it and read back as any file's (hdf5/tensor_file.h).
  // `shown_as` names it in every message; it cannot be committed.
  static File in_memory(const std::filesystem::path& shown_as);

  File(File&&) noexcept;
  File& operator=(File&&) noexcept;
  ~File();

  const std::filesystem::path& path() const { return final_path_; }
  // Where the file being written can be opened by name until commit() (/proc/self/fd/N).
  std::filesystem::path temp_path() const { return pending_ ? pending_->write_path() : std::filesystem::path(); }
  hid_t id() const { return file_.get(); }

  // A link at `path` (group or dataset). psi reads only what is stored in the file it opened:
  // a soft or external link anywhere on the path is refused (psi::Error, exit 2), before HDF5
  // could follow it; so is a dataset with external storage or a virtual dataset when read. The
  // one exception: an external link to a file the user named (allow_links_to).
  bool exists(const std::string& path) const;
  std::vector<DatasetInfo> list_datasets(const std::string& under = "/") const;
  DatasetInfo info(const std::string& dataset) const;

  Bf16Tensor read_bf16(const std::string& dataset) const;  // uint16 storage + dtype=bfloat16
  // Any 16-bit unsigned dataset, with or without dtype='bfloat16', its bits taken as BF16: for a
  // caller that knows from elsewhere (a user's --as bf16, the oracle's contract) that they are.
  Bf16Tensor read_bf16_bits(const std::string& dataset) const;
  F32Tensor read_f32(const std::string& dataset) const;
  F64Tensor read_f64(const std::string& dataset) const;
  std::vector<std::uint8_t> read_u8(const std::string& dataset) const;
  std::vector<std::uint16_t> read_u16(const std::string& dataset) const;  // uint16 without dtype=bfloat16
  std::vector<std::int64_t> read_i64(const std::string& dataset) const;
  std::string read_text(const std::string& dataset) const;  // a uint8 dataset holding UTF-8

  // A scalar string, integer or float attribute; absent (or of another type or shape): nullopt.
  std::optional<AttrValue> attr(const std::string& object, const std::string& name) const;
  // Whether the attribute exists at all, whatever its type and shape.
  bool has_attr(const std::string& object, const std::string& name) const;
  std::string attr_string(const std::string& object, const std::string& name) const;  // throws if absent
  Attrs attrs(const std::string& object) const;

  void write_bf16(const std::string& dataset, const Bf16Tensor& t, const Attrs& a = {});
  void write_f32(const std::string& dataset, const F32Tensor& t, const Attrs& a = {});
  void write_f64(const std::string& dataset, const F64Tensor& t, const Attrs& a = {});
  void write_text(const std::string& dataset, const std::string& text, const Attrs& a = {});
  // A dataset of `kind`'s element type (not other) from the elements' little-endian bytes; BF16
  // as uint16 bits with attribute dtype='bfloat16'.
  void write_elements(const std::string& dataset, ElemKind kind, const Shape& shape, const void* data,
                      const Attrs& a = {});
  void set_attr(const std::string& object, const std::string& name, const AttrValue& v);
  void set_attrs(const std::string& object, const Attrs& a);
  void ensure_group(const std::string& group);

  // Copies object `path` of `src` (a dataset or a group, with attributes) into this file at the
  // same path, bit for bit. A group that exists here already is merged child by child; a
  // dataset that exists here already is an error.
  void copy_from(const File& src, const std::string& path);

  void commit();  // flush, close, rename temp -> final
  // For an interrupted run: flush, close and rename the temporary file to `partial` (never the
  // final name), keeping what was written so far readable.
  void abandon_to(const std::filesystem::path& partial);

 private:
  File() = default;
  // Opens without the check in a child process (open_read's second step, and the child's first).
  static File open_unchecked(const std::filesystem::path& p);
  // Reads what psi reads of a file (attributes, layouts, small datasets' elements), errors
  // ignored: what a child does to find out whether libhdf5 survives the file. Returns why the
  // file is refused when libhdf5 cannot list what psi may ask for by name, else "".
  std::string walk_structure() const;
  void write_raw(const std::string& dataset, hid_t mem_type, hid_t file_type, const Shape& shape,
                 const void* data, const Attrs& a);
  template <class T>
  std::vector<T> read_as(const std::string& dataset, hid_t mem_type, Shape& shape,
                         ElemKind want) const;
  std::string where(const std::string& object) const;
  // Opens a dataset reached through hard links only whose elements lie in this file: a soft or
  // external link on its path, external storage or a virtual dataset is refused (exit 2).
  Handle open_dataset(const std::string& dataset) const;
  // The same for every link and dataset under `path` (a group or a dataset); returns the
  // external links under it that --allow-link-to allowed (walked too). With `open_datasets`
  // false the links alone: for a caller that opens every dataset itself next (list_datasets).
  std::vector<std::string> check_stored_here(const std::string& path, bool open_datasets = true) const;
  // exists(), counting the external links followed on the way: a bound ends chains and loops.
  bool exists(const std::string& path, int& external) const;
  // An external link is followed only to a file --allow-link-to names: psi::Error (exit 2)
  // otherwise, naming the link and its target. Whether what it names exists.
  bool check_external_link(const std::string& link, const H5L_info_t& li, int& external) const;
  // An object libhdf5 opened must lie in this file or in a file --allow-link-to names, whatever
  // names libhdf5 tried on the way to it.
  void check_file_of(hid_t object, const std::string& path) const;
  Handle open_here(const std::string& object) const;

  Handle file_;
  std::filesystem::path final_path_;
  std::optional<outputs::PendingOutput> pending_;
  bool in_memory_ = false;  // in_memory(): holds only what psi wrote, no link to another file
  bool writable_ = false;
};

// An HDF5 file whose root `schema` attribute is psi's (psi-h5/1 for reports, states and probe
// outputs, psi-synthinit/1 for psi synthinit's tensor files): every HDF5 file psi writes, as the
// output rule recognizes it (outputs/output_path.h), and so the files File::create may replace.
bool is_psi_h5(const std::filesystem::path& p);

// Silences HDF5's own error stack printing for the process: psi reports errors itself.
void quiet_errors();

// --allow-link-to FILE: external links that lead to FILE are followed (no other kind of link,
// no external storage, no virtual dataset). FILE is checked as an input is (open_read), and
// becomes one of the command's inputs for the output rule.
void allow_links_to(const std::filesystem::path& file);

}  // namespace psi::hdf5
