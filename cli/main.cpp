// psi: the command-line front end. Exit codes are psi::Exit's (0 ok or bitwise equal,
// 1 differs, 2 bad input, 3 run failed, 4 unverified, 128 + n interrupted by signal n).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <string>

#include "cli/command.h"
#include "engine/cpu_features.h"
#include "engine/environment.h"
#include "engine/error.h"
#include "engine/interrupt.h"
#include "engine/official/tensor_core.h"
#include "hdf5/h5.h"
#include "hdf5/unverified.h"
#include "psi_version.h"

namespace psi::cli {

std::vector<Command>& registry() {
  static std::vector<Command> commands;
  return commands;
}

std::vector<std::string>& named_link_targets() {
  static std::vector<std::string> files;
  return files;
}

}  // namespace psi::cli

namespace {

// CLI11 reports a mistyped subcommand only as "A subcommand is required": walk the words of
// the command line down the subcommand tree and name the first one that is not a subcommand
// where one is expected.
std::string unknown_subcommand(CLI::App& app, int argc, char** argv) {
  CLI::App* at = &app;
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.starts_with("-")) return "";
    if (at->get_subcommands({}).empty()) return "";
    CLI::App* next = nullptr;
    for (CLI::App* s : at->get_subcommands({}))
      if (s->get_name() == word) next = s;
    if (!next) {
      std::string valid;
      for (CLI::App* s : at->get_subcommands({})) valid += (valid.empty() ? "" : ", ") + s->get_name();
      return "unknown command '" + word + "' (valid: " + valid + ")";
    }
    at = next;
  }
  if (at != &app && !at->get_subcommands({}).empty()) {
    std::string valid;
    for (CLI::App* s : at->get_subcommands({})) valid += (valid.empty() ? "" : ", ") + s->get_name();
    return "'" + at->get_name() + "' needs a command (valid: " + valid + ")";
  }
  return "";
}

// Levenshtein distance of two short words.
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// For a --word the command does not have: its message, with the command's nearest option when
// one is close ("did you mean --quick?"); empty when every --word is known.
std::string unknown_option(CLI::App& app, int argc, char** argv) {
  CLI::App* at = &app;
  std::string command = "psi";
  for (int i = 1; i < argc; ++i)
    for (CLI::App* s : at->get_subcommands({}))
      if (s->get_name() == argv[i]) {
        at = s;
        command += " " + s->get_name();
        break;
      }
  std::vector<std::string> names;
  for (const CLI::Option* o : at->get_options())
    for (const std::string& n : o->get_lnames()) names.push_back(n);
  for (int i = 1; i < argc; ++i) {
    std::string word = argv[i];
    if (!word.starts_with("--") || word.size() == 2) continue;
    word = word.substr(2, word.find('=') == std::string::npos ? std::string::npos : word.find('=') - 2);
    if (std::find(names.begin(), names.end(), word) != names.end()) continue;
    std::string best;
    std::size_t best_d = std::string::npos;
    for (const auto& n : names)
      if (const std::size_t d = edit_distance(word, n); d < best_d) {
        best_d = d;
        best = n;
      }
    const std::size_t near = word.size() <= 3 ? 1 : std::max<std::size_t>(2, word.size() / 3);
    if (!best.empty() && best_d <= near)
      return command + " has no option --" + word + "; did you mean --" + best + "?";
    return command + " has no option --" + word + " (" + command + " --help lists them)";
  }
  return "";
}

// Set when psi started with descriptor 1 closed: what it prints is lost.
bool g_stdout_closed = false;

// Descriptors 0-2 closed at the start get /dev/null: otherwise the next file psi opens takes the
// number, and what is printed, or a child given that descriptor (rsvg-convert), writes into it.
bool open_closed_standard_descriptors() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) >= 0 || errno != EBADF) continue;
    g_stdout_closed = g_stdout_closed || fd == STDOUT_FILENO;
    if (::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY) != fd) return false;  // the lowest free number: fd
  }
  return true;
}

// What a command printed must have reached its destination: a full disk or a closed pipe on
// stdout (`psi report F > /dev/full`) otherwise ends with exit 0 and the output lost.
int stdout_delivered(int status) {
  if (g_stdout_closed) {
    std::cerr << "psi: error: the output could not be written to standard output (it was closed when psi "
                 "started); what was printed is lost\n";
    return int(psi::Exit::run_failed);
  }
  std::cout.flush();
  if (std::cout.fail() || std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::cerr << "psi: error: the output could not be written to standard output (" << std::strerror(errno)
              << "); what was printed is incomplete\n";
    return int(psi::Exit::run_failed);
  }
  return status;
}

// A success (equal, held) that rests on data read under --allow-unverified is not one: exit 4,
// with the data named on stderr. A failure (1 and above) stays what it is.
int unverified_status(int status) {
  if (psi::hdf5::unverified_data().empty() || status != int(psi::Exit::ok)) return status;
  std::cerr << "psi: warning: UNVERIFIED: " << psi::hdf5::unverified_data().size()
            << " dataset(s) read with nothing to check them against (--allow-unverified): "
            << psi::one_line(psi::hdf5::unverified_summary()) << "\n";
  return int(psi::Exit::unverified);
}

// The version, the vector level psi's kernels run at (engine/cpu_features.h) and the tensor-core
// product's lane kernels at that level, so that a user knows which ran. A bad PSI_ISA is thrown: main reports it as for any command.
std::string version_text() {
  const std::optional<psi::Isa> forced = psi::env_isa();
  const std::string cpu = psi::isa_name(psi::cpu_isa());
  return std::string("psi ") + PSI_VERSION + " (" + PSI_GIT_REVISION + ")\nvector level: " +
         (forced ? std::string(psi::isa_name(*forced)) + " (PSI_ISA; this CPU supports up to " + cpu + ")"
                 : cpu + " (this CPU's highest; PSI_ISA=avx2 or portable chooses a lower one)") +
         "\ntensor-core product: " + psi::official::tc::lane_kernels_in_force();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace psi;
  // Before anything else: a signal while the command line is read is seen at the first check
  // point (engine/interrupt.h), not taken by the default action.
  install_interrupt_handlers();
  if (!open_closed_standard_descriptors()) return int(Exit::run_failed);
  CLI::App app{"psi: numerical-fidelity and transport-verification harness for PSI (LTX-2.x AV transformer)"};
  app.set_version_flag("--version", version_text);
  app.require_subcommand(1);
  auto& cmds = cli::registry();
  std::sort(cmds.begin(), cmds.end(), [](auto& a, auto& b) { return a.name < b.name; });
  std::map<CLI::App*, cli::Runner> runners;
  for (auto& c : cmds) {
    CLI::App* sub = app.add_subcommand(c.name, c.description);
    runners[sub] = c.setup(*sub);
  }
  // Every command's help states the exit-status rule; a command with a footer of its own
  // (what the rule means for it) keeps that.
  app.footer(std::string(cli::kExitRule));
  std::function<void(CLI::App*)> add_rule = [&](CLI::App* a) {
    for (CLI::App* s : a->get_subcommands({})) {
      if (s->get_footer().empty()) s->footer(std::string(cli::kExitRule));
      add_rule(s);
    }
  };
  add_rule(&app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const Error& e) {  // thrown by version_text
    std::cerr << "psi: error: " << one_line(e.what()) << "\n";
    return int(e.code());
  } catch (const CLI::ParseError& e) {
    std::string unknown = unknown_subcommand(app, argc, argv);
    if (unknown.empty() && dynamic_cast<const CLI::ExtrasError*>(&e)) unknown = unknown_option(app, argc, argv);
    std::cerr << "psi: error: " << (unknown.empty() ? std::string(e.what()) : unknown) << "\n";
    return int(Exit::bad_input);
  }
  // A write that passed the file-size limit fails; its message says why.
  const auto limit_note = [] {
    return file_size_limit_reached() ? std::string(" (the file-size limit was reached: ulimit -f, RLIMIT_FSIZE)") : "";
  };
  try {
    check_interrupt("the start of psi");
    check_environment();
    for (const std::string& f : cli::named_link_targets()) hdf5::allow_links_to(f);
    for (auto& [sub, run] : runners) {
      if (!sub->parsed()) continue;
      const int status = run();
      // A signal that arrived where no check point saw it: the command did not finish as asked.
      check_interrupt("the end of psi " + sub->get_name());
      return stdout_delivered(unverified_status(status));
    }
  } catch (const Error& e) {
    std::cerr << "psi: error: " << one_line(e.what()) << limit_note() << "\n";
    return int(e.code());
  } catch (const std::exception& e) {
    std::cerr << "psi: internal error: " << one_line(e.what()) << limit_note() << "\n";
    return int(Exit::run_failed);
  }
  return int(Exit::bad_input);
}
