#pragma once
// Progress display for long work: one self-overwriting line on a terminal (stderr), nothing
// when stderr is not a terminal. Shows the labels given (experiment, case, stage, step, block),
// done/total and an ETA from the elapsed time.
#include <chrono>
#include <string>

namespace psi {

class Progress {
 public:
  Progress(std::string title, long total);
  ~Progress();
  void set_total(long total) { total_ = total; }
  // Marks one more unit done, with a label of where the work is ("case 2/9 stage 1 step 3").
  void step(const std::string& where);
  void note(const std::string& line);  // a line that stays (printed above the progress line)
  void finish();
  static bool enabled();

 private:
  void draw(const std::string& where);
  std::string title_;
  long total_;
  long done_ = 0;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace psi
