#include "sandbox/internal/stderr_capture.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace envforge::sandbox::internal {

namespace asio = boost::asio;

namespace {
constexpr size_t kChunkBytes = 64 * 1024;
constexpr int kReadsPerWakeup = 64;  // 4 MiB, then other descriptors get their turn
}  // namespace

std::string EscapeOutput(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size());
  for (char ch : bytes) {
    auto byte = static_cast<unsigned char>(ch);
    if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\t') {
      out += "\\t";
    } else if (ch == '\\') {
      out += "\\\\";
    } else if (byte >= 0x20 && byte < 0x7f) {
      out += ch;
    } else {
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    }
  }
  return out;
}

std::shared_ptr<StderrCapture> StderrCapture::Create(asio::io_context& io, UniqueFd read_end,
                                                     StderrCaptureOptions options) {
  return std::make_shared<StderrCapture>(io, std::move(read_end), std::move(options));
}

StderrCapture::StderrCapture(asio::io_context& io, UniqueFd read_end, StderrCaptureOptions options)
    : pipe_(io), options_(std::move(options)) {
  (void)SetNonBlocking(read_end.get(), true);
  pipe_.assign(read_end.Release());
}

void StderrCapture::Start() { ArmRead(); }

void StderrCapture::ArmRead() {
  if (!pipe_.is_open()) return;
  pipe_.async_wait(asio::posix::descriptor_base::wait_read,
                   [self = shared_from_this()](const boost::system::error_code& ec) {
                     if (ec || !self->pipe_.is_open()) return;
                     if (self->ReadAvailable()) self->ArmRead();
                   });
}

void StderrCapture::DrainNow() {
  if (pipe_.is_open()) (void)ReadAvailable();
}

bool StderrCapture::ReadAvailable() {
  // One read buffer for every capture of the io thread: idle captures hold none.
  thread_local std::unique_ptr<char[]> chunk(new char[kChunkBytes]);
  for (int round = 0; round < kReadsPerWakeup; ++round) {
    ssize_t n = ::read(pipe_.native_handle(), chunk.get(), kChunkBytes);
    if (n > 0) {
      std::string_view bytes(chunk.get(), static_cast<size_t>(n));
      Keep(bytes);
      if (options_.log_level && *options_.log_level >= GetLogLevel()) LogLines(bytes);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    Close();  // end of stream: every writer is gone
    return false;
  }
  return true;
}

void StderrCapture::Keep(std::string_view bytes) {
  total_ += bytes.size();
  if (head_.size() < options_.head_bytes) {
    size_t take = std::min(bytes.size(), options_.head_bytes - head_.size());
    head_.append(bytes.substr(0, take));
    bytes.remove_prefix(take);
  }
  if (options_.tail_bytes == 0 || bytes.empty()) return;
  if (bytes.size() >= options_.tail_bytes) {
    tail_.assign(bytes.substr(bytes.size() - options_.tail_bytes));
    return;
  }
  tail_.append(bytes);
  if (tail_.size() >= 2 * options_.tail_bytes) tail_.erase(0, tail_.size() - options_.tail_bytes);
}

std::string StderrCapture::Excerpt() const {
  std::string_view tail = tail_;
  if (tail.size() > options_.tail_bytes) tail.remove_prefix(tail.size() - options_.tail_bytes);
  uint64_t dropped = total_ - head_.size() - tail.size();
  std::string text = EscapeOutput(head_);
  if (dropped > 0) text += "[... " + std::to_string(dropped) + " bytes not kept ...]";
  text += EscapeOutput(tail);
  return text;
}

std::string StderrCapture::Tail(size_t max_bytes) const {
  std::string kept = head_;
  if (total_ > head_.size() + tail_.size()) kept.clear();  // a gap: only the tail is the end
  kept += tail_;
  max_bytes = std::min(max_bytes, std::max(options_.tail_bytes, head_.size()));
  if (kept.size() > max_bytes) kept.erase(0, kept.size() - max_bytes);
  return EscapeOutput(kept);
}

void StderrCapture::LogLines(std::string_view bytes) {
  while (!bytes.empty()) {
    size_t newline = bytes.find('\n');
    std::string_view piece = bytes.substr(0, newline);
    if (!partial_cut_) {
      size_t room = options_.max_line_bytes - std::min(options_.max_line_bytes, partial_line_.size());
      partial_line_.append(piece.substr(0, room));
      if (piece.size() > room) {
        EmitLine(partial_line_, true);
        partial_line_.clear();
        partial_cut_ = true;
      }
    }
    if (newline == std::string_view::npos) return;
    if (!partial_cut_) EmitLine(partial_line_, false);
    partial_line_.clear();
    partial_cut_ = false;
    bytes.remove_prefix(newline + 1);
  }
}

void StderrCapture::EmitLine(std::string_view line, bool cut) {
  auto now = std::chrono::steady_clock::now();
  if (now - window_start_ >= std::chrono::seconds(1)) {
    if (suppressed_lines_ > 0) {
      LogLine(*options_.log_level, __FILE__, __LINE__,
              options_.label + " stderr: " + std::to_string(suppressed_lines_) + " lines not logged (rate limit)");
    }
    window_start_ = now;
    window_lines_ = 0;
    suppressed_lines_ = 0;
  }
  if (window_lines_ >= options_.log_lines_per_second) {
    ++suppressed_lines_;
    return;
  }
  ++window_lines_;
  LogLine(*options_.log_level, __FILE__, __LINE__,
          options_.label + " stderr: " + EscapeOutput(line) + (cut ? " [line cut]" : ""));
}

void StderrCapture::Close() {
  boost::system::error_code ignored;
  pipe_.close(ignored);
}

}  // namespace envforge::sandbox::internal
