// Levelled logging to stderr. The level comes from ENVFORGE_LOG (debug, info, warn, error, off;
// default warn) or SetLogLevel. Thread-safe: each line is written with one write(2).
#pragma once

#include <sstream>
#include <string_view>

namespace envforge {

enum class LogLevel : unsigned char { kDebug = 0, kInfo, kWarn, kError, kOff };

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
// Parses "debug", "info", "warn", "error" or "off"; false when the name is unknown.
bool ParseLogLevel(std::string_view name, LogLevel* level);
void LogLine(LogLevel level, std::string_view file, int line, std::string_view message);

}  // namespace envforge

// ENVFORGE_LOG(kWarn) << "landlock unavailable: " << why;  -- the stream is evaluated only when
// the level is enabled.
#define ENVFORGE_LOG(level)                                      \
  if (::envforge::LogLevel::level < ::envforge::GetLogLevel()) { \
  } else                                                         \
    ::envforge::internal_log::LogMessage(::envforge::LogLevel::level, __FILE__, __LINE__).stream()

namespace envforge::internal_log {
class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line) : level_(level), file_(file), line_(line) {}
  ~LogMessage() { LogLine(level_, file_, line_, stream_.str()); }
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;
  std::ostringstream& stream() { return stream_; }

 private:
  LogLevel level_;
  const char* file_;
  int line_;
  std::ostringstream stream_;
};
}  // namespace envforge::internal_log
