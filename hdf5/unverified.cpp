#include "hdf5/unverified.h"

#include <algorithm>

#include "engine/error.h"

namespace psi::hdf5 {

namespace {

bool& allow_flag() {
  static bool allow = false;
  return allow;
}

std::vector<std::string>& ledger() {
  static std::vector<std::string> read;
  return read;
}

}  // namespace

void set_allow_unverified(bool allow) { allow_flag() = allow; }
bool unverified_allowed() { return allow_flag(); }

void unverifiable(const std::string& where, const std::string& why) {
  if (!allow_flag())
    throw Error(where + ": " + why +
                "; psi gives no verdict on data it cannot check (--allow-unverified reads it and marks the verdict "
                "unverified)");
  const std::string entry = where + ": " + why;
  auto& l = ledger();
  if (std::find(l.begin(), l.end(), entry) == l.end()) l.push_back(entry);
}

const std::vector<std::string>& unverified_data() { return ledger(); }

std::string unverified_summary(std::size_t max) {
  const auto& l = ledger();
  std::string out;
  for (std::size_t i = 0; i < l.size() && i < max; ++i) out += (i ? "; " : "") + l[i];
  if (l.size() > max) out += "; and " + std::to_string(l.size() - max) + " more";
  return out;
}

}  // namespace psi::hdf5
