#pragma once
// One operand of the oracle read from a user's file in any format psi reads
// (hdf5/tensor_file.h), as BF16 by the oracle's contract: BF16 as stored (psi's dtype attribute,
// safetensors' BF16), a 16-bit unsigned array taken as BF16 bits (NumPy and h5py have no BF16), or
// a float32/float64 array every value of which is exactly a BF16 value (else refused, naming the
// first that is not). An output y stored as float32 is the one exception: it is rounded to the
// nearest BF16 (ties to even) and judged as that, and the reading says so.
#include <string>
#include <string_view>

#include "engine/tensor.h"
#include "hdf5/h5.h"

namespace psi::oracle {

// FILE[:NAME] as given on the command line: the whole text when it names an existing file (so a
// path holding ':' still works), else split at the last ':'. `name` empty: the file's one tensor.
struct TensorRef {
  std::string file;
  std::string name;
};
TensorRef parse_tensor_ref(const std::string& text);

std::string dataset_path(const std::string& name);  // "x" -> "/x"

struct ReadOperand {
  Bf16Tensor t;
  std::string dataset;  // the dataset path it was read from
  std::string stored;   // how it was stored and taken ("bf16", "uint16 taken as BF16 bits", ...)
  std::string sha256;   // of its elements as stored (little-endian), whatever the file recorded
  bool hash_checked = false;  // the file recorded a sha256_full and the data matched it
};

// `role` ("x", "W", "b", "y") names the operand in messages. `name` empty takes the file's one
// tensor (refused, listing them, when it holds several). A tensor with a sha256_full must match
// it (hdf5::verify_sha256_full); one without is unverifiable in a file that hashes every tensor
// (hdf5::hashes_every_tensor), and in a user's file is read as it is.
ReadOperand read_operand(const hdf5::File& f, const std::string& name, std::string_view role);

}  // namespace psi::oracle
