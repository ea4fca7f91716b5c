#pragma once
// The oracle's thread fan-out: a range cut into one contiguous slice per thread. Slices are
// independent and each writes its own outputs, so results never depend on the thread count.
#include <algorithm>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace psi::oracle {

// Runs f(begin, end) over [0, n) on up to `threads` threads, in contiguous slices whose bounds
// are multiples of `granule` (the last slice ends at n). The first exception a slice throws is
// rethrown here once every slice has finished.
template <class F>
void split_range(std::int64_t n, int threads, std::int64_t granule, F&& f) {
  const std::int64_t units = (n + granule - 1) / granule;
  const int t = int(std::clamp<std::int64_t>(threads, 1, std::max<std::int64_t>(units, 1)));
  const auto bound = [&](int i) { return std::min(n, units * i / t * granule); };
  std::exception_ptr error;
  std::mutex error_mutex;
  const auto slice = [&](int i) {
    try {
      f(bound(i), bound(i + 1));
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (int i = 1; i < t; ++i) pool.emplace_back(slice, i);
  slice(0);
  for (auto& th : pool) th.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace psi::oracle
