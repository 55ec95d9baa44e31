// `envforge env check`: everything a user needs to trust a bundle before training on it.
//   1. the bundle loads (format, reserved tables, content hash matches its content);
//   2. every tool's argument schema and every task's answer schema is valid (supported subset);
//   3. the sources pass the static rules again (analysis by envforge-worker);
//   4. the environment's zygote starts (tools, solutions and verifiers compile);
//   5. every task's gold solution runs in its own sandbox session and its verifier passes it
//      (and its oracle, tasks/<id>/oracle.py, when the task has one).
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "base/json.h"
#include "sandbox/session_manager.h"

namespace envforge::cli {

struct CheckItem {
  std::string name;  // "bundle", "schemas", "static analysis", "zygote", "task <id>"
  bool ok = false;
  std::string message;  // what failed, precisely; for tasks the verdict's reasons
  Json detail;          // tasks: {"verdict", "answer_text", "seconds"}
};

struct EnvCheckReport {
  std::string path;
  std::string env_name;
  std::string content_hash;
  bool ok = false;
  bool infra_failure = false;  // the runtime failed (not the environment)
  std::vector<CheckItem> items;

  Json ToJson() const;
  void PrintHuman(std::FILE* out) const;
};

EnvCheckReport CheckEnvironment(const std::string& envdb_path, bool show_progress,
                                const sandbox::ManagerOptions& options = {});

}  // namespace envforge::cli
