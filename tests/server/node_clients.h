// The official npm clients that the server tests drive envforge with (the MCP TypeScript SDK, the
// MCP Inspector, openai), as scripts/setup.sh installs them into <source>/.cache/node-clients
// (pinned in tests/server/node_clients/package.json). Nothing is downloaded at test time: when
// node or the clients are missing, a test says so and skips.
#pragma once

#include <doctest/doctest.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/fd.h"
#include "base/subprocess.h"
#include "tests/temp_dir.h"

namespace envforge::server::testing {

inline std::filesystem::path NodeClientsDir() {
  return std::filesystem::path(ENVFORGE_TEST_SOURCE_DIR) / ".cache" / "node-clients";
}

// nullopt when `packages` (npm names) are installed and node runs; else why not, for the skip.
inline std::optional<std::string> NodeClientsMissing(const std::vector<std::string>& packages) {
  auto node = RunCommand({"node", "--version"});
  if (!node.ok() || node->exit_code != 0) return std::string("node is not installed");
  for (const auto& package : packages) {
    if (!std::filesystem::exists(NodeClientsDir() / "node_modules" / package / "package.json")) {
      return "npm package " + package + " is not in " + NodeClientsDir().string() +
             " (scripts/setup.sh installs it; it needs npm and a reachable registry once)";
    }
  }
  return std::nullopt;
}

// A directory for one test's client script: its node_modules is a link to the installed clients,
// so that the script's `import`s resolve there without writing into the shared installation.
class NodeScriptDir {
 public:
  NodeScriptDir() {
    std::error_code ec;
    std::filesystem::create_directory_symlink(NodeClientsDir() / "node_modules", dir_.path() / "node_modules", ec);
    REQUIRE_MESSAGE(!ec, ec.message());
  }
  // Writes `source` as <dir>/<name> and returns its path.
  std::string Write(const std::string& name, const std::string& source) {
    std::string path = dir_ / name;
    REQUIRE(WriteFileAtomically(path, source).ok());
    return path;
  }

 private:
  envforge::testing::TempDir dir_;
};

}  // namespace envforge::server::testing
