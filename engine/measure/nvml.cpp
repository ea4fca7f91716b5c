#include "engine/measure/nvml.h"

#include <dlfcn.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <vector>

namespace psi::rt {
namespace {

// The NVML ABI used here, as the NVML API reference documents it. nvmlReturn_t is a C enum
// (int-sized); a device handle is an opaque pointer.
using NvmlReturn = int;
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr NvmlReturn kNvmlInsufficientSize = 7;
using NvmlDeviceHandle = struct NvmlDeviceOpaque*;

// nvmlMemory_t (v1): total = free + used, in bytes.
struct NvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

// nvmlProcessInfo_t as the _v3 process queries fill it (four fields; the _v1 queries used two).
struct NvmlProcessInfo {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

using InitFn = NvmlReturn (*)();
using ShutdownFn = NvmlReturn (*)();
using ErrorStringFn = const char* (*)(NvmlReturn);
using HandleByIndexFn = NvmlReturn (*)(unsigned int, NvmlDeviceHandle*);
using HandleByPciBusIdFn = NvmlReturn (*)(const char*, NvmlDeviceHandle*);
using MemoryInfoFn = NvmlReturn (*)(NvmlDeviceHandle, NvmlMemory*);
using ProcessesFn = NvmlReturn (*)(NvmlDeviceHandle, unsigned int*, NvmlProcessInfo*);

// A loaded and initialized NVML; shut down and unloaded when the last user lets go.
class Library {
 public:
  static std::shared_ptr<Library> open(const std::string& name, std::string* why) {
    void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* e = dlerror();
      *why = "NVML not loaded: dlopen(" + name + ") failed: " + (e ? e : "unknown error");
      return nullptr;
    }
    std::shared_ptr<Library> lib(new Library(handle));
    std::string missing;
    for (const auto& [slot, symbol] : lib->symbols()) {
      *slot = dlsym(handle, symbol);
      if (!*slot) missing += std::string(missing.empty() ? "" : ", ") + symbol;
    }
    if (!missing.empty()) {
      *why = "NVML in " + name + " lacks " + missing;
      return nullptr;
    }
    const NvmlReturn r = lib->fn<InitFn>(lib->init_)();
    if (r != kNvmlSuccess) {
      *why = "nvmlInit_v2 failed: " + lib->error(r);
      return nullptr;
    }
    lib->initialized_ = true;
    return lib;
  }

  ~Library() {
    if (initialized_) fn<ShutdownFn>(shutdown_)();
    dlclose(handle_);
  }
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  std::string error(NvmlReturn r) const {
    const char* s = error_string_ ? fn<ErrorStringFn>(error_string_)(r) : nullptr;
    return (s ? std::string(s) : std::string("error")) + " (nvmlReturn_t " + std::to_string(r) + ")";
  }

  // Symbols are looked up by name, so each is kept as a plain pointer and cast at the call.
  template <class F>
  static F fn(void* p) {
    return reinterpret_cast<F>(p);
  }

  void *init_ = nullptr, *shutdown_ = nullptr, *error_string_ = nullptr, *by_index_ = nullptr,
       *by_bus_id_ = nullptr, *memory_ = nullptr, *processes_ = nullptr;

 private:
  explicit Library(void* handle) : handle_(handle) {}
  std::vector<std::pair<void**, const char*>> symbols() {
    return {{&init_, "nvmlInit_v2"},
            {&shutdown_, "nvmlShutdown"},
            {&error_string_, "nvmlErrorString"},
            {&by_index_, "nvmlDeviceGetHandleByIndex_v2"},
            {&by_bus_id_, "nvmlDeviceGetHandleByPciBusId_v2"},
            {&memory_, "nvmlDeviceGetMemoryInfo"},
            {&processes_, "nvmlDeviceGetComputeRunningProcesses_v3"}};
  }

  void* handle_;
  bool initialized_ = false;
};

// NVML initialization can take a noticeable time, and a run makes one Runtime per block in
// several experiments: a loaded library is kept for the rest of the process. Failures are not
// kept (trying again is cheap and the cause may pass).
std::shared_ptr<Library> shared_library(const std::string& name, std::string* why) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<Library>> loaded;
  std::lock_guard lock(mutex);
  auto it = loaded.find(name);
  if (it != loaded.end()) return it->second;
  auto lib = Library::open(name, why);
  if (lib) loaded.emplace(name, lib);
  return lib;
}

// Reads one device; the process buffer grows when the device lists more processes than it holds.
class DeviceReader {
 public:
  DeviceReader(std::shared_ptr<Library> lib, NvmlDeviceHandle device, std::uint32_t pid)
      : lib_(std::move(lib)), device_(device), pid_(pid), infos_(64) {}

  GpuMemoryReading operator()() {
    NvmlMemory m{};
    NvmlReturn r = Library::fn<MemoryInfoFn>(lib_->memory_)(device_, &m);
    if (r != kNvmlSuccess) throw std::runtime_error("nvmlDeviceGetMemoryInfo failed: " + lib_->error(r));
    unsigned int count = 0;
    for (int attempt = 0;; ++attempt) {
      count = unsigned(infos_.size());
      r = Library::fn<ProcessesFn>(lib_->processes_)(device_, &count, infos_.data());
      if (r != kNvmlInsufficientSize || attempt == 3) break;
      infos_.resize(std::size_t(count) + 16);  // processes may start between the two calls
    }
    if (r != kNvmlSuccess)
      throw std::runtime_error("nvmlDeviceGetComputeRunningProcesses_v3 failed: " + lib_->error(r));
    entries_.clear();
    for (unsigned int i = 0; i < count; ++i) entries_.push_back({infos_[i].pid, infos_[i].usedGpuMemory});
    return nvml_reading(pid_, m.used, m.total, entries_);
  }

 private:
  std::shared_ptr<Library> lib_;
  NvmlDeviceHandle device_;
  std::uint32_t pid_;
  std::vector<NvmlProcessInfo> infos_;
  std::vector<NvmlProcessEntry> entries_;
};

}  // namespace

NvmlOpen open_nvml(const std::string& library, const NvmlDevice& device) {
  NvmlOpen out;
  try {
    std::shared_ptr<Library> lib = shared_library(library, &out.why);
    if (!lib) return out;
    NvmlDeviceHandle handle = nullptr;
    const NvmlReturn r =
        device.pci_bus_id.empty()
            ? Library::fn<HandleByIndexFn>(lib->by_index_)(device.index, &handle)
            : Library::fn<HandleByPciBusIdFn>(lib->by_bus_id_)(device.pci_bus_id.c_str(), &handle);
    if (r != kNvmlSuccess) {
      out.why = "NVML has no device " +
                (device.pci_bus_id.empty() ? "at index " + std::to_string(device.index)
                                           : "at PCI bus id " + device.pci_bus_id) +
                ": " + lib->error(r);
      return out;
    }
    out.source = DeviceReader(std::move(lib), handle, std::uint32_t(getpid()));
  } catch (const std::exception& e) {
    out.why = std::string("NVML could not be set up: ") + e.what();
  }
  return out;
}

GpuMemoryReading nvml_reading(std::uint32_t pid, std::uint64_t device_used, std::uint64_t device_total,
                              std::span<const NvmlProcessEntry> processes) {
  GpuMemoryReading r;
  r.device_used = device_used;
  r.device_total = device_total;
  r.pid = pid;
  r.processes_listed = std::uint32_t(processes.size());
  bool listed = false, figure_missing = false;
  for (const NvmlProcessEntry& p : processes) {
    if (p.pid != pid) continue;
    listed = true;
    if (p.used_bytes == kNvmlValueNotAvailable)
      figure_missing = true;
    else
      r.process_used += p.used_bytes;
  }
  r.process = !listed ? ProcessPresence::not_listed
              : figure_missing ? ProcessPresence::memory_not_available
                               : ProcessPresence::listed;
  if (r.process != ProcessPresence::listed) r.process_used = 0;
  return r;
}

}  // namespace psi::rt
