// Runs the real envforge binary (beside the test binary in build/bin) with the arguments and
// returns its exit status and output; a command that cannot be run at all fails the test.
#pragma once

#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "base/fd.h"
#include "base/subprocess.h"

namespace envforge::testing {

inline CommandOutput Envforge(std::vector<std::string> args) {
  args.insert(args.begin(), ExecutableDirectory() + "/envforge");
  CommandOptions options;
  options.timeout = std::chrono::seconds(120);
  auto output = RunCommand(args, options);
  REQUIRE(output.ok());
  return *output;
}

// Starts the envforge binary with `args` in the background, output discarded, with the default
// disposition of every signal (a shell's background job would ignore SIGINT).
inline pid_t StartEnvforge(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {ExecutableDirectory() + "/envforge"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> pointers;
  for (auto& arg : argv) pointers.push_back(arg.data());
  pointers.push_back(nullptr);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::dup2(null, 2);
    for (int signal_number : {SIGINT, SIGTERM, SIGHUP}) ::signal(signal_number, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execv(pointers[0], pointers.data());
    ::_exit(127);
  }
  return pid;
}

// Polls `ready` for up to a minute.
inline bool WaitUntil(const std::function<bool()>& ready) {
  for (int i = 0; i < 1200; ++i) {
    if (ready()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return ready();
}

}  // namespace envforge::testing
