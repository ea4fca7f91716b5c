#include "engine/environment.h"

#include <cstdlib>
#include <string>

#include "engine/cpu_features.h"
#include "engine/error.h"
#include "engine/real_number.h"
#include "engine/whole_number.h"

namespace psi {

namespace {

std::optional<std::string> env_text(const char* name) {
  const char* v = std::getenv(name);
  if (!v) return std::nullopt;
  if (!*v) throw Error("environment variable " + std::string(name) + " is set but empty (unset it for the default)");
  return std::string(v);
}

std::optional<std::uint64_t> env_whole(const char* name, std::uint64_t lo, std::uint64_t hi) {
  const auto t = env_text(name);
  if (!t) return std::nullopt;
  const auto v = parse_whole(*t, lo, hi);
  if (!v)
    throw Error("environment variable " + std::string(name) + "='" + *t + "' is not a whole number from " +
                std::to_string(lo) + " to " + std::to_string(hi));
  return v;
}

}  // namespace

std::optional<int> env_threads() {
  const auto n = env_whole("PSI_THREADS", 1, 1024);
  if (!n) return std::nullopt;
  return int(*n);
}

std::optional<double> env_progress_seconds() {
  constexpr double kMax = 1e6;
  const auto t = env_text("PSI_PROGRESS_SECONDS");
  if (!t) return std::nullopt;
  std::string why;
  const auto v = parse_real(*t, &why);
  if (!v) throw Error("environment variable PSI_PROGRESS_SECONDS='" + *t + "' is " + why + " (seconds, 0 to 1e6)");
  if (*v < 0 || *v > kMax)
    throw Error("environment variable PSI_PROGRESS_SECONDS='" + *t + "' is outside 0 to 1e6 seconds");
  return *v;
}

std::uint64_t env_h5_check_seconds() { return env_whole("PSI_H5_CHECK_SECONDS", 1, 3600).value_or(20); }

std::optional<std::filesystem::path> env_shared() {
  const auto t = env_text("PSI_SHARED");
  if (!t) return std::nullopt;
  return std::filesystem::path(*t);
}

void check_environment() {
  env_threads();
  env_progress_seconds();
  env_h5_check_seconds();
  env_isa();
  env_shared();
}

}  // namespace psi
