#pragma once
// Byte sizes in messages and the arena's alignment.
#include <cstdint>
#include <string>
#include <string_view>

namespace psi::rt {

// Every arena setting and every region inside it is a multiple of this.
inline constexpr std::uint64_t kAlignment = 256;

constexpr std::uint64_t align_up(std::uint64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

// An amount (needed, free, peak) with one decimal in the largest fitting unit:
// "12.0 MiB", "8.5 KiB", "100 bytes".
std::string format_amount(std::uint64_t bytes);

// A configured capacity, exactly: "56 MiB" or "64 KiB" when whole, otherwise "1000 bytes".
std::string format_capacity(std::uint64_t bytes);

// A capacity given on the command line: a whole number, optionally followed by a unit
// (bytes, KiB, MiB, GiB; "3GiB", "3 GiB", "512MiB", "4096"). psi::Error naming `what` otherwise.
std::uint64_t parse_capacity(std::string_view text, std::string_view what);

}  // namespace psi::rt
