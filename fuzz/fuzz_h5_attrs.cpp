// libFuzzer target for psi's own parsing of HDF5 content: the bytes choose what a file holds
// (root schema/format and run attributes; datasets of psi's element types and shapes, with
// full_shape, stored, dtype and check-value attributes and JSON text), the file is written with
// hdf5::File, so libhdf5 only ever reads files it wrote itself, and every reader runs on it
// (fuzz/h5_readers.h). Attribute values are either drawn whole from the bytes or assembled in
// the forms psi parses (shape lists, rows_<a>_to_<b>_of_axis_<k>) with arbitrary numbers.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/bf16.h"
#include "fuzz/h5_readers.h"
#include "hdf5/schema.h"

namespace {

using psi::hdf5::AttrValue;

template <std::size_t N>
std::string pick(FuzzedDataProvider& in, const char* const (&choices)[N]) {
  return choices[in.ConsumeIntegralInRange<std::size_t>(0, N - 1)];
}

// A number as psi might meet it in an attribute: small, at a type boundary, or anything.
std::int64_t number(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange(0, 3)) {
    case 0: return in.ConsumeIntegralInRange<std::int64_t>(-2, 8);
    case 1: {
      const std::int64_t edges[] = {INT32_MAX, std::int64_t(INT32_MAX) + 1, UINT32_MAX, std::int64_t(UINT32_MAX) + 1,
                                    INT64_MAX, INT64_MIN, -1};
      return edges[in.ConsumeIntegralInRange<std::size_t>(0, 6)];
    }
    default: return in.ConsumeIntegral<std::int64_t>();
  }
}

std::string shape_text(FuzzedDataProvider& in) {
  if (in.ConsumeBool()) return in.ConsumeRandomLengthString(64);
  std::string s = "[";
  const int rank = in.ConsumeIntegralInRange(0, 4);
  for (int i = 0; i < rank; ++i) s += (i ? ", " : "") + std::to_string(number(in));
  return s + "]";
}

std::string stored_text(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange(0, 3)) {
    case 0: return in.ConsumeRandomLengthString(64);
    case 1: return in.ConsumeBool() ? "full" : "none";
    default:
      return "rows_" + std::to_string(number(in)) + "_to_" + std::to_string(number(in)) + "_of_axis_" +
             std::to_string(number(in));
  }
}

AttrValue any_value(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange(0, 2)) {
    case 0: return in.ConsumeRandomLengthString(64);
    case 1: return number(in);
    default: return in.ConsumeFloatingPoint<double>();
  }
}

std::string table_json(FuzzedDataProvider& in) {
  if (in.ConsumeBool()) return in.ConsumeRandomLengthString(512);
  std::string rows;
  const int n = in.ConsumeIntegralInRange(0, 3);
  for (int i = 0; i < n; ++i) rows += std::string(i ? "," : "") + "[\"" + std::to_string(number(in)) + "\"]";
  return R"([{"title":")" + in.ConsumeRandomLengthString(16) + R"(","columns":["a"],"rows":[)" + rows + "]}]";
}

void write_dataset(FuzzedDataProvider& in, psi::hdf5::File& f) {
  const char* const paths[] = {"/x", "/a/b", "/states/dense/00_stage1_initial/video_latent", "/report/tables",
                               "/report/cases", "/probe/out", "/probe/weights_json"};
  const std::string path = pick(in, paths) + (in.ConsumeBool() ? "" : std::to_string(in.ConsumeIntegral<std::uint8_t>()));
  psi::Shape shape(in.ConsumeIntegralInRange(0, 3));
  for (auto& d : shape) d = in.ConsumeIntegralInRange<std::int64_t>(0, 6);
  const std::size_t n = std::size_t(psi::numel(shape));
  psi::hdf5::Attrs a;
  if (in.ConsumeBool()) a["full_shape"] = shape_text(in);
  if (in.ConsumeBool()) a["stored"] = stored_text(in);
  if (in.ConsumeBool()) {
    const char* const names[] = {"sha256_full", "sum_f64", "sumsq_f64", "absmax", "nonfinite_count", "variant",
                                 "shape_semantics", "synthinit_name"};
    a[pick(in, names)] = any_value(in);
  }
  switch (in.ConsumeIntegralInRange(0, 4)) {
    case 0: {
      psi::Bf16Tensor t(shape);
      for (auto& v : t.data) v = psi::Bf16::from_bits(in.ConsumeIntegral<std::uint16_t>());
      f.write_bf16(path, t, a);
      break;
    }
    case 1: {
      psi::F32Tensor t(shape);
      for (auto& v : t.data) v = in.ConsumeFloatingPoint<float>();
      f.write_f32(path, t, a);
      break;
    }
    case 2: {
      psi::F64Tensor t(shape);
      for (auto& v : t.data) v = in.ConsumeFloatingPoint<double>();
      f.write_f64(path, t, a);
      break;
    }
    case 3:
      // Declared JSON too: psi compare reads only that as JSON (compare/json_exact.h).
      if (in.ConsumeBool()) a[psi::hdf5::attr::content] = std::string(psi::hdf5::kJsonContent);
      f.write_text(path, table_json(in), a);
      break;
    default: {
      // uint16 whose dtype attribute is not 'bfloat16' (psi must not take it for BF16).
      psi::Bf16Tensor t(shape);
      for (std::size_t i = 0; i < n; ++i) t.data[i] = psi::Bf16::from_bits(std::uint16_t(i));
      f.write_bf16(path, t, a);
      f.set_attr(path, "dtype", in.ConsumeRandomLengthString(16));
    }
  }
}

void write_file(FuzzedDataProvider& in, const std::string& p) {
  auto f = psi::hdf5::File::create(p);
  const char* const formats[] = {"psi-h5/1", "record_official/1", "psi-h5/2", ""};
  if (in.ConsumeBool()) f.set_attr("/", "schema", in.ConsumeBool() ? AttrValue(pick(in, formats)) : any_value(in));
  if (in.ConsumeBool()) f.set_attr("/", "format", in.ConsumeBool() ? AttrValue(pick(in, formats)) : any_value(in));
  const char* const run_attrs[] = {"experiment", "model_config", "backend", "device_name", "seed", "start_time_utc",
                                   "synthinit_global_seed"};
  for (int i = in.ConsumeIntegralInRange(0, 3); i > 0; --i) f.set_attr("/", pick(in, run_attrs), any_value(in));
  for (int i = in.ConsumeIntegralInRange(1, 4); i > 0; --i)
    psi::fuzz::step([&] { write_dataset(in, f); });  // a clash of paths is the writer's refusal
  f.commit();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string p = psi::fuzz::temp_path("h5_attrs");
  FuzzedDataProvider in(data, size);
  bool written = false;
  psi::fuzz::step([&] {
    write_file(in, p);
    written = true;
  });
  if (written) psi::fuzz::read_everything(p);
  std::remove(p.c_str());
  return 0;
}
