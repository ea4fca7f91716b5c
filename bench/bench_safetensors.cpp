#include <benchmark/benchmark.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "engine/checkpoint/safetensors.h"

// Opening a checkpoint whose header lists N one-element tensors: the header parse and its checks
// (duplicate keys, offsets, overlaps). Linear in N: the items/s rate stays flat from 1,000 to
// 100,000 tensors (nlohmann's callback parser, used before, was quadratic: minutes at 100,000).
static void BM_SafetensorsOpen(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const std::filesystem::path p =
      std::filesystem::temp_directory_path() / ("psi_bench_" + std::to_string(::getpid()) + ".safetensors");
  std::string header = "{";
  // Appended piece by piece: g++ 12 warns (-Wrestrict, a false positive) on "," + string here.
  for (std::int64_t i = 0; i < n; ++i) {
    if (i) header += ',';
    header += "\"t" + std::to_string(i) + "\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[";
    header += std::to_string(2 * i) + "," + std::to_string(2 * i + 2) + "]}";
  }
  header += "}";
  {
    std::ofstream f(p, std::ios::binary);
    const std::uint64_t len = header.size();
    f.write(reinterpret_cast<const char*>(&len), 8);
    f << header << std::string(std::size_t(2 * n), '\0');
  }
  for (auto _ : state) {
    psi::ckpt::SafetensorsFile f(p);
    benchmark::DoNotOptimize(f.entries().size());
  }
  std::filesystem::remove(p);
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_SafetensorsOpen)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);
