// psi: the command-line front end. Exit codes are psi::Exit's (0 ok or bitwise equal,
// 1 differs, 2 bad input, 3 run failed, 128 + n interrupted by signal n).
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>

#include "cli/command.h"
#include "engine/error.h"
#include "engine/interrupt.h"
#include "psi_version.h"

namespace psi::cli {

std::vector<Command>& registry() {
  static std::vector<Command> commands;
  return commands;
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

// What a command printed must have reached its destination: a full disk or a closed pipe on
// stdout (`psi report F > /dev/full`) otherwise ends with exit 0 and the output lost.
int stdout_delivered(int status) {
  std::cout.flush();
  if (std::cout.fail() || std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::cerr << "psi: error: the output could not be written to standard output (" << std::strerror(errno)
              << "); what was printed is incomplete\n";
    return int(psi::Exit::run_failed);
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace psi;
  CLI::App app{"psi: numerical-fidelity and transport-verification harness for PSI (LTX-2.x AV transformer)"};
  app.set_version_flag("--version", std::string("psi ") + PSI_VERSION + " (" + PSI_GIT_REVISION + ")");
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
  } catch (const CLI::ParseError& e) {
    const std::string unknown = unknown_subcommand(app, argc, argv);
    std::cerr << "psi: error: " << (unknown.empty() ? std::string(e.what()) : unknown) << "\n";
    return int(Exit::bad_input);
  }
  // Every command: the first SIGINT/SIGTERM stops the work at its next check point, a second
  // one at once (engine/interrupt.h).
  install_interrupt_handlers();
  try {
    for (auto& [sub, run] : runners) {
      if (!sub->parsed()) continue;
      const int status = run();
      // A signal that arrived where no check point saw it: the command did not finish as asked.
      check_interrupt("the end of psi " + sub->get_name());
      return stdout_delivered(status);
    }
  } catch (const Error& e) {
    std::cerr << "psi: error: " << one_line(e.what()) << "\n";
    return int(e.code());
  } catch (const std::exception& e) {
    std::cerr << "psi: internal error: " << one_line(e.what()) << "\n";
    return int(Exit::run_failed);
  }
  return int(Exit::bad_input);
}
