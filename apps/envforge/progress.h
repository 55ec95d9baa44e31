// Progress reporting for long CLI commands: a single rewritten line on a terminal, or a plain
// line every few seconds when stderr is a file or pipe (CI logs). Always on stderr, so --json
// output on stdout stays machine-readable.
#pragma once

#include <chrono>
#include <string>

namespace envforge::cli {

class Progress {
 public:
  // `total` may be 0 when unknown.
  Progress(std::string label, size_t total);
  ~Progress();
  void Update(size_t done, const std::string& detail = {});
  void Finish(const std::string& detail = {});

 private:
  void Print(size_t done, const std::string& detail, bool final_line);
  std::string label_;
  size_t total_;
  bool tty_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_print_;
};

}  // namespace envforge::cli
