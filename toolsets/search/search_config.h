// A search backend from its JSON configuration, as environment specs and the CLI write it:
//
//   {"backend": "offline", "corpus": "corpus.sqlite"}
//   {"backend": "brave" | "serper" | "tavily" | "searxng",
//    "api_key_env": "BRAVE_API_KEY",   the NAME of the variable holding the key, never the key;
//                                      default BRAVE_API_KEY, SERPER_API_KEY, TAVILY_API_KEY;
//                                      SearxNG: none (set it for an instance behind a bearer token)
//    "base_url": "https://...",        default the API's public endpoint; required for searxng
//    "timeout_ms": 10000,              per attempt, 1..600000
//    "retries": 2,                     extra attempts, 0..10
//    "rate_per_s": 0,                  API requests a second, 0 (no limit) or more, at most 1000
//    "rate_burst": 1,                  requests let through at once, 1..1000
//    "cache_ttl_s": 300,               seconds a page stays cached; 0 turns the cache off
//    "cache_entries": 1024,            pages kept, 0..1000000; 0 turns the cache off
//    "max_response_bytes": 4194304,    an API answer's bound, 1..268435456
//    "max_page_bytes": 2097152,        where Open cuts a page, 1..268435456
//    "open_private_addresses": false}  let open fetch loopback/private/link-local addresses
//
// Every key but "backend" is optional except "corpus" (offline) and "base_url" (searxng).
// The semantics of each are those of WebBackendOptions (web_search_backend.h).
#pragma once

#include <memory>
#include <string>

#include "base/json.h"
#include "base/status.h"
#include "toolsets/search/search_backend.h"
#include "toolsets/search/web_search_backend.h"

namespace envforge::search {

struct SearchBackendConfig {
  std::string backend;    // "offline", "brave", "serper", "tavily", "searxng"
  std::string corpus;     // offline: the corpus file (corpus_store.h)
  WebBackendOptions web;  // the live backends
};

// Checks and reads a configuration. Errors (InvalidArgument, "search config: ..."): not an
// object; no "backend" or an unknown one (naming it and the known ones); an unknown key (naming
// it); a key of another kind of backend ("corpus" for brave, "timeout_ms" for offline, naming
// both); a value of the wrong type or outside its range (naming the key); an api_key_env that is
// not a variable name (the message does not repeat the value: it may be a key put there by
// mistake); a base_url that is not http(s); offline without "corpus".
Result<SearchBackendConfig> ParseSearchConfig(const Json& config);

// The configuration as JSON, every key present for its kind (never a key's value, only its
// variable's name): what a trajectory records about the backend that served it.
Json ToJson(const SearchBackendConfig& config);

// Opens the configured backend. Errors: those of OfflineSearchBackend::OpenCorpus and of the
// Open*Backend functions (FailedPrecondition naming an unset key variable).
Result<std::unique_ptr<SearchBackend>> OpenSearchBackend(const SearchBackendConfig& config);
// ParseSearchConfig, then OpenSearchBackend.
Result<std::unique_ptr<SearchBackend>> OpenSearchBackend(const Json& config);

}  // namespace envforge::search
