#pragma once
// The kernel-configuration file (official::KernelConfig, engine/official/kernel_config.h): JSON, schema
// psi-kernel-config/1, one entry per overridden product shape:
//
//   {"schema": "psi-kernel-config/1",
//    "products": [
//     {"chain": "tensor-core", "shape": [288, 256, 128], "split_k": 2, "granule": 16}
//    ],
//    "search": {…}}            (optional: what psi kernels search recorded; not read back)
//
// chain: tensor-core, f32-scores or f32-values; shape: rows, cols, depth (M, N, K) as
// `psi kernels shapes` lists them; split_k 1..64 and granule ≥ 1 (kernel_config.h's K slices).
// A shape not listed keeps what the recordings established.
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/official/kernel_config.h"
#include "outputs/output_path.h"

namespace psi::exp {

inline constexpr const char* kKernelConfigSchema = "psi-kernel-config/1";

// psi::Error naming the file and the entry for anything else: not a regular file, over 1 MiB,
// not JSON, another schema, an unknown key or chain, a shape or split out of range, a shape
// listed twice.
official::KernelConfig read_kernel_config(const std::filesystem::path& file);

// A "products" list (the file's, or a report's recorded options'), checked as
// read_kernel_config checks it; `where` names it in errors.
official::KernelConfig parse_kernel_products(const nlohmann::json& products, const std::string& where);

// The "products" list of the file (and of a report's recorded options) for `c`'s overrides.
nlohmann::json kernel_config_products(const official::KernelConfig& c);

// The file's text (its first line names the schema, so that psi recognizes the files it wrote);
// `search` is stored under "search" unless null.
std::string kernel_config_text(const official::KernelConfig& c, const nlohmann::json& search = nullptr);

// The recognizer of kernel-config files psi wrote (outputs::check_output).
outputs::Recognizer is_kernel_config_file();

}  // namespace psi::exp
