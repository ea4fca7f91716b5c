#pragma once
// The operands of one projection y = x W^T + b (x [..., K], W [out, in], b [out], all BF16),
// loaded either from tensors of files in any format psi reads, each named FILE[:NAME]
// (oracle/operand_read.h: the element types taken, the integrity rule), or from a recorded probe
// group, whose weight and bias are regenerated with SynthInit from the group's weights_json and
// checked against its SHA-256 values.
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include <vector>

#include "engine/tensor.h"
#include "hdf5/h5.h"
#include "oracle/operand_read.h"

namespace psi::oracle {

// What was read for one operand, so that a verdict names the bytes it rests on.
struct OperandRecord {
  std::string role;  // x, W, b, y
  std::string file, dataset, stored, sha256;
  bool hash_checked = false;
};

struct OperandSource {
  std::string file;    // the one file all operands came from; empty when they came from several
  std::string probe;   // the probe group, empty when the operands are plain datasets
  // Dataset paths (file:path when the operands came from several files), or for SynthInit
  // tensors their names; b empty = no bias.
  std::string x, w, b;
  bool w_synthinit = false, b_synthinit = false;
  bool w_transposed = false;  // W was stored [in, out] (--w-layout in,out)
  std::int64_t seed = 0;  // SynthInit global seed (probe mode)
  std::vector<OperandRecord> read;  // dataset mode: every operand read, y included
};

struct LinearProblem {
  OperandSource source;
  Shape x_shape;  // as stored: [..., K]
  Bf16Tensor x;   // viewed as [rows, K]
  Bf16Tensor w;   // [N, K]
  std::optional<Bf16Tensor> b;  // [N]
  std::int64_t rows = 0, K = 0, N = 0;

  std::span<const Bf16> x_row(std::int64_t r) const {
    return std::span<const Bf16>(x.data).subspan(std::size_t(r * K), std::size_t(K));
  }
  std::span<const Bf16> w_row(std::int64_t c) const {
    return std::span<const Bf16>(w.data).subspan(std::size_t(c * K), std::size_t(K));
  }
  std::optional<Bf16> bias(std::int64_t c) const {
    return b ? std::optional<Bf16>(b->data[std::size_t(c)]) : std::nullopt;
  }
  std::span<const Bf16> bias_span() const { return b ? std::span<const Bf16>(b->data) : std::span<const Bf16>(); }
};

enum class WLayout { out_in, in_out };

struct OperandRefs {
  TensorRef x, w, b, y;  // b.file or y.file empty: none
  WLayout w_layout = WLayout::out_in;
};

struct LoadedOperands {
  LinearProblem problem;
  std::optional<Bf16Tensor> y;  // [rows, N], when y was named
};

// Each file is opened once (hdf5::open_tensor_file); W stored [in, out] is transposed.
LoadedOperands load_operands(const OperandRefs& in);
// The same from tensors already in memory (W stored [out, in]), with their shapes checked as
// load_operands checks them; each operand is named in messages as `name` says. The source is
// left for the caller to fill.
struct NamedOperand {
  std::string name;
  Bf16Tensor t;
};
LoadedOperands operands_from(NamedOperand x, NamedOperand w, std::optional<NamedOperand> b,
                             std::optional<NamedOperand> y);

LinearProblem load_probe(const hdf5::File& f, const std::string& probe);

// A recorded output [..., N] whose leading dimensions hold `p.rows` rows.
Bf16Tensor load_output(const hdf5::File& f, const std::string& dataset, const LinearProblem& p);

struct OutputChoice {
  std::string dataset;
  std::string reason;
};

// The probe's recorded projection output. `requested` (non-empty) names it; otherwise the
// candidates are the group's direct BF16 datasets other than x whose shape is x's leading
// dimensions followed by N. One candidate is taken as is; among several, the direct projection
// is the one whose first row lies within 1 BF16 ULP of the correctly rounded exact projection
// in at least 99% of its elements (an activation applied after the projection does not), and
// exactly one may qualify.
OutputChoice choose_probe_output(const hdf5::File& f, const LinearProblem& p, const std::string& requested);

// The test that tells the projection's output from another tensor of its shape, in one place:
// of y's first row, how many elements lie within 1 BF16 ULP of the correctly rounded exact
// projection's (`exact_row0`, from projection_row0), and whether that is at least 99 % of them.
struct Row0Match {
  std::int64_t close = 0;
  bool is_projection = false;
};
Bf16Tensor projection_row0(const LinearProblem& p);
Row0Match match_row0(const LinearProblem& p, const Bf16Tensor& y, const Bf16Tensor& exact_row0);

}  // namespace psi::oracle
