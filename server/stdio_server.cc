// Newline-delimited JSON-RPC over a pair of streams (contract in server/stdio_server.h).
#include "server/stdio_server.h"

#include <condition_variable>
#include <istream>
#include <memory>
#include <mutex>
#include <ostream>
#include <streambuf>
#include <string>

#include "base/error_table.h"
#include "base/log.h"

namespace envforge::server {

// Answers leave from arbitrary threads; this keeps them whole lines and counts the requests that
// still owe one.
class StdioServer::Lines {
 public:
  explicit Lines(std::ostream& out) : out_(out) {}

  void Write(const std::string& line) {
    std::lock_guard lock(mutex_);
    out_ << line << '\n';
    out_.flush();
  }
  void Begin() {
    std::lock_guard lock(mutex_);
    ++pending_;
  }
  void End() {
    std::lock_guard lock(mutex_);
    if (--pending_ == 0) idle_.notify_all();
  }
  void WaitIdle() {
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [this] { return pending_ == 0; });
  }
  bool WaitIdle(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    return idle_.wait_for(lock, timeout, [this] { return pending_ == 0; });
  }

 private:
  std::ostream& out_;
  std::mutex mutex_;
  std::condition_variable idle_;
  size_t pending_ = 0;
};

namespace {

enum class LineRead { kLine, kTooLong, kEnd };

// Reads up to the next '\n' (or end of input) into *line, keeping at most max_bytes; a longer
// line is consumed to its end and reported as kTooLong.
LineRead ReadLine(std::streambuf& buffer, size_t max_bytes, std::string* line) {
  line->clear();
  bool too_long = false;
  bool any = false;
  for (;;) {
    int c = buffer.sbumpc();
    if (c == std::char_traits<char>::eof()) {
      if (!any) return LineRead::kEnd;
      break;
    }
    any = true;
    if (c == '\n') break;
    if (too_long) continue;
    if (line->size() >= max_bytes) {
      too_long = true;
      line->clear();
      line->shrink_to_fit();
      continue;
    }
    line->push_back(static_cast<char>(c));
  }
  if (too_long) return LineRead::kTooLong;
  if (!line->empty() && line->back() == '\r') line->pop_back();
  return LineRead::kLine;
}

bool IsBlank(const std::string& line) { return line.find_first_not_of(" \t\r") == std::string::npos; }

}  // namespace

StdioServer::StdioServer(RpcService& service, std::ostream& out, StdioServerOptions options)
    : service_(service), options_(options), lines_(std::make_shared<Lines>(out)) {}

StdioServer::~StdioServer() = default;

bool StdioServer::WaitIdle(std::chrono::milliseconds timeout) { return lines_->WaitIdle(timeout); }

Status RunStdioServer(RpcService& service, std::istream& in, std::ostream& out, StdioServerOptions options) {
  return StdioServer(service, out, options).Run(in);
}

Status StdioServer::Run(std::istream& in) {
  const StdioServerOptions& options = options_;
  RpcService& service = service_;
  const std::shared_ptr<Lines>& writer = lines_;
  RequestContext context;
  context.dialect = options.dialect;
  context.peer = "stdio";
  context.transport = "stdio";
  std::streambuf* buffer = in.rdbuf();
  if (buffer == nullptr) return InvalidArgumentError("stdio server: the input stream has no buffer");
  std::string line;
  for (;;) {
    LineRead read = ReadLine(*buffer, options.max_line_bytes, &line);
    if (read == LineRead::kEnd) break;
    if (read == LineRead::kTooLong) {
      ENVFORGE_LOG(kWarn) << "stdio: skipped a line over " << options.max_line_bytes << " bytes";
      writer->Write(RpcService::ErrorResponse(
          nullptr, kRpcPayloadTooLarge,
          "payload too large: a line exceeds " + std::to_string(options.max_line_bytes) + " bytes"));
      continue;
    }
    if (IsBlank(line)) continue;
    writer->Begin();
    service.HandleAsync(std::move(line), context, [writer](std::optional<std::string> response) {
      if (response) writer->Write(*response);
      writer->End();
    });
    line = std::string();
  }
  writer->WaitIdle();
  if (in.bad()) return InternalError("stdio server: reading the input failed");
  return Status::Ok();
}

}  // namespace envforge::server
