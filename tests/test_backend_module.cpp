// The CUDA backend as a module (engine/backend/cuda_module.h, docs/cuda-backend.md): the psi
// program links no CUDA library, starts under an address-space limit that cuBLAS alone would
// exceed, runs its CPU commands with the module gone, and answers a module that is missing, not
// a module, or from another build with one line: an error for `--backend cuda`, a note and the
// CPU for `--backend auto`. The runs use a copy of psi in a folder of its own, since psi looks
// for the module beside its own program only.
#include <gtest/gtest.h>

#include <elf.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "engine/backend/backend_factory.h"
#include "engine/backend/cuda_module.h"

namespace fs = std::filesystem;
namespace rt = psi::rt;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// What the loader reads from an ELF64 file's dynamic section (`readelf -d`): the libraries it
// needs (DT_NEEDED) and the folders it searches for them first (DT_RUNPATH, DT_RPATH).
struct Dynamic {
  std::vector<std::string> needed, search_path;
};

Dynamic dynamic_section(const fs::path& file) {
  const std::string b = slurp(file);
  auto at = [&b](std::size_t off, std::size_t n) {
    if (off > b.size() || n > b.size() - off) throw std::runtime_error("truncated ELF");
    return b.data() + off;
  };
  Elf64_Ehdr eh;
  std::memcpy(&eh, at(0, sizeof eh), sizeof eh);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64)
    throw std::runtime_error(file.string() + " is not an ELF64 file");
  auto section = [&](std::size_t i) {
    Elf64_Shdr sh;
    std::memcpy(&sh, at(eh.e_shoff + i * eh.e_shentsize, sizeof sh), sizeof sh);
    return sh;
  };
  Dynamic out;
  for (std::size_t i = 0; i < eh.e_shnum; ++i) {
    const Elf64_Shdr dyn = section(i);
    if (dyn.sh_type != SHT_DYNAMIC) continue;
    const Elf64_Shdr strtab = section(dyn.sh_link);
    for (std::size_t k = 0; k < dyn.sh_size / sizeof(Elf64_Dyn); ++k) {
      Elf64_Dyn d;
      std::memcpy(&d, at(dyn.sh_offset + k * sizeof d, sizeof d), sizeof d);
      if (d.d_tag == DT_NULL) break;
      const char* text = d.d_tag == DT_NEEDED || d.d_tag == DT_RUNPATH || d.d_tag == DT_RPATH
                             ? at(strtab.sh_offset + d.d_un.d_val, 1)
                             : nullptr;
      if (d.d_tag == DT_NEEDED) out.needed.emplace_back(text);
      if (text && d.d_tag != DT_NEEDED) {
        std::istringstream in{std::string(text)};
        for (std::string dir; std::getline(in, dir, ':');) out.search_path.push_back(dir);
        if (std::string_view(text).ends_with(':')) out.search_path.emplace_back();
      }
    }
  }
  return out;
}

bool is_cuda_library(const std::string& name) {
  for (const char* part : {"cuda", "cublas", "nvrtc", "nvjitlink", "nvidia"}) {
    std::string lower = name;
    for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
    if (lower.find(part) != std::string::npos) return true;
  }
  return false;
}

struct Outcome {
  int status = -1;  // the exit status, -1 if it died of a signal
  std::string out, err;
};

// Runs `exe args` with stdout and stderr in files under `dir`; `address_space` (bytes, 0: none)
// caps the child's virtual memory (RLIMIT_AS), as `ulimit -v` does.
Outcome run(const fs::path& exe, const std::vector<std::string>& args, const fs::path& dir,
            rlim_t address_space = 0) {
  std::vector<std::string> argv_s{exe.string()};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string out = (dir / "stdout").string(), err = (dir / "stderr").string();
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (address_space) {
      const rlimit lim{address_space, address_space};
      if (::setrlimit(RLIMIT_AS, &lim) != 0) ::_exit(126);
    }
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (o < 0 || e < 0 || ::dup2(o, 1) < 0 || ::dup2(e, 2) < 0) ::_exit(126);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  Outcome r;
  int st = 0;
  if (pid < 0 || ::waitpid(pid, &st, 0) != pid) return r;
  if (WIFEXITED(st)) r.status = WEXITSTATUS(st);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

// A fresh folder holding a copy of psi (and whatever the test puts beside it), removed after.
class LonePsi {
 public:
  explicit LonePsi(const std::string& name)
      : dir_(fs::temp_directory_path() / ("psi_cuda_module_" + std::to_string(::getpid()) + "_" + name)) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::copy_file(PSI_BINARY, psi(), fs::copy_options::overwrite_existing);
  }
  ~LonePsi() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  const fs::path& dir() const { return dir_; }
  fs::path psi() const { return dir_ / "psi"; }
  fs::path module() const { return dir_ / kPsiCudaModuleFile; }
  Outcome operator()(const std::vector<std::string>& args) const { return run(psi(), args, dir_); }

 private:
  fs::path dir_;
};

// `psi run one-token --quick --backend B`: the backend is decided right after the options, so
// with `--out` in a "folder" that is a file the run stops there, after the note if any.
std::vector<std::string> run_with_backend(const LonePsi& p, const std::string& backend) {
  std::ofstream(p.dir() / "not-a-folder") << "a file\n";
  return {"run", "one-token", "--quick", "--backend", backend, "--out", (p.dir() / "not-a-folder" / "r.h5").string()};
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// A library search folder that is empty or relative is the current directory, or one below it,
// to the loader: whatever lies there would be loaded into psi.
void expect_absolute_search_path(const fs::path& file, const Dynamic& d) {
  for (const std::string& dir : d.search_path)
    EXPECT_TRUE(dir.starts_with("/")) << file << " searches \"" << dir << "\" for its libraries";
}

}  // namespace

TEST(CudaModule, PsiLinksNoCudaLibrary) {
  const Dynamic d = dynamic_section(PSI_BINARY);
  ASSERT_NE(std::find(d.needed.begin(), d.needed.end(), "libc.so.6"), d.needed.end()) << "the dynamic section was not read";
  for (const std::string& n : d.needed) EXPECT_FALSE(is_cuda_library(n)) << PSI_BINARY << " needs " << n;
  expect_absolute_search_path(PSI_BINARY, d);
}

// In a CUDA build the module is built beside psi and beside this test program, holds the CUDA
// libraries psi does not, and loads here.
TEST(CudaModule, TheModuleHoldsTheCudaLibraries) {
  if (!rt::cuda_backend_built()) GTEST_SKIP() << "built without the CUDA backend";
  const fs::path module = fs::path(PSI_BINARY).parent_path() / kPsiCudaModuleFile;
  ASSERT_TRUE(fs::exists(module)) << module;
  const Dynamic d = dynamic_section(module);
  bool cudart = false;
  for (const std::string& n : d.needed) cudart = cudart || n.starts_with("libcudart.so");
  EXPECT_TRUE(cudart) << module << " does not link the CUDA runtime";
  expect_absolute_search_path(module, d);
  std::string why;
  EXPECT_TRUE(rt::cuda_backend_loaded(&why)) << why;
}

// cuBLAS and cuBLASLt alone map more than this; psi --version must not need them.
TEST(CudaModule, VersionStartsUnderATightAddressSpaceLimit) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer reserves terabytes of address space for its shadow memory";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  GTEST_SKIP() << "a sanitizer reserves terabytes of address space for its shadow memory";
#endif
#endif
  const fs::path dir = fs::temp_directory_path() / ("psi_cuda_module_" + std::to_string(::getpid()) + "_ulimit");
  fs::create_directories(dir);
  const Outcome r = run(PSI_BINARY, {"--version"}, dir, rlim_t(200) << 20);
  fs::remove_all(dir);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(r.out.starts_with("psi ")) << r.out;
}

// The commands that need no backend, and --backend cpu, run where the module is not.
TEST(CudaModule, CpuCommandsRunWithoutTheModule) {
  const LonePsi psi("cpu");
  const Outcome version = psi({"--version"});
  EXPECT_EQ(version.status, 0) << version.err;
  const std::string a = std::string(PSI_TEST_DATA) + "/compare/user_a.h5";
  const Outcome compare = psi({"compare", a, a});
  EXPECT_EQ(compare.status, 0) << compare.err;
  EXPECT_EQ(compare.err, "");
  const Outcome cpu = psi(run_with_backend(psi, "cpu"));
  EXPECT_EQ(cpu.status, 2);
  EXPECT_EQ(lines(cpu.err).size(), 1u) << cpu.err;
  EXPECT_EQ(cpu.err.find("CUDA"), std::string::npos) << cpu.err;
}

TEST(CudaModule, AMissingModuleIsOneLine) {
  if (!rt::cuda_backend_built()) GTEST_SKIP() << "built without the CUDA backend";
  const LonePsi psi("missing");
  const std::string prefix = "the CUDA backend module " + psi.module().string() + " did not load: ";
  const Outcome cuda = psi(run_with_backend(psi, "cuda"));
  EXPECT_EQ(cuda.status, 2);
  ASSERT_EQ(lines(cuda.err).size(), 1u) << cuda.err;
  EXPECT_TRUE(cuda.err.starts_with("psi: error: backend cuda requested but " + prefix)) << cuda.err;
  EXPECT_NE(cuda.err.find("No such file or directory"), std::string::npos) << cuda.err;

  const Outcome any = psi(run_with_backend(psi, "auto"));
  const std::vector<std::string> l = lines(any.err);
  ASSERT_EQ(l.size(), 2u) << any.err;  // the note, then the unwritable --out
  EXPECT_TRUE(l[0].starts_with("psi: note: " + prefix)) << l[0];
  EXPECT_TRUE(l[0].ends_with("; using the CPU backend")) << l[0];
  EXPECT_TRUE(l[1].starts_with("psi: error: ")) << l[1];
}

TEST(CudaModule, AFileThatIsNoModuleIsRefused) {
  if (!rt::cuda_backend_built()) GTEST_SKIP() << "built without the CUDA backend";
  const LonePsi psi("garbage");
  std::ofstream(psi.module()) << "not a shared object\n";
  const Outcome r = psi(run_with_backend(psi, "cuda"));
  EXPECT_EQ(r.status, 2);
  ASSERT_EQ(lines(r.err).size(), 1u) << r.err;
  EXPECT_TRUE(r.err.starts_with("psi: error: backend cuda requested but the CUDA backend module " +
                                psi.module().string() + " did not load: "))
      << r.err;
}

#ifdef PSI_FAKE_CUDA_MODULE
TEST(CudaModule, AModuleFromAnotherBuildIsRefused) {
  const LonePsi psi("stale");
  fs::copy_file(PSI_FAKE_CUDA_MODULE, psi.module());
  const Outcome r = psi(run_with_backend(psi, "cuda"));
  EXPECT_EQ(r.status, 2);
  ASSERT_EQ(lines(r.err).size(), 1u) << r.err;
  EXPECT_TRUE(r.err.starts_with("psi: error: backend cuda requested but the CUDA backend module " +
                                psi.module().string() + " is stale: it was built for psi 0.0.0 (stale) with module interface " +
                                std::to_string(kPsiCudaModuleAbi + 1) + ", this is psi "))
      << r.err;
  EXPECT_TRUE(r.err.ends_with("; install the module built with this psi\n")) << r.err;
}
#endif
