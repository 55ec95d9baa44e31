// envforge bench v1: load on a running `envforge serve`'s OpenAI-compatible /v1 endpoint.
//
//   envforge bench v1 --url http://HOST:PORT [--concurrency 32] [--requests N] [--max-tokens M]
//                     [--model NAME] [--token T] [--json]
//
// --concurrency clients (one thread and one keep-alive connection each, Boost.Beast, synchronous:
// a client waits for each answer, as an agent does) send POST /v1/chat/completions, each with its
// own seed, until --requests (default 4 x concurrency) have been answered in all. Reported: requests/s,
// completion tokens/s (from the answers' usage), latency p50/p99 from writing a request to
// reading its whole answer, and the errors by status. Exit code 1 when any request failed.
#include <algorithm>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "apps/envforge/cli_args.h"
#include "apps/envforge/commands.h"
#include "apps/envforge/percentiles.h"
#include "base/json.h"

namespace envforge::cli {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

struct BenchV1Config {
  std::string url;
  std::string host;
  std::string port;
  std::string model;
  std::string token;
  int concurrency = 32;
  int64_t requests = 128;
  int64_t max_tokens = 16;
};

// What one client saw.
struct ClientTally {
  std::vector<double> latencies_ms;
  int64_t completion_tokens = 0;
  int64_t prompt_tokens = 0;
  std::map<std::string, int64_t> errors;  // "status 503", "connection: ..."
};

// "http://HOST:PORT" with an optional trailing "/" or "/v1".
Status ParseV1Url(const std::string& url, BenchV1Config* config) {
  constexpr std::string_view kScheme = "http://";
  if (url.rfind(kScheme, 0) != 0)
    return InvalidArgumentError("envforge bench v1: --url must be http://HOST:PORT, got '" + url + "'");
  std::string rest = url.substr(kScheme.size());
  for (std::string_view suffix : {"/v1/", "/v1", "/"}) {
    if (rest.size() > suffix.size() && rest.compare(rest.size() - suffix.size(), suffix.size(), suffix) == 0) {
      rest.resize(rest.size() - suffix.size());
      break;
    }
  }
  size_t colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == rest.size() || rest.find('/') != std::string::npos) {
    return InvalidArgumentError("envforge bench v1: --url must be http://HOST:PORT, got '" + url + "'");
  }
  config->host = rest.substr(0, colon);
  if (config->host.size() > 2 && config->host.front() == '[')
    config->host = config->host.substr(1, config->host.size() - 2);
  config->port = rest.substr(colon + 1);
  return Status::Ok();
}

std::string RequestBody(const BenchV1Config& config, int64_t index) {
  Json body{{"messages", Json::array({Json{{"role", "user"},
                                           {"content", "Find the cheapest hotel in Paris for guest " +
                                                           std::to_string(index % 8) + "."}}})},
            {"max_tokens", config.max_tokens},
            {"seed", index},
            {"temperature", 1.0}};
  if (!config.model.empty()) body["model"] = config.model;
  return DumpJson(body);
}

// One client: a keep-alive connection (re-opened after an error), requests taken from `next`.
void RunClient(const BenchV1Config& config, std::atomic<int64_t>& next, ClientTally& tally) {
  net::io_context io;
  std::optional<beast::tcp_stream> stream;
  beast::flat_buffer buffer;
  for (;;) {
    int64_t index = next.fetch_add(1);
    if (index >= config.requests) return;
    beast::error_code ec;
    if (!stream) {
      tcp::resolver resolver(io);
      auto endpoints = resolver.resolve(config.host, config.port, ec);
      if (!ec) {
        stream.emplace(io);
        stream->connect(endpoints, ec);
      }
      if (ec) {
        ++tally.errors["connection: " + ec.message()];
        stream.reset();
        continue;
      }
    }
    http::request<http::string_body> request{http::verb::post, "/v1/chat/completions", 11};
    request.set(http::field::host, config.host);
    request.set(http::field::content_type, "application/json");
    if (!config.token.empty()) request.set(http::field::authorization, "Bearer " + config.token);
    request.body() = RequestBody(config, index);
    request.prepare_payload();
    auto started = std::chrono::steady_clock::now();
    http::response_parser<http::string_body> parser;
    parser.body_limit(64u << 20);
    http::write(*stream, request, ec);
    if (!ec) http::read(*stream, buffer, parser, ec);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
    if (ec) {
      ++tally.errors["connection: " + ec.message()];
      stream.reset();
      buffer.clear();
      continue;
    }
    const auto& response = parser.get();
    if (response.result_int() != 200) {
      ++tally.errors["status " + std::to_string(response.result_int())];
    } else {
      auto body = ParseJson(response.body(), "answer");
      if (!body.ok() || !body->contains("usage")) {
        ++tally.errors["malformed answer"];
      } else {
        tally.latencies_ms.push_back(ms);
        tally.completion_tokens += (*body)["usage"].value("completion_tokens", int64_t{0});
        tally.prompt_tokens += (*body)["usage"].value("prompt_tokens", int64_t{0});
      }
    }
    if (!response.keep_alive()) stream.reset();
  }
}

Result<BenchV1Config> ConfigFrom(const ParsedArgs& parsed) {
  BenchV1Config config;
  auto url = parsed.Option("--url");
  if (!url)
    return InvalidArgumentError(
        "envforge bench v1: --url http://HOST:PORT is required (a running envforge serve with --model)");
  config.url = *url;
  ENVFORGE_RETURN_IF_ERROR(ParseV1Url(*url, &config));
  ENVFORGE_ASSIGN_OR_RETURN(long long concurrency, parsed.IntOption("--concurrency", 1, 4096));
  ENVFORGE_ASSIGN_OR_RETURN(long long requests,
                            parsed.ComputedIntOption("--requests", 4 * concurrency, 1, 100'000'000));
  ENVFORGE_ASSIGN_OR_RETURN(long long max_tokens, parsed.IntOption("--max-tokens", 1, 1 << 20));
  config.concurrency = static_cast<int>(concurrency);
  config.requests = requests;
  config.max_tokens = max_tokens;
  config.model = parsed.OptionOr("--model");
  config.token = parsed.OptionOr("--token");
  if (config.token.empty()) {
    if (const char* from_env = std::getenv("ENVFORGE_SERVE_TOKEN"); from_env != nullptr) config.token = from_env;
  }
  return config;
}

int V1(const ParsedArgs& parsed) {
  auto config = ConfigFrom(parsed);
  if (!config.ok()) return Fail(config.status(), kExitUsage);

  std::atomic<int64_t> next{0};
  std::vector<ClientTally> tallies(static_cast<size_t>(config->concurrency));
  auto started = std::chrono::steady_clock::now();
  std::vector<std::thread> clients;
  for (auto& tally : tallies) clients.emplace_back([&config, &next, &tally] { RunClient(*config, next, tally); });
  for (auto& client : clients) client.join();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  ClientTally all;
  for (const auto& tally : tallies) {
    all.latencies_ms.insert(all.latencies_ms.end(), tally.latencies_ms.begin(), tally.latencies_ms.end());
    all.completion_tokens += tally.completion_tokens;
    all.prompt_tokens += tally.prompt_tokens;
    for (const auto& [what, count] : tally.errors) all.errors[what] += count;
  }
  int64_t answered = static_cast<int64_t>(all.latencies_ms.size());
  int64_t failed = 0;
  for (const auto& [what, count] : all.errors) failed += count;
  Json figures{{"url", config->url},
               {"concurrency", config->concurrency},
               {"requests", answered},
               {"failed", failed},
               {"errors", all.errors},
               {"max_tokens", config->max_tokens},
               {"seconds", seconds},
               {"requests_per_s", answered / seconds},
               {"completion_tokens", all.completion_tokens},
               {"completion_tokens_per_s", static_cast<double>(all.completion_tokens) / seconds},
               {"prompt_tokens", all.prompt_tokens},
               {"latency_ms", {{"p50", Quantile(all.latencies_ms, 0.5)}, {"p99", Quantile(all.latencies_ms, 0.99)}}}};
  if (parsed.Has("--json")) {
    std::printf("%s\n", figures.dump(2).c_str());
  } else {
    std::printf("%s: %lld requests answered (%lld failed) by %d concurrent clients in %.2f s\n", config->url.c_str(),
                static_cast<long long>(answered), static_cast<long long>(failed), config->concurrency, seconds);
    std::printf("  requests/s           %10.2f\n", figures["requests_per_s"].get<double>());
    std::printf("  completion tokens/s  %10.1f   (%lld tokens, max_tokens %lld)\n",
                figures["completion_tokens_per_s"].get<double>(), static_cast<long long>(all.completion_tokens),
                static_cast<long long>(config->max_tokens));
    std::printf("  latency              p50 %8.1f ms   p99 %8.1f ms\n", figures["latency_ms"]["p50"].get<double>(),
                figures["latency_ms"]["p99"].get<double>());
    for (const auto& [what, count] : all.errors)
      std::printf("  error: %s x %lld\n", what.c_str(), static_cast<long long>(count));
  }
  return failed == 0 ? kExitOk : kExitInfra;
}

}  // namespace

std::vector<Command> BenchV1Commands() {
  return {
      {{.name = "bench v1",
        .summary = "load a running server's /v1/chat/completions: requests/s, completion tokens/s, latency p50/p99",
        .details = "Exit 3 when a request failed.",
        .options =
            {{.name = "--url",
              .metavar = "URL",
              .help = "http://HOST:PORT of a running envforge serve with --model or --backend",
              .required = true},
             {.name = "--concurrency",
              .metavar = "C",
              .help = "clients, one request in flight each",
              .default_text = "32"},
             {.name = "--requests",
              .metavar = "N",
              .help = "requests in all",
              .default_text = "4 x concurrency",
              .computed = true},
             {.name = "--max-tokens", .metavar = "M", .help = "max_tokens of each request", .default_text = "16"},
             {.name = "--model",
              .metavar = "NAME",
              .help = "the model name sent",
              .default_text = "the server's",
              .computed = true},
             {.name = "--token", .metavar = "T", .help = "the server's bearer token (or ENVFORGE_SERVE_TOKEN)"},
             JsonOption("the figures as JSON")}},
       V1},
  };
}

}  // namespace envforge::cli
