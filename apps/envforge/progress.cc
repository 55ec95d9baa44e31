#include "apps/envforge/progress.h"

#include <unistd.h>

#include <cstdio>

namespace envforge::cli {

Progress::Progress(std::string label, size_t total)
    : label_(std::move(label)),
      total_(total),
      tty_(::isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()),
      last_print_(start_) {}

Progress::~Progress() {
  if (!finished_ && tty_) std::fputc('\n', stderr);
}

void Progress::Update(size_t done, const std::string& detail) {
  auto now = std::chrono::steady_clock::now();
  // A terminal gets ~10 refreshes a second; a log gets a line every 2 s.
  auto period = tty_ ? std::chrono::milliseconds(100) : std::chrono::milliseconds(2000);
  if (now - last_print_ < period) return;
  last_print_ = now;
  Print(done, detail, false);
}

void Progress::Finish(const std::string& detail) {
  finished_ = true;
  Print(total_, detail, true);
}

void Progress::Print(size_t done, const std::string& detail, bool final_line) {
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  char counts[64];
  if (total_ > 0) {
    std::snprintf(counts, sizeof counts, "%zu/%zu", done, total_);
  } else {
    std::snprintf(counts, sizeof counts, "%zu", done);
  }
  std::string bar;
  if (total_ > 0) {
    size_t width = 24, filled = done >= total_ ? width : done * width / total_;
    bar = "[" + std::string(filled, '#') + std::string(width - filled, '.') + "] ";
  }
  std::fprintf(stderr, "%s%s: %s%s %.1fs%s%s%s", tty_ ? "\r\033[K" : "", label_.c_str(), bar.c_str(), counts, seconds,
               detail.empty() ? "" : "  ", detail.c_str(), (tty_ && !final_line) ? "" : "\n");
  std::fflush(stderr);
}

}  // namespace envforge::cli
