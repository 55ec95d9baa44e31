// Test utilities for the trajectory viewer (server/ui_api.h): GETs over a raw connection, and the
// page rendered by headless Chromium from Debian.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/subprocess.h"
#include "tests/server/transport_test_util.h"

namespace envforge::server::testing {

inline RawResponse UiRequest(uint16_t port, const std::string& method, const std::string& path,
                             const std::string& token = "tok") {
  RawConnection connection(port);
  std::vector<std::string> headers = {"Connection: close"};
  if (!token.empty()) headers.push_back("Authorization: Bearer " + token);
  REQUIRE(connection.Send(HttpRequestText(method, path, method == "POST" ? "{}" : "", headers)));
  auto response = connection.ReadResponse(std::chrono::seconds(120));
  REQUIRE(response.has_value());
  return *response;
}

inline Json UiJson(uint16_t port, const std::string& method, const std::string& path,
                   const std::string& token = "tok") {
  RawResponse response = UiRequest(port, method, path, token);
  INFO(method << " " << path << " -> " << response.status << " " << response.body);
  REQUIRE(response.status == 200);
  return ParseJson(response.body).value();
}

// The DOM after the page's scripts ran (and a screenshot at `screenshot`), or nullopt when
// /usr/bin/chromium is not installed. One browser start does both (each start costs seconds).
inline std::optional<std::string> BrowserPage(const std::string& url, const std::string& screenshot) {
  if (access("/usr/bin/chromium", X_OK) != 0) return std::nullopt;
  std::filesystem::remove(screenshot);
  const std::vector<std::string> command = {"/usr/bin/chromium",
                                            "--headless=new",
                                            "--no-sandbox",
                                            "--disable-gpu",
                                            "--no-first-run",
                                            "--virtual-time-budget=10000",
                                            "--window-size=1280,900",
                                            "--screenshot=" + screenshot,
                                            "--dump-dom",
                                            url};
  CommandOptions options;
  options.timeout = std::chrono::seconds(90);
  auto dom = RunCommand(command, options);
  REQUIRE(dom.ok());
  INFO(dom->stderr_text);
  REQUIRE(dom->exit_code == 0);
  REQUIRE(std::filesystem::exists(screenshot));
  CHECK(std::filesystem::file_size(screenshot) > 1000);
  return dom->stdout_text;
}

// Where the browser tests leave their screenshots for a person to look at.
inline std::filesystem::path ScreenshotDirectory() {
  const std::filesystem::path shots = std::filesystem::path(ExecutableDirectory()) / ".." / "ui-screenshots";
  std::filesystem::create_directories(shots);
  return shots;
}

}  // namespace envforge::server::testing
