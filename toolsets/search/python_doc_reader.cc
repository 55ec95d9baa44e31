#include "toolsets/search/python_doc_reader.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <system_error>
#include <vector>

#include "base/fd.h"
#include "toolsets/search/html_text.h"

namespace envforge::search {
namespace {

namespace fs = std::filesystem;

bool IsIndexPage(const std::string& relative) {
  const std::string name = fs::path(relative).filename().string();
  return name.starts_with("genindex") || name == "py-modindex.html" || name == "search.html";
}

// Page paths relative to root, sorted; Sphinx's "_" directories skipped.
Result<std::vector<std::string>> ListPages(const std::string& root) {
  std::error_code error;
  fs::recursive_directory_iterator it(root, fs::directory_options::follow_directory_symlink, error);
  if (error) return NotFoundError("python documentation " + root + " cannot be read: " + error.message());
  std::vector<std::string> pages;
  for (; it != fs::recursive_directory_iterator(); it.increment(error)) {
    if (error) return InternalError("listing " + root + ": " + error.message());
    const std::string name = it->path().filename().string();
    if (it->is_directory(error)) {
      if (name.starts_with("_")) it.disable_recursion_pending();
      continue;
    }
    const std::string relative = fs::relative(it->path(), root, error).generic_string();
    if (!error && name.ends_with(".html") && !IsIndexPage(relative)) pages.push_back(relative);
  }
  std::sort(pages.begin(), pages.end());
  return pages;
}

// "os — Miscellaneous operating system interfaces — Python 3.11.2 documentation" loses its tail.
std::string PageTitle(const std::string& title, const std::string& relative) {
  constexpr std::string_view kDash = " \u2014 ";
  const size_t tail = title.rfind(kDash);
  if (tail != std::string::npos && title.find("documentation", tail) != std::string::npos && tail > 0)
    return title.substr(0, tail);
  return title.empty() ? relative : title;
}

// The page an href on page `from` leads to, relative to the root; empty when it leaves the
// documentation (another scheme, an absolute path, above the root) or stays on the page.
std::string ResolveHref(const std::string& from, std::string href) {
  if (href.find("://") != std::string::npos || href.starts_with("mailto:") || href.starts_with("javascript:") ||
      href.starts_with("/")) {
    return {};
  }
  href = href.substr(0, std::min(href.find('#'), href.find('?')));
  if (href.empty()) return {};
  std::vector<std::string> parts;
  const std::string joined = fs::path(from).parent_path().generic_string() + "/" + href;
  size_t start = 0;
  while (start <= joined.size()) {
    const size_t end = std::min(joined.find('/', start), joined.size());
    const std::string part = joined.substr(start, end - start);
    start = end + 1;
    if (part.empty() || part == ".") continue;
    if (part != "..") {
      parts.push_back(part);
    } else if (parts.empty()) {
      return {};
    } else {
      parts.pop_back();
    }
  }
  std::string resolved;
  for (const std::string& part : parts) resolved += (resolved.empty() ? "" : "/") + part;
  return resolved.ends_with(".html") && resolved != from ? resolved : std::string();
}

Document PageDocument(const std::string& relative, const std::string& html, const std::string& version) {
  static const HtmlTextOptions kSphinx{{"sphinxsidebar", "related", "footer", "mobile-nav", "headerlink"}};
  HtmlPage page = ExtractHtmlText(html, kSphinx);
  Document document{"python-doc:" + relative,
                    PageTitle(page.title, relative),
                    "https://docs.python.org/" + (version.empty() ? std::string("3") : version) + "/" + relative,
                    "python-doc",
                    std::move(page.text),
                    {}};
  for (HtmlLink& link : page.links) {
    std::string target = ResolveHref(relative, link.href);
    if (!target.empty()) document.links.push_back(DocumentLink{"python-doc:" + target, std::move(link.text)});
  }
  return document;
}

}  // namespace

std::string PythonDocVersion(const std::string& root) {
  std::error_code error;
  const fs::path canonical = fs::canonical(root, error);
  if (error) return {};
  for (const fs::path& part : canonical) {
    const std::string name = part.string();
    if (name.starts_with("python3.")) {
      std::string version = "3.";
      for (size_t i = 8; i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])); ++i) version += name[i];
      if (version.size() > 2) return version;
    }
  }
  return {};
}

Status ReadPythonDocs(const std::string& root, const std::string& version, const DocumentSink& sink) {
  ENVFORGE_ASSIGN_OR_RETURN(std::vector<std::string> pages, ListPages(root));
  if (pages.empty()) return NotFoundError("no HTML pages below " + root);
  for (const std::string& relative : pages) {
    ENVFORGE_ASSIGN_OR_RETURN(std::string html, ReadFileToString(root + "/" + relative));
    ENVFORGE_RETURN_IF_ERROR(sink(PageDocument(relative, html, version)));
  }
  return Status::Ok();
}

}  // namespace envforge::search
