#pragma once
// --map FROM=TO of psi compare: how a dataset of A names its partner in B when the two files lay
// their tensors out differently.
#include <optional>
#include <string>
#include <string_view>

namespace psi::compare {

// A dataset of A whose path starts with `from` as whole components is paired with B's dataset at
// `to` + the rest. A '*' in `from` matches any run of characters within one component (never a
// '/'), and `to` holds as many '*', each replaced by what its '*' of `from` matched, in order:
// /run/step_*/video = /states/*/video_latent pairs /run/step_3/video with /states/3/video_latent.
struct PathMap {
  std::string from;
  std::string to;
};

// Whether `m` applies to `path`: `from` (its '*' as above) is the path itself or a run of its
// whole components (`/a/b` and `/a/b/` name `/a/b/c`, not `/a/bc`).
bool maps_path(const PathMap& m, std::string_view path);

// B's path for A's `path`, or nullopt when `m` does not apply.
std::optional<std::string> map_path(const PathMap& m, std::string_view path);

// A map as given: FROM=TO, each with a leading '/' added when it has none, FROM not empty, at most
// kMaxMapText characters, and as many '*' in TO as in FROM. psi::Error (exit 2) naming it otherwise.
inline constexpr std::size_t kMaxMapText = 4096;
PathMap parse_path_map(const std::string& text);

}  // namespace psi::compare
