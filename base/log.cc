#include "base/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <ctime>
#include <string>

namespace envforge {
namespace {

LogLevel InitialLevel() {
  LogLevel level = LogLevel::kWarn;
  if (const char* env = std::getenv("ENVFORGE_LOG")) ParseLogLevel(env, &level);
  return level;
}

std::atomic<LogLevel>& LevelSlot() {
  static std::atomic<LogLevel> level{InitialLevel()};
  return level;
}

}  // namespace

void SetLogLevel(LogLevel level) { LevelSlot().store(level, std::memory_order_relaxed); }
LogLevel GetLogLevel() { return LevelSlot().load(std::memory_order_relaxed); }

bool ParseLogLevel(std::string_view name, LogLevel* level) {
  if (name == "debug")
    *level = LogLevel::kDebug;
  else if (name == "info")
    *level = LogLevel::kInfo;
  else if (name == "warn" || name == "warning")
    *level = LogLevel::kWarn;
  else if (name == "error")
    *level = LogLevel::kError;
  else if (name == "off")
    *level = LogLevel::kOff;
  else
    return false;
  return true;
}

void LogLine(LogLevel level, std::string_view file, int line, std::string_view message) {
  static constexpr const char* kNames[] = {"D", "I", "W", "E", "-"};
  std::string_view base = file;
  if (auto slash = base.rfind('/'); slash != std::string_view::npos) base = base.substr(slash + 1);
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  tm parts{};
  gmtime_r(&now.tv_sec, &parts);
  char stamp[32];
  strftime(stamp, sizeof stamp, "%H:%M:%S", &parts);
  std::string out;
  out.reserve(message.size() + 64);
  out += kNames[static_cast<int>(level)];
  out += ' ';
  out += stamp;
  out += ' ';
  out += base;
  out += ':';
  out += std::to_string(line);
  out += "] ";
  out += message;
  out += '\n';
  // One write keeps lines from concurrent threads and processes whole.
  ssize_t ignored = ::write(STDERR_FILENO, out.data(), out.size());
  (void)ignored;
}

}  // namespace envforge
