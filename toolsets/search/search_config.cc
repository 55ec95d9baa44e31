// Search backend configurations: checking, JSON, opening.
#include "toolsets/search/search_config.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <vector>

#include "toolsets/search/offline_backend.h"

namespace envforge::search {
namespace {

const std::vector<std::string> kBackends = {"offline", "brave", "serper", "tavily", "searxng"};
const std::vector<std::string> kOfflineKeys = {"backend", "corpus"};
const std::vector<std::string> kLiveKeys = {
    "backend",    "api_key_env", "base_url",      "timeout_ms",         "retries",        "rate_per_s",
    "rate_burst", "cache_ttl_s", "cache_entries", "max_response_bytes", "max_page_bytes", "open_private_addresses"};

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

bool Contains(const std::vector<std::string>& items, const std::string& item) {
  return std::find(items.begin(), items.end(), item) != items.end();
}

Status Bad(const std::string& message) { return InvalidArgumentError("search config: " + message); }

Result<int64_t> Integer(const Json& config, const char* key, int64_t low, int64_t high) {
  const Json& value = config.at(key);
  if (!value.is_number_integer()) return Bad(std::string(key) + " must be an integer");
  if (value.is_number_unsigned() ? value.get<uint64_t>() > static_cast<uint64_t>(high) : value.get<int64_t>() > high) {
    return Bad(std::string(key) + " must be between " + std::to_string(low) + " and " + std::to_string(high));
  }
  int64_t number = value.get<int64_t>();
  if (number < low)
    return Bad(std::string(key) + " must be between " + std::to_string(low) + " and " + std::to_string(high));
  return number;
}

Result<double> Number(const Json& config, const char* key, double low, double high) {
  const Json& value = config.at(key);
  if (!value.is_number()) return Bad(std::string(key) + " must be a number");
  double number = value.get<double>();
  if (!std::isfinite(number) || number < low || number > high) {
    return Bad(std::string(key) + " must be between " + std::to_string(low) + " and " + std::to_string(high));
  }
  return number;
}

Result<std::string> String(const Json& config, const char* key) {
  const Json& value = config.at(key);
  if (!value.is_string() || value.get<std::string>().empty())
    return Bad(std::string(key) + " must be a non-empty string");
  return value.get<std::string>();
}

}  // namespace

Result<SearchBackendConfig> ParseSearchConfig(const Json& config) {
  if (!config.is_object()) return Bad("expected a JSON object, got " + std::string(config.type_name()));
  if (!config.contains("backend")) return Bad("no \"backend\" (one of " + Join(kBackends) + ")");
  if (!config["backend"].is_string()) return Bad("backend must be a string (one of " + Join(kBackends) + ")");
  SearchBackendConfig parsed;
  parsed.backend = config["backend"].get<std::string>();
  if (!Contains(kBackends, parsed.backend)) {
    return Bad("unknown backend '" + parsed.backend + "' (known: " + Join(kBackends) + ")");
  }
  bool offline = parsed.backend == "offline";
  const std::vector<std::string>& allowed = offline ? kOfflineKeys : kLiveKeys;
  for (const auto& [key, value] : config.items()) {
    if (Contains(allowed, key)) continue;
    if (Contains(kOfflineKeys, key) || Contains(kLiveKeys, key)) {
      return Bad("key '" + key + "' does not apply to the " + parsed.backend + " backend (" +
                 (offline ? "it is for the live backends" : "it is for the offline backend") + ")");
    }
    return Bad("unknown key '" + key + "' for the " + parsed.backend + " backend (known: " + Join(allowed) + ")");
  }
  if (offline) {
    if (!config.contains("corpus")) return Bad("the offline backend needs \"corpus\" (the corpus file)");
    ENVFORGE_ASSIGN_OR_RETURN(parsed.corpus, String(config, "corpus"));
    return parsed;
  }

  WebBackendOptions& web = parsed.web;
  if (config.contains("api_key_env")) {
    ENVFORGE_ASSIGN_OR_RETURN(web.api_key_env, String(config, "api_key_env"));
    if (!IsEnvironmentVariableName(web.api_key_env)) {
      return Bad(
          "api_key_env must name an environment variable ([A-Za-z_][A-Za-z0-9_]*); the key itself never goes "
          "in the configuration");
    }
  }
  if (config.contains("base_url")) {
    ENVFORGE_ASSIGN_OR_RETURN(web.base_url, String(config, "base_url"));
    if (!IsHttpUrl(web.base_url)) return Bad("base_url '" + web.base_url + "' is not an http:// or https:// URL");
  } else if (parsed.backend == "searxng") {
    return Bad("the searxng backend needs \"base_url\" (the address of the instance)");
  }
  if (config.contains("timeout_ms")) {
    ENVFORGE_ASSIGN_OR_RETURN(int64_t ms, Integer(config, "timeout_ms", 1, 600'000));
    web.timeout = std::chrono::milliseconds(ms);
  }
  if (config.contains("retries")) {
    ENVFORGE_ASSIGN_OR_RETURN(int64_t retries, Integer(config, "retries", 0, 10));
    web.retries = static_cast<int>(retries);
  }
  if (config.contains("rate_per_s")) {
    ENVFORGE_ASSIGN_OR_RETURN(web.rate_per_s, Number(config, "rate_per_s", 0, 1000));
  }
  if (config.contains("rate_burst")) {
    ENVFORGE_ASSIGN_OR_RETURN(web.rate_burst, Number(config, "rate_burst", 1, 1000));
  }
  if (config.contains("cache_ttl_s")) {
    ENVFORGE_ASSIGN_OR_RETURN(double seconds, Number(config, "cache_ttl_s", 0, 1e7));
    web.cache_ttl = std::chrono::milliseconds(static_cast<int64_t>(std::llround(seconds * 1000)));
  }
  if (config.contains("cache_entries")) {
    ENVFORGE_ASSIGN_OR_RETURN(int64_t entries, Integer(config, "cache_entries", 0, 1'000'000));
    web.cache_entries = static_cast<size_t>(entries);
  }
  if (config.contains("max_response_bytes")) {
    ENVFORGE_ASSIGN_OR_RETURN(int64_t bytes, Integer(config, "max_response_bytes", 1, int64_t{256} << 20));
    web.max_response_bytes = static_cast<size_t>(bytes);
  }
  if (config.contains("max_page_bytes")) {
    ENVFORGE_ASSIGN_OR_RETURN(int64_t bytes, Integer(config, "max_page_bytes", 1, int64_t{256} << 20));
    web.max_page_bytes = static_cast<size_t>(bytes);
  }
  if (config.contains("open_private_addresses")) {
    const Json& allow = config["open_private_addresses"];
    if (!allow.is_boolean()) return Bad("open_private_addresses must be true or false");
    web.open_private_addresses = allow.get<bool>();
  }
  return parsed;
}

Json ToJson(const SearchBackendConfig& config) {
  if (config.backend == "offline") return Json{{"backend", config.backend}, {"corpus", config.corpus}};
  const WebBackendOptions& web = config.web;
  Json out{{"backend", config.backend},
           {"timeout_ms", web.timeout.count()},
           {"retries", web.retries},
           {"rate_per_s", web.rate_per_s},
           {"rate_burst", web.rate_burst},
           {"cache_ttl_s", static_cast<double>(web.cache_ttl.count()) / 1000},
           {"cache_entries", web.cache_entries},
           {"max_response_bytes", web.max_response_bytes},
           {"max_page_bytes", web.max_page_bytes},
           {"open_private_addresses", web.open_private_addresses}};
  if (!web.api_key_env.empty()) out["api_key_env"] = web.api_key_env;
  if (!web.base_url.empty()) out["base_url"] = web.base_url;
  return out;
}

Result<std::unique_ptr<SearchBackend>> OpenSearchBackend(const SearchBackendConfig& config) {
  if (config.backend == "offline") {
    ENVFORGE_ASSIGN_OR_RETURN(auto backend, OfflineSearchBackend::OpenCorpus(config.corpus));
    return std::unique_ptr<SearchBackend>(std::move(backend));
  }
  Result<std::unique_ptr<WebSearchBackend>> backend =
      InvalidArgumentError("search config: unknown backend '" + config.backend + "'");
  if (config.backend == "brave") backend = OpenBraveBackend(config.web);
  if (config.backend == "serper") backend = OpenSerperBackend(config.web);
  if (config.backend == "tavily") backend = OpenTavilyBackend(config.web);
  if (config.backend == "searxng") backend = OpenSearxngBackend(config.web);
  if (!backend.ok()) return backend.status();
  return std::unique_ptr<SearchBackend>(std::move(*backend));
}

Result<std::unique_ptr<SearchBackend>> OpenSearchBackend(const Json& config) {
  ENVFORGE_ASSIGN_OR_RETURN(SearchBackendConfig parsed, ParseSearchConfig(config));
  return OpenSearchBackend(parsed);
}

}  // namespace envforge::search
