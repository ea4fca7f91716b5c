#pragma once
// Data psi cannot check: a tensor with no sha256_full, a partial or empty (stored='none') one
// with nothing to check its rows against. Every reader refuses it (psi::Error, exit 2, naming
// the file:dataset and why) unless the command was given --allow-unverified; then the read goes
// on and the dataset is recorded here, and the verdict that rests on it is marked unverified: in
// the command's table, in the report it writes (root attribute `unverified`, each case's field
// `unverified`) and in the exit status (psi::Exit::unverified, set by main for every command).
#include <cstddef>
#include <string>
#include <vector>

namespace psi::hdf5 {

// --allow-unverified: process-wide, as --force is.
void set_allow_unverified(bool allow);
bool unverified_allowed();

// `where` ("<file>:<dataset>") cannot be checked because of `why` ("no sha256_full"): throws the
// refusal, or, when allowed, records "<where>: <why>" (once).
void unverifiable(const std::string& where, const std::string& why);

// What was read unchecked so far, in the order first read.
const std::vector<std::string>& unverified_data();
// The first `max` of them joined with "; ", and how many more there are.
std::string unverified_summary(std::size_t max = 8);

}  // namespace psi::hdf5
