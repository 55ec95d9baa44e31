// HTML to plain text and links, for documentation pages in a corpus (and later for pages a web
// backend fetches). A small, forgiving scanner, not a conforming HTML5 parser: it never fails,
// whatever the input, and costs one pass over the bytes.
//
// What is kept: the text of the body, with block elements (p, div, li, h1-h6, pre, tr, dt, dd,
// ...) on lines of their own, whitespace collapsed outside <pre>, character references decoded
// (named ones for the common entities, every numeric one); the <title>; every <a href> with its
// text. What is dropped: comments, <head> (except the title), <script>, <style>, <noscript>,
// <template>, <svg>, <nav>, any element with role="navigation", and any element one of whose
// classes is in HtmlTextOptions::skip_classes, with everything inside it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace envforge::search {

struct HtmlLink {
  std::string href;  // as written (entities decoded), not resolved
  std::string text;  // the link's text, whitespace collapsed; may be empty
};

struct HtmlPage {
  std::string title;            // <title> text, whitespace collapsed; empty when there is none
  std::string text;             // UTF-8 plain text; lines trimmed, at most one blank line in a row
  std::vector<HtmlLink> links;  // in document order, outside dropped elements only
};

struct HtmlTextOptions {
  // Elements carrying one of these classes are dropped with their contents (for Sphinx:
  // "sphinxsidebar", "related", "footer", "headerlink").
  std::vector<std::string> skip_classes;
};

HtmlPage ExtractHtmlText(std::string_view html, const HtmlTextOptions& options = {});

// Decodes the character references in `text` ("&amp;" -> "&", "&#8212;" -> "—"); unknown or
// malformed references stay as written.
std::string DecodeHtmlEntities(std::string_view text);

}  // namespace envforge::search
