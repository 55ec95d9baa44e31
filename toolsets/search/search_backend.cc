#include "toolsets/search/search_backend.h"

namespace envforge::search {

Json ToJson(const SearchHit& hit) {
  return Json{
      {"doc_id", hit.doc_id}, {"title", hit.title}, {"url", hit.url}, {"snippet", hit.snippet}, {"score", hit.score}};
}

Json ToJson(const SearchPage& page) {
  Json hits = Json::array();
  for (const SearchHit& hit : page.hits) hits.push_back(ToJson(hit));
  return Json{{"query", page.query}, {"hits", std::move(hits)}};
}

Json ToJson(const Document& document) {
  Json links = Json::array();
  for (const DocumentLink& link : document.links)
    links.push_back(Json{{"target", link.target}, {"anchor", link.anchor}});
  return Json{{"doc_id", document.doc_id}, {"title", document.title}, {"url", document.url},
              {"source", document.source}, {"text", document.text},   {"links", std::move(links)}};
}

}  // namespace envforge::search
