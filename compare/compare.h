#pragma once
// `psi compare`: dataset-by-dataset comparison of two tensor files (psi-h5/1 files, the
// official recordings, plain files a user made with h5py, NumPy .npy and safetensors files, read
// by hdf5/tensor_file.h). BF16 is recognised by the attribute dtype='bfloat16' on a uint16
// dataset whichever program wrote it (or every uint16 dataset with --as bf16); datasets that
// store only some rows (attribute `stored`) are compared on the rows both files hold. compare.cpp
// walks the two files; element_diff.h compares a tensor, json_diff.h a JSON text, and
// report/compare_table.h shows the result.
//
// Every differing element is counted by kind (DifferenceKinds). The distance (max ULP, relative
// L2, sign flips) is taken over the pairs whose two elements are both finite, so that one NaN
// does not turn a tensor's summary into `nan`; the pairs with a NaN or an Inf on either side are
// counted apart (NonFinitePairs), with how many of them match.
//
// --by-value (CompareOptions::by_value, compare/by_value.h) compares two tensors of different
// element types by value instead of refusing them: each element converted exactly to a double,
// two elements equal when their doubles are (+0 and -0 are not: a sign-of-zero difference) or
// when both are NaN, whatever their payloads (a NaN payload has no value to compare); ULPs are
// those of the coarser type. Tensors of one element type are compared bitwise with or without it.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "compare/comparison.h"
#include "hdf5/h5.h"

namespace psi::compare {

struct CompareReport {
  std::string file_a, file_b;
  std::string format_a, format_b;  // root schema / format attribute, or "plain HDF5"
  std::string partial_a, partial_b;  // the `partial` marker of a partial file; empty otherwise
  bool strict = false;
  std::int64_t differences = 0;  // CompareOptions::differences, for the views
  std::vector<DatasetComparison> datasets;

  std::int64_t count(CompareStatus s) const;
  // 0: everything compared is bitwise equal; 1: something differs (elements or full shape),
  // nothing was compared, or (strict) a dataset is in one file only; 2: a shared dataset has a
  // dtype mismatch, cannot be read, or its data does not match its sha256_full; 4 it would be 0
  // but a dataset was compared unverified. A bitwise-equality check never passes on nothing.
  int exit_code() const;
  // One line per bad-input dataset, naming both files and datasets.
  std::vector<std::string> errors() const;
};

// Opens both files (a missing or non-HDF5 file, or a partial one without allow_partial, throws a
// psi::Error naming it) and compares every dataset they share.
CompareReport compare_files(const std::filesystem::path& a, const std::filesystem::path& b,
                            const CompareOptions& opt = {});
// The same on two files already open (an image in memory holding a caller's arrays, File::in_memory,
// as well); each is named as its path() says.
CompareReport compare_opened(const hdf5::File& a, const hdf5::File& b, const CompareOptions& opt = {});

// Compares one dataset of `a` with one of `b` (possibly the same file, other paths).
DatasetComparison compare_datasets(const hdf5::File& a, const std::string& path_a, const hdf5::File& b,
                                   const std::string& path_b, const CompareOptions& opt = {});

}  // namespace psi::compare
