// The search environments' builtin tools.
#include "toolsets/search_tools.h"

#include <string>

namespace envforge::toolsets {
namespace {

Json ObjectSchema(Json properties, std::vector<std::string> required) {
  return {{"type", "object"},
          {"properties", std::move(properties)},
          {"required", std::move(required)},
          {"additionalProperties", false}};
}

Json BoundedString(const char* description, int max_chars) {
  return {{"type", "string"}, {"minLength", 1}, {"maxLength", max_chars}, {"description", description}};
}

Json BoundedInteger(const char* description, int minimum, int maximum, int default_value) {
  return {{"type", "integer"},
          {"minimum", minimum},
          {"maximum", maximum},
          {"default", default_value},
          {"description", description}};
}

}  // namespace

std::vector<ToolSpec> SearchToolSpecs() {
  return {
      {std::string(kSearchTool),
       "Searches the document collection. Words match any form of the word (\"balloons\" finds \"balloon\"); "
       "\"quoted phrases\" match exactly; a trailing * matches a prefix (\"electro*\"). Returns the best hits, "
       "each with a doc_id for open and find, a title, a url and a snippet with matched words marked **like "
       "this**.",
       ObjectSchema({{"query", BoundedString("what to search for", kSearchMaxQueryChars)},
                     {"top_k", BoundedInteger("how many hits to return", 1, kSearchMaxTopK, kSearchDefaultTopK)}},
                    {"query"})},
      {std::string(kOpenTool),
       "Opens a document by the doc_id (or url) a search hit gave, and returns its text from `offset` on, at "
       "most max_chars bytes of UTF-8 (next_offset says where the rest starts), with its links to other "
       "documents.",
       ObjectSchema(
           {{"doc_id_or_url", BoundedString("a hit's doc_id or url", 2048)},
            {"offset",
             {{"type", "integer"},
              {"minimum", 0},
              {"default", 0},
              {"description", "the byte offset to start at in the text (a next_offset from an earlier open)"}}},
            {"max_chars", BoundedInteger("how many bytes of text to return", 1, kOpenMaxChars, kOpenDefaultChars)}},
           {"doc_id_or_url"})},
      {std::string(kFindTool),
       "Finds a text in one document (case-insensitive; a regular expression when regex is true) and returns "
       "each match with the line number and a little text around it.",
       ObjectSchema(
           {{"doc_id", BoundedString("a hit's doc_id (or url)", 2048)},
            {"pattern", BoundedString("the text to find", kFindMaxPatternChars)},
            {"regex",
             {{"type", "boolean"},
              {"default", false},
              {"description", "treat pattern as an ECMAScript regular expression"}}},
            {"max_matches", BoundedInteger("how many matches to return", 1, kFindMaxMatches, kFindDefaultMatches)}},
           {"doc_id", "pattern"})},
  };
}

bool IsSearchTool(std::string_view name) { return name == kSearchTool || name == kOpenTool || name == kFindTool; }

Json SearchAnswerSchema() {
  return {{"type", "string"}, {"description", "the answer alone, as short as possible (a name, a number, a word)"}};
}

}  // namespace envforge::toolsets
