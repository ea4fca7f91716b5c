#pragma once
// Progress display for long work, on stderr. A command shows one line for all its work: the
// first Progress alive owns it, and a Progress made while it lives (a driver's sub-run, a
// trajectory inside an experiment) is a part of it: the line names the part (and its number out
// of those declared, expect_parts), counts the part's units and gives the part's ETA beside the
// whole command's elapsed time, instead of a new line whose ETA starts again; a command of
// several parts also counts its units done out of all of its parts' and gives the whole
// command's ETA (parts not yet begun counted like the current one, the total then marked ~).
// On a terminal the line overwrites itself; otherwise the first plain line comes once
// kFirstLineSeconds have passed and the next every 30 s, so a log shows soon that the run is
// alive without filling up; PSI_PROGRESS_SECONDS sets the period, first line included (0: at
// every step). Between steps, long operators pulse (progress_pulse): when stderr is not a
// terminal and no line has been printed for a second more than the first line's delay since the
// start, or for the period (at least 10 s) since the last line, a plain line says where the work
// is, so that a log shows a single long step is alive too.
#include <chrono>
#include <string>

namespace psi {

// Seconds after the start of a command before its first plain progress line (or pulse) when
// stderr is not a terminal and PSI_PROGRESS_SECONDS is not set.
inline constexpr double kFirstLineSeconds = 2.0;

// Steady-clock seconds since t0: the wall times runs and reports record.
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Called often, from any thread (psi::parallel_for calls it before each task); prints at most one
// line per period, only when stderr is not a terminal: "psi: working at <last check point>,
// <seconds> s elapsed".
void progress_pulse();

class Progress {
 public:
  Progress(std::string title, long total);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  void set_total(long total);
  // Marks one more unit done, with a label of where the work is ("case 2/9 stage 1 step 3").
  void step(const std::string& where);
  void note(const std::string& line);  // a line that stays (printed above the progress line)
  void finish();
  static bool enabled();  // stderr is a terminal
  // Adds `n` to the parts this thread's command line will show (a driver declares its runs as it
  // learns them): parts are numbered "part i/n" against the count, and not at all without one.
  static void expect_parts(long n);

 private:
  using Clock = std::chrono::steady_clock;
  void draw(const Progress& part, const std::string& where);
  std::string title_;
  long total_;
  long done_ = 0;
  bool finished_ = false;
  Clock::time_point start_;
  Progress* owner_ = nullptr;  // the line's owner when this is a part; null for the owner
  int parts_ = 0;              // owner: parts begun so far
  long parts_expected_ = 0;    // owner: parts declared by expect_parts
  int part_index_ = 0;         // part: its number under the owner
  Clock::time_point last_plain_;
  bool printed_ = false;        // owner: a plain line has been printed
  long parts_units_done_ = 0;   // owner: units of the parts finished
  long parts_units_total_ = 0;  // owner: their totals
};

}  // namespace psi
