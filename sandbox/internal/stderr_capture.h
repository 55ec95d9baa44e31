// The manager's end of a worker process's stderr pipe (a session's, or a zygote's): drained on
// the io thread as fast as the process writes, so a writer never blocks on it, and kept bounded:
// the first head_bytes and the last tail_bytes are kept, the rest only counted. Nothing of it
// reaches the server's stderr raw: when log_level is set, complete lines (cut at
// max_line_bytes) are logged at that level as "<label> stderr: <escaped line>", at most
// log_lines_per_second of them (one "N lines not logged" line says what was dropped).
//
// Thread safety: none; Create, every method and the callbacks belong to the io thread.
// Lifetime: the pending read holds a shared_ptr; Close() cancels it.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/fd.h"
#include "base/log.h"

namespace envforge::sandbox::internal {

struct StderrCaptureOptions {
  size_t head_bytes = 4096;
  size_t tail_bytes = 4096;
  std::optional<LogLevel> log_level;  // unset: nothing is logged
  size_t max_line_bytes = 512;
  size_t log_lines_per_second = 20;
  std::string label;  // "session 12", "zygote 345 for environment x (3f2a9c01)"
};

// Printable ASCII as it is; '\n' as "\n", '\t' as "\t", '\\' as "\\", every other byte as
// "\xNN": the result is one line of plain ASCII whatever the bytes were.
std::string EscapeOutput(std::string_view bytes);

class StderrCapture : public std::enable_shared_from_this<StderrCapture> {
 public:
  // Takes the read end of the pipe (made non-blocking here).
  static std::shared_ptr<StderrCapture> Create(boost::asio::io_context& io, UniqueFd read_end,
                                               StderrCaptureOptions options);
  StderrCapture(boost::asio::io_context& io, UniqueFd read_end, StderrCaptureOptions options);

  // Starts draining; the pipe is closed at its end of stream or on Close().
  void Start();
  // Drains what the pipe holds right now without waiting (the writer may be gone: its last
  // words are in the pipe), then keeps going as before.
  void DrainNow();
  void Close();

  uint64_t total_bytes() const { return total_; }
  // Head, then "[... N bytes not kept ...]" when bytes were dropped, then the tail; escaped.
  std::string Excerpt() const;
  // The last max_bytes bytes written (at most tail_bytes), escaped.
  std::string Tail(size_t max_bytes) const;

 private:
  void ArmRead();
  // Reads what is available without blocking; false at end of stream or on an error.
  bool ReadAvailable();
  void Keep(std::string_view bytes);
  void LogLines(std::string_view bytes);
  void EmitLine(std::string_view line, bool cut);

  boost::asio::posix::stream_descriptor pipe_;
  StderrCaptureOptions options_;
  std::string head_;
  std::string tail_;  // the last tail_bytes after the head (trimmed when twice that)
  uint64_t total_ = 0;
  std::string partial_line_;
  bool partial_cut_ = false;  // the current line was already cut at max_line_bytes
  std::chrono::steady_clock::time_point window_start_{};
  size_t window_lines_ = 0;
  uint64_t suppressed_lines_ = 0;
};

}  // namespace envforge::sandbox::internal
