// The CPU backend's stream/event semantics and the backend factory's choices.
#include <gtest/gtest.h>

#include <cstring>
#include <future>
#include <numeric>
#include <vector>

#include "engine/error.h"
#include "engine/backend/backend_factory.h"
#include "engine/backend/cpu/cpu_backend.h"

namespace rt = psi::rt;

TEST(CpuBackend, StreamRunsItsQueueInOrder) {
  auto b = rt::make_cpu_backend();
  b->allocate_arena(4096);
  const rt::StreamHandle s = b->create_stream("s");
  std::vector<int> seen;
  for (int i = 0; i < 500; ++i) b->launch(s, [&seen, i](const rt::KernelContext&) { seen.push_back(i); }, {});
  b->synchronize_stream(s);
  std::vector<int> expect(500);
  std::iota(expect.begin(), expect.end(), 0);
  EXPECT_EQ(seen, expect);
}

TEST(CpuBackend, OneArenaAllocation) {
  auto b = rt::make_cpu_backend();
  b->allocate_arena(4096);
  EXPECT_EQ(b->device_allocations(), 1u);
  EXPECT_THROW(b->allocate_arena(4096), psi::Error);
  EXPECT_EQ(b->device_allocations(), 1u);
}

TEST(CpuBackend, EventQueryFollowsTheRecordedPoint) {
  auto b = rt::make_cpu_backend();
  b->allocate_arena(4096);
  const rt::StreamHandle s = b->create_stream("s");
  const rt::EventHandle e = b->create_event();
  EXPECT_TRUE(b->query(e));  // never recorded: complete, as in CUDA
  std::promise<void> go;
  std::shared_future<void> gate = go.get_future().share();
  b->launch(s, [gate](const rt::KernelContext&) { gate.wait(); }, {});
  b->record(e, s);
  EXPECT_FALSE(b->query(e));  // the kernel before the record point is blocked
  go.set_value();
  b->synchronize_event(e);
  EXPECT_TRUE(b->query(e));
}

TEST(CpuBackend, WaitCapturesTheEventAtEnqueueTime) {
  // Re-recording an event after a wait was enqueued must not change what the wait waits for.
  auto b = rt::make_cpu_backend();
  b->allocate_arena(4096);
  const rt::StreamHandle a = b->create_stream("a"), c = b->create_stream("c");
  const rt::EventHandle e = b->create_event();
  std::promise<void> go;
  std::shared_future<void> gate = go.get_future().share();
  b->record(e, a);                                              // nothing before it: complete
  b->wait(c, e);
  b->launch(a, [gate](const rt::KernelContext&) { gate.wait(); }, {});
  b->record(e, a);                                              // now behind the blocked kernel
  bool ran = false;
  b->launch(c, [&ran](const rt::KernelContext&) { ran = true; }, {});
  b->synchronize_stream(c);                                     // must not hang
  EXPECT_TRUE(ran);
  go.set_value();
  b->synchronize_stream(a);
}

// A producer stream writes a buffer with an H2D copy; a consumer stream that waits on the
// producer's event reads it back; the producer's next overwrite waits on the consumer's event.
// Under chaos mode, for many seeds, every round must see exactly its own data.
TEST(CpuBackend, CrossStreamEventsOrderCopiesUnderChaos) {
  constexpr std::size_t n = 1024;
  constexpr int rounds = 12;
  for (std::uint64_t seed = 1; seed <= 30; ++seed) {
    auto b = rt::make_cpu_backend({.chaos_seed = seed, .chaos_max_us = 30});
    b->allocate_arena(n);
    const rt::StreamHandle prod = b->create_stream("producer"), cons = b->create_stream("consumer");
    const rt::EventHandle written = b->create_event(), read = b->create_event();
    std::vector<std::vector<std::byte>> src(rounds, std::vector<std::byte>(n)), dst(rounds, std::vector<std::byte>(n));
    for (int r = 0; r < rounds; ++r)
      for (std::size_t i = 0; i < n; ++i) src[r][i] = std::byte((r * 131 + i * 7 + seed) & 0xff);
    for (int r = 0; r < rounds; ++r) {
      b->wait(prod, read);
      b->copy_h2d(prod, 0, src[r].data(), n, {});
      b->record(written, prod);
      b->wait(cons, written);
      b->copy_d2h(cons, dst[r].data(), 0, n, {});
      b->record(read, cons);
    }
    b->synchronize_stream(cons);
    for (int r = 0; r < rounds; ++r) ASSERT_EQ(dst[r], src[r]) << "seed " << seed << " round " << r;
  }
}

TEST(CpuBackend, AsyncErrorIsStickyAndLaterWorkStillCompletes) {
  auto b = rt::make_cpu_backend();
  b->allocate_arena(4096);
  const rt::StreamHandle s = b->create_stream("s");
  bool later = false;
  b->launch(s, [](const rt::KernelContext&) { throw psi::Error("kernel failed on purpose"); }, {});
  b->launch(s, [&later](const rt::KernelContext&) { later = true; }, {});
  b->synchronize_stream(s);
  EXPECT_FALSE(later);  // skipped after the failure
  try {
    b->rethrow_async_error();
    FAIL() << "no error";
  } catch (const psi::Error& e) {
    EXPECT_STREQ(e.what(), "kernel failed on purpose");
  }
}

TEST(BackendFactory, Choices) {
  std::string note;
  EXPECT_EQ(rt::choose_backend("cpu", 1, true, "", false, &note), rt::BackendKind::cpu);
  EXPECT_TRUE(note.empty());
  EXPECT_EQ(rt::choose_backend("auto", 2, true, "", false, &note), rt::BackendKind::cuda);
  EXPECT_TRUE(note.empty());
  EXPECT_EQ(rt::choose_backend("auto", 0, true, "no CUDA-capable device is detected", false, &note), rt::BackendKind::cpu);
  EXPECT_EQ(note, "psi: note: no CUDA device (no CUDA-capable device is detected); using the CPU backend");
  EXPECT_EQ(rt::choose_backend("auto", 0, false, "", false, &note), rt::BackendKind::cpu);
  EXPECT_EQ(note, "psi: note: built without the CUDA backend; using the CPU backend");
  // Built with it, but its module did not load (engine/backend/cuda_module.h): the reason instead.
  const std::string unloaded = "the CUDA backend module /opt/psi/libpsi_cuda_backend.so did not load: libcudart.so.13: "
                               "cannot open shared object file: No such file or directory";
  EXPECT_EQ(rt::choose_backend("auto", 0, false, unloaded, false, &note), rt::BackendKind::cpu);
  EXPECT_EQ(note, "psi: note: " + unloaded + "; using the CPU backend");
  EXPECT_EQ(rt::choose_backend("auto", 1, true, "", true, &note), rt::BackendKind::cpu);
  EXPECT_EQ(note, "psi: note: chaos mode requested; using the CPU backend");
  EXPECT_EQ(rt::choose_backend("cuda", 1, true, "", false, nullptr), rt::BackendKind::cuda);

  auto message = [](auto f) {
    try {
      f();
    } catch (const psi::Error& e) {
      EXPECT_EQ(e.code(), psi::Exit::bad_input);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message([] { rt::choose_backend("cuda", 0, true, "CUDA driver version is insufficient", false, nullptr); }),
            "backend cuda requested but no CUDA device is available (CUDA driver version is insufficient)");
  EXPECT_EQ(message([] { rt::choose_backend("cuda", 1, false, "", false, nullptr); }),
            "backend cuda requested but this psi was built without the CUDA backend (no nvcc at configure time)");
  EXPECT_EQ(message([&] { rt::choose_backend("cuda", 1, false, unloaded, false, nullptr); }),
            "backend cuda requested but " + unloaded);
  EXPECT_EQ(message([] { rt::choose_backend("cuda", 1, true, "", true, nullptr); }),
            "chaos mode needs the cpu backend; backend cuda was requested");
  EXPECT_EQ(message([] { rt::choose_backend("gpu", 1, true, "", false, nullptr); }),
            "backend \"gpu\" is not one of auto, cpu, cuda");
}

TEST(BackendFactory, MakeBackendOnThisMachine) {
  rt::BackendChoice cpu = rt::make_backend("cpu");
  EXPECT_EQ(cpu.backend->name(), "cpu");
  EXPECT_TRUE(cpu.note.empty());
  rt::BackendChoice chaos = rt::make_backend("auto", {.chaos_seed = 3});
  EXPECT_EQ(chaos.backend->name(), "cpu");
  EXPECT_THROW(rt::make_backend("metal"), psi::Error);
  // A build with or without CUDA, on a machine with or without a device: "auto" always gives a
  // working backend, and says so when it falls back.
  std::string why;
  const int devices = rt::cuda_devices(&why);
  rt::BackendChoice any = rt::make_backend("auto");
  if (devices == 0) {
    EXPECT_EQ(any.backend->name(), "cpu");
    EXPECT_FALSE(any.note.empty());
    try {
      rt::make_backend("cuda");
      FAIL() << "cuda without a device";
    } catch (const psi::Error& e) {
      EXPECT_TRUE(std::string(e.what()).starts_with("backend cuda requested but ")) << e.what();
    }
  } else {
    EXPECT_EQ(any.backend->name(), "cuda");
  }
}

// The device services: none on the CPU backend (not applicable), none for CUDA in a build without
// it (unavailable, saying why); in a CUDA build they answer for the device, or fail in one line.
TEST(BackendFactory, DeviceServicesOnlyForABackendWithADevice) {
  const rt::DeviceServicesChoice cpu = rt::make_device_services("cpu", 0);
  EXPECT_FALSE(cpu.services);
  EXPECT_FALSE(cpu.has_device);
  EXPECT_EQ(cpu.why, "the cpu backend has no device");
  const rt::DeviceServicesChoice cuda = rt::make_device_services("cuda", 0);
  EXPECT_TRUE(cuda.has_device);
  if (!rt::cuda_backend_built()) {
    EXPECT_FALSE(cuda.services);
    EXPECT_EQ(cuda.why, "this psi was built without the CUDA backend");
    return;
  }
  ASSERT_TRUE(cuda.services);
  EXPECT_EQ(cuda.services->name(), "CUDA device 0");
  std::string why, why_none;
  const std::string bus = cuda.services->pci_bus_id(&why);
  if (rt::cuda_devices(&why_none) > 0) {
    EXPECT_FALSE(bus.empty());
    const rt::DeviceMemory m = cuda.services->memory();
    EXPECT_GT(m.total, 0u);
    EXPECT_LE(m.free, m.total);
  } else {
    EXPECT_TRUE(bus.empty());
    EXPECT_TRUE(why.starts_with("cudaDeviceGetPCIBusId(0) failed: ")) << why;
    try {
      cuda.services->memory();
      FAIL() << "memory info without a device";
    } catch (const psi::Error& e) {
      EXPECT_EQ(e.code(), psi::Exit::run_failed);
      EXPECT_TRUE(std::string(e.what()).starts_with("fixed budget: ")) << e.what();
    }
  }
}
