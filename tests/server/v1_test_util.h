// Helpers of the /v1 suites: the real `envforge serve` binary with a backend on an ephemeral port,
// the scripted backend's answers, and a plain HTTP/1.1 client (Boost.Beast, synchronous) that reads whole responses,
// chunked event streams included, and splits server-sent events.
#pragma once

#include <doctest/doctest.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/fd.h"
#include "base/json.h"
#include "inference/chat_format.h"
#include "tests/server/transport_test_util.h"
#include "tests/temp_dir.h"

namespace envforge::server::testing {

// `envforge serve --envs <empty dir> --port 0 ...extra` (extra: --backend, --model, --token, ...).
class V1Server {
 public:
  explicit V1Server(std::vector<std::string> extra) {
    std::filesystem::create_directories(dir / "envs");
    std::vector<std::string> argv = {ExecutableDirectory() + "/envforge",
                                     "serve",
                                     "--envs",
                                     dir / "envs",
                                     "--port",
                                     "0",
                                     "--port-file",
                                     dir / "port"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    child.emplace(argv, dir / "serve.stderr");
    bool listening = WaitFor([&] { return ReadFileToString(dir / "port").ok(); }, std::chrono::seconds(120));
    INFO(child->StderrText());
    REQUIRE(listening);
    port = static_cast<uint16_t>(std::stoi(*ReadFileToString(dir / "port")));
  }

  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port); }

  envforge::testing::TempDir dir;
  std::optional<ChildProcess> child;
  uint16_t port = 0;
};

struct HttpReply {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  Json json() const {
    auto parsed = ParseJson(body, "response body");
    INFO(body);
    REQUIRE(parsed.ok());
    return *parsed;
  }
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
};

// One request on a fresh connection (closed after it). status 0 when the exchange failed.
inline HttpReply HttpCall(uint16_t port, const std::string& method, const std::string& target,
                          const std::string& body = "", std::vector<std::pair<std::string, std::string>> headers = {}) {
  namespace beast = boost::beast;
  namespace http = beast::http;
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket socket(io);
  HttpReply reply;
  beast::error_code ec;
  socket.connect({boost::asio::ip::make_address("127.0.0.1"), port}, ec);
  if (ec) return reply;
  http::request<http::string_body> request{http::string_to_verb(method), target, 11};
  request.set(http::field::host, "127.0.0.1");
  if (method == "POST") request.set(http::field::content_type, "application/json");
  for (const auto& [name, value] : headers) request.set(name, value);
  request.body() = body;
  request.prepare_payload();
  http::write(socket, request, ec);
  if (ec) return reply;
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(1u << 30);
  http::read(socket, buffer, parser, ec);
  if (ec) return reply;
  const auto& response = parser.get();
  reply.status = response.result_int();
  for (const auto& field : response) {
    std::string name(field.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    reply.headers[name] = std::string(field.value());
  }
  reply.body = response.body();
  return reply;
}

inline HttpReply PostJson(uint16_t port, const std::string& target, const Json& body,
                          std::vector<std::pair<std::string, std::string>> headers = {}) {
  return HttpCall(port, "POST", target, DumpJson(body), std::move(headers));
}

// The "data:" payloads of an event stream, in order ("[DONE]" kept as a string).
inline std::vector<std::string> SseData(const std::string& body) {
  std::vector<std::string> events;
  size_t at = 0;
  while (at < body.size()) {
    size_t end = body.find("\n\n", at);
    std::string event = body.substr(at, end == std::string::npos ? std::string::npos : end - at);
    if (event.rfind("data: ", 0) == 0) events.push_back(event.substr(6));
    if (end == std::string::npos) break;
    at = end + 2;
  }
  return events;
}

// The JSON chunks of an event stream (REQUIREs the final [DONE]).
inline std::vector<Json> SseChunks(const std::string& body) {
  std::vector<std::string> events = SseData(body);
  INFO(body);
  REQUIRE(!events.empty());
  REQUIRE(events.back() == "[DONE]");
  std::vector<Json> chunks;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    auto chunk = ParseJson(events[i], "event");
    REQUIRE(chunk.ok());
    chunks.push_back(*chunk);
  }
  return chunks;
}

// What the chunks of choice `index` add up to: delta.<field> (chat) or text (completions).
inline std::string Concatenated(const std::vector<Json>& chunks, const std::string& field, int64_t index = 0) {
  std::string text;
  for (const Json& chunk : chunks) {
    for (const Json& choice : chunk["choices"]) {
      if (choice["index"] != index) continue;
      if (field == "text") {
        text += choice.value("text", "");
      } else if (choice.contains("delta") && choice["delta"].contains(field) && choice["delta"][field].is_string()) {
        text += choice["delta"][field].get<std::string>();
      }
    }
  }
  return text;
}

// A DSV32 completion in thinking mode: reasoning, content, one tool call, EOS.
inline std::string DsmlCompletion() {
  inference::ChatToolCall call;
  call.name = "search";
  call.arguments = Json{{"q", "hotels in Paris"}, {"limit", 3}};
  return std::string("I should search the hotels.") + std::string(inference::kThinkEnd) + "Searching now." +
         inference::RenderToolCalls({call}) + std::string(inference::kEosToken);
}

// Every answer is a `when` line (picked by the last message's text), so requests may come in any
// order; the one script line answers anything else.
inline std::string WriteV1Script(const envforge::testing::TempDir& dir) {
  std::vector<Json> lines = {
      Json{{"when", "greet"}, {"content", "Hello there!"}, {"reasoning_content", "The user greets me."}},
      Json{{"when", "weather"},
           {"content", "Let me check."},
           {"tool_calls",
            Json::array({Json{{"name", "get_weather"}, {"arguments", Json{{"city", "Paris"}}}, {"id", "call_w1"}}})}},
      Json{{"when", "dsml"}, {"text", DsmlCompletion()}},
      Json{{"when", "fall over"}, {"error", "unavailable"}, {"message", "upstream fell over"}},
      Json{{"when", "very long"},
           {"error", "invalid_argument"},
           {"message", "context length exceeded: 9000 tokens, the window is 4096"}},
      Json{{"when", "slow"}, {"content", "slow answer"}, {"sleep_ms", 1500}},
      Json{{"content", "default answer"}},
  };
  std::string text;
  for (const Json& line : lines) text += DumpJson(line) + "\n";
  std::string path = dir / "script.jsonl";
  REQUIRE(WriteFileAtomically(path, text).ok());
  return path;
}

// `envforge serve --backend scripted:<WriteV1Script> --model-name tiny-scripted ...extra`.
struct ScriptedServer {
  explicit ScriptedServer(std::vector<std::string> extra = {}) : server(Args(std::move(extra))) {}
  std::vector<std::string> Args(std::vector<std::string> extra) {
    std::vector<std::string> args = {"--backend", "scripted:" + WriteV1Script(script_dir), "--model-name",
                                     "tiny-scripted"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
  envforge::testing::TempDir script_dir;
  V1Server server;
};

inline Json UserChat(const std::string& text, Json extra = Json::object()) {
  Json body{{"messages", Json::array({Json{{"role", "user"}, {"content", text}}})}};
  for (auto& [key, value] : extra.items()) body[key] = value;
  return body;
}

}  // namespace envforge::server::testing
