// What the live backends share: validation, the page cache, result lists to hits, Open.
#include "toolsets/search/web_search_backend.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <utility>

#include "toolsets/search/html_text.h"

namespace envforge::search {
namespace {

constexpr size_t kMaxQueryBytes = 2000;

std::string_view Trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

std::string Lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string CollapseSpace(std::string_view text) {
  std::string out;
  bool space = false;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

void AppendUtf8(std::string& out, uint32_t code) {
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else if (code < 0x800) {
    out += static_cast<char>(0xC0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else {
    out += static_cast<char>(0xE0 | (code >> 12));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  }
}

// ISO-8859-1 to UTF-8; with windows1252, 0x80-0x9F are that code page's characters.
std::string SingleByteToUtf8(std::string_view bytes, bool windows1252) {
  static constexpr uint16_t kCp1252[32] = {0x20AC, 0x81,   0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021,
                                           0x02C6, 0x2030, 0x0160, 0x2039, 0x0152, 0x8D,   0x017D, 0x8F,
                                           0x90,   0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014,
                                           0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0x9D,   0x017E, 0x0178};
  std::string out;
  out.reserve(bytes.size() + bytes.size() / 8);
  for (unsigned char c : bytes) {
    uint32_t code = c;
    if (windows1252 && c >= 0x80 && c < 0xA0) code = kCp1252[c - 0x80];
    AppendUtf8(out, code);
  }
  return out;
}

// "text/html; charset=UTF-8" -> ("text/html", "utf-8").
std::pair<std::string, std::string> MediaType(std::string_view content_type) {
  std::string lower = Lower(content_type);
  size_t semicolon = lower.find(';');
  std::string media(Trim(std::string_view(lower).substr(0, semicolon)));
  std::string charset;
  size_t at = lower.find("charset=", semicolon == std::string::npos ? lower.size() : semicolon);
  if (at != std::string::npos) {
    std::string_view value = std::string_view(lower).substr(at + 8);
    value = value.substr(0, value.find(';'));
    value = Trim(value);
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'')) value = value.substr(1, value.size() - 2);
    charset = std::string(value);
  }
  return {media, charset};
}

bool LooksLikeHtml(std::string_view body) {
  std::string start = Lower(Trim(body).substr(0, 512));
  return start.rfind("<!doctype html", 0) == 0 || start.find("<html") != std::string::npos;
}

bool IsTextMedia(const std::string& media) {
  return media.rfind("text/", 0) == 0 || media == "application/json" || media == "application/xml" ||
         (media.size() > 5 && (media.ends_with("+json") || media.ends_with("+xml")));
}

}  // namespace

std::string PlainSnippet(std::string_view html) {
  std::string out;
  out.reserve(html.size());
  size_t at = 0;
  while (at < html.size()) {
    char c = html[at];
    if (c != '<' || at + 1 >= html.size()) {
      out += c;
      ++at;
      continue;
    }
    bool closing = html[at + 1] == '/';
    size_t name_start = at + (closing ? 2 : 1);
    size_t close = html.find('>', at);
    if (name_start >= html.size() || !std::isalpha(static_cast<unsigned char>(html[name_start])) ||
        close == std::string_view::npos) {
      out += c;  // "a < b": not a tag
      ++at;
      continue;
    }
    size_t name_end = name_start;
    while (name_end < close && std::isalnum(static_cast<unsigned char>(html[name_end]))) ++name_end;
    std::string name = Lower(html.substr(name_start, name_end - name_start));
    if (name == "strong" || name == "b") {
      out += "**";
    } else if (name == "br" || name == "p" || name == "div" || name == "li") {
      out += ' ';
    }
    at = close + 1;
  }
  return CollapseSpace(DecodeHtmlEntities(out));
}

Result<WebSearchBackend::Parts> WebSearchBackend::Prepare(const std::string& name, const WebBackendOptions& options,
                                                          std::string_view default_base_url,
                                                          std::string_view default_key_env) {
  Parts parts;
  parts.base_url = options.base_url.empty() ? std::string(default_base_url) : options.base_url;
  if (parts.base_url.empty()) {
    return InvalidArgumentError(name + " backend: base_url is required (the address of the " + name + " instance)");
  }
  if (!IsHttpUrl(parts.base_url)) {
    return InvalidArgumentError(name + " backend: base_url '" + parts.base_url + "' is not an http:// or https:// URL");
  }
  while (parts.base_url.size() > 8 && parts.base_url.back() == '/') parts.base_url.pop_back();
  if (options.max_page_bytes == 0) return InvalidArgumentError(name + " backend: max_page_bytes must be positive");
  std::string key_env = options.api_key_env.empty() ? std::string(default_key_env) : options.api_key_env;
  if (!key_env.empty()) {
    ENVFORGE_ASSIGN_OR_RETURN(parts.api_key, ReadApiKey(name, key_env));
  }
  HttpClientOptions http;
  http.backend = name;
  http.api_key_env = key_env;
  http.timeout = options.timeout;
  http.retries = options.retries;
  http.rate_per_s = options.rate_per_s;
  http.rate_burst = options.rate_burst;
  http.initial_backoff = options.initial_backoff;
  http.max_retry_after = options.max_retry_after;
  http.max_response_bytes = options.max_response_bytes;
  ENVFORGE_ASSIGN_OR_RETURN(parts.client, HttpSearchClient::Create(std::move(http)));
  return parts;
}

WebSearchBackend::WebSearchBackend(std::string name, int max_top_k, Parts parts, const WebBackendOptions& options)
    : name_(std::move(name)),
      max_top_k_(max_top_k),
      base_url_(std::move(parts.base_url)),
      api_key_(std::move(parts.api_key)),
      max_page_bytes_(options.max_page_bytes),
      open_private_addresses_(options.open_private_addresses),
      client_(std::move(parts.client)),
      cache_(options.cache_entries, options.cache_ttl) {}

WebSearchBackend::~WebSearchBackend() = default;

Json WebSearchBackend::Stats() const {
  HttpClientStats stats = client_->stats();
  return Json{{"requests", stats.requests}, {"attempts", stats.attempts}, {"retries", stats.retries},
              {"failures", stats.failures}, {"cache_hits", cache_hits_},  {"cache_entries", cache_.size()}};
}

Result<SearchPage> WebSearchBackend::Search(const SearchQuery& query) {
  std::string_view text = Trim(query.text);
  if (text.empty()) return InvalidArgumentError("search: the query is empty");
  if (text.size() > kMaxQueryBytes) {
    return InvalidArgumentError("search: the query is " + std::to_string(text.size()) + " bytes; the " + name_ +
                                " backend takes at most " + std::to_string(kMaxQueryBytes));
  }
  if (query.top_k < 1 || query.top_k > max_top_k_) {
    return InvalidArgumentError("search top_k must be between 1 and " + std::to_string(max_top_k_) + " for the " +
                                name_ + " backend, got " + std::to_string(query.top_k));
  }
  std::string key = SearchCacheKey(name_, query.text, query.top_k);
  if (std::optional<SearchPage> cached = cache_.Get(key)) {
    ++cache_hits_;
    return std::move(*cached);
  }
  SearchQuery sent{std::string(text), query.top_k};
  HttpRequest request = BuildRequest(sent);
  ENVFORGE_ASSIGN_OR_RETURN(Json answer, client_->SendJson(request));
  ENVFORGE_ASSIGN_OR_RETURN(SearchPage page, ParsePage(answer, sent, request.url));
  page.query = query.text;
  if (static_cast<int>(page.hits.size()) > query.top_k) page.hits.resize(static_cast<size_t>(query.top_k));
  cache_.Put(key, page);
  return page;
}

Result<SearchPage> WebSearchBackend::ParseResults(const Json& answer, const SearchQuery& query, const std::string& url,
                                                  const ResultShape& shape) const {
  std::string what = name_ + " response from " + url;
  SearchPage page;
  page.query = query.text;
  const Json* node = &answer;
  std::string path;
  for (const std::string& step : shape.list_path) {
    if (!node->is_object()) return DataLossError(what + ": '" + path + "' is " + node->type_name() + ", not an object");
    path += path.empty() ? step : "." + step;
    auto found = node->find(step);
    if (found == node->end() || found->is_null()) return page;  // no results of this kind
    node = &*found;
  }
  if (!node->is_array()) return DataLossError(what + ": '" + path + "' is " + node->type_name() + ", not an array");
  int rank = 0;
  for (const Json& result : *node) {
    if (static_cast<int>(page.hits.size()) >= query.top_k) break;
    ++rank;
    if (!result.is_object()) {
      return DataLossError(what + ": " + path + "[" + std::to_string(rank - 1) + "] is " + result.type_name() +
                           ", not an object");
    }
    auto string_field = [&result](const char* field) -> std::string {
      auto found = result.find(field);
      return found != result.end() && found->is_string() ? found->get<std::string>() : std::string();
    };
    std::string hit_url(Trim(string_field(shape.url)));
    if (hit_url.empty()) continue;
    SearchHit hit;
    hit.doc_id = hit_url;
    hit.url = hit_url;
    hit.title = PlainSnippet(string_field(shape.title));
    hit.snippet = PlainSnippet(string_field(shape.snippet));
    hit.score = 1.0 / rank;
    if (shape.score != nullptr) {
      auto score = result.find(shape.score);
      if (score != result.end() && score->is_number()) hit.score = score->get<double>();
    }
    page.hits.push_back(std::move(hit));
  }
  return page;
}

Result<Document> WebSearchBackend::Open(std::string_view doc_id_or_url) {
  std::string url(Trim(doc_id_or_url));
  if (url.empty()) return InvalidArgumentError("open: the document id or url is empty");
  if (!IsHttpUrl(url)) {
    return NotFoundError("no document '" + url + "': the " + name_ + " backend opens http:// and https:// URLs only");
  }
  HttpRequest request;
  request.url = url;
  request.headers = {"Accept: text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5"};
  request.max_bytes = max_page_bytes_;
  request.truncate = true;
  request.rate_limited = false;  // pages are not the API's
  request.follow_redirects = true;
  request.public_addresses_only = !open_private_addresses_;
  request.label = "page";
  ENVFORGE_ASSIGN_OR_RETURN(HttpResponse response, client_->Send(request));

  auto [media, charset] = MediaType(response.content_type);
  std::string body = std::move(response.body);
  if (charset == "iso-8859-1" || charset == "latin1" || charset == "latin-1") body = SingleByteToUtf8(body, false);
  if (charset == "windows-1252" || charset == "cp1252") body = SingleByteToUtf8(body, true);

  Document document;
  document.doc_id = url;
  document.url = response.effective_url;
  document.source = name_;
  bool html = media == "text/html" || media == "application/xhtml+xml" || (media.empty() && LooksLikeHtml(body));
  if (html) {
    HtmlPage page = ExtractHtmlText(body);
    document.title = std::move(page.title);
    document.text = std::move(page.text);
    for (HtmlLink& link : page.links) {
      std::string target = ResolveUrl(document.url, link.href);
      if (!target.empty()) document.links.push_back(DocumentLink{std::move(target), std::move(link.text)});
    }
  } else if (media.empty() || IsTextMedia(media)) {
    document.text = std::move(body);
  } else {
    return InvalidArgumentError("open " + url + ": the page is " + media + "; the " + name_ +
                                " backend opens text and HTML pages only");
  }
  if (document.title.empty()) document.title = document.url;
  if (response.truncated) {
    if (!document.text.empty() && document.text.back() != '\n') document.text += '\n';
    document.text += "[page cut at " + std::to_string(max_page_bytes_) + " bytes]";
  }
  return document;
}

}  // namespace envforge::search
