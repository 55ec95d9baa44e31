// The search toolset: corpus building from the fixture sources (tests/fixtures/search: dictd
// databases plain and dictzip, a WordNet excerpt, iso-codes JSON, a Sphinx HTML tree), the
// offline FTS5 backend (ranking, phrases, prefixes, hostile queries, snippets, open), find, and,
// when the Debian packages are installed, a corpus from the real dict-elements.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "base/sqlite.h"
#include "tests/temp_dir.h"
#include "toolsets/search/corpus_store.h"
#include "toolsets/search/debian_corpus.h"
#include "toolsets/search/dictd_reader.h"
#include "toolsets/search/find_in_document.h"
#include "toolsets/search/fts_query.h"
#include "toolsets/search/html_text.h"
#include "toolsets/search/offline_backend.h"

namespace envforge::search {
namespace {

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

const std::string kFixtures = std::string(ENVFORGE_TEST_SOURCE_DIR) + "/tests/fixtures/search";

DebianPaths FixturePaths() {
  DebianPaths paths;
  paths.dictd_dir = kFixtures + "/dictd";
  paths.wordnet_dir = kFixtures + "/wordnet";
  paths.iso_codes_dir = kFixtures + "/iso-codes";
  paths.python_doc_dir = kFixtures + "/python-doc";
  return paths;
}

// One corpus of every fixture source, built once for the suite.
struct FixtureCorpus {
  testing::TempDir dir;
  std::string path = dir / "corpus.sqlite";
  Result<CorpusInfo> info = InternalError("not built");
  std::vector<std::pair<std::string, bool>> progress;  // (source, done)
  std::unique_ptr<OfflineSearchBackend> backend;

  FixtureCorpus() {
    DebianCorpusOptions options;
    options.paths = FixturePaths();
    options.sources = {"elements", "foldoc", "wordnet", "iso-codes", "python-doc"};
    options.on_progress = [this](const SourceStats& stats, bool done) { progress.emplace_back(stats.name, done); };
    info = BuildDebianCorpus(path, options);
    if (!info.ok()) return;
    auto opened = OfflineSearchBackend::OpenCorpus(path);
    if (opened.ok()) backend = std::move(opened).value();
  }
};

FixtureCorpus& Fixture() {
  static FixtureCorpus corpus;
  REQUIRE_MESSAGE(corpus.info.ok(), corpus.info.status().ToString());
  REQUIRE(corpus.backend != nullptr);
  return corpus;
}

SearchPage MustSearch(const std::string& text, int top_k = 10) {
  Result<SearchPage> page = Fixture().backend->Search({text, top_k});
  REQUIRE_MESSAGE(page.ok(), text, ": ", page.status().ToString());
  return std::move(page).value();
}

std::vector<std::string> Ids(const SearchPage& page) {
  std::vector<std::string> ids;
  for (const SearchHit& hit : page.hits) ids.push_back(hit.doc_id);
  return ids;
}

bool HasLink(const Document& document, const std::string& target) {
  return std::any_of(document.links.begin(), document.links.end(),
                     [&](const DocumentLink& l) { return l.target == target; });
}

const SourceStats* StatsOf(const CorpusInfo& info, const std::string& name) {
  for (const SourceStats& stats : info.sources) {
    if (stats.name == name) return &stats;
  }
  return nullptr;
}

TEST_SUITE("toolsets.search") {
  TEST_CASE("the fixture corpus holds every source with its counts") {
    const CorpusInfo& info = *Fixture().info;
    CHECK(info.format_version == kCorpusFormatVersion);
    // elements: 8 entries (the 00-database one skipped; aliases share an entry); foldoc: 4;
    // wordnet: 6 nouns, 1 verb, 2 adjectives; iso-codes: 3 + 3 + 2 + 2; python-doc: 3 pages.
    const std::vector<std::pair<std::string, int64_t>> expected = {
        {"elements", 8}, {"foldoc", 4}, {"wordnet", 9}, {"iso-codes", 10}, {"python-doc", 3}};
    int64_t total = 0;
    for (const auto& [name, documents] : expected) {
      const SourceStats* stats = StatsOf(info, name);
      REQUIRE_MESSAGE(stats != nullptr, name);
      CHECK_MESSAGE(stats->documents == documents, name);
      CHECK(stats->bytes > 0);
      CHECK(stats->seconds >= 0);
      total += documents;
    }
    CHECK(info.documents == total);
    CHECK(info.links > 0);
    // The reader sees what the writer reported.
    auto reader = CorpusReader::Open(Fixture().path);
    REQUIRE(reader.ok());
    auto stored = (*reader)->Info();
    REQUIRE(stored.ok());
    CHECK(stored->documents == info.documents);
    CHECK(stored->links == info.links);
    CHECK(stored->sources.size() == info.sources.size());
    // Every source reported its start and its end.
    for (const auto& [name, documents] : expected) {
      (void)documents;
      CHECK(std::count(Fixture().progress.begin(), Fixture().progress.end(), std::make_pair(name, true)) == 1);
    }
  }

  TEST_CASE("the exact title ranks first") {
    SearchPage page = MustSearch("helium");
    REQUIRE(!page.hits.empty());
    CHECK(page.hits[0].doc_id == "elements:helium");
    CHECK(page.hits[0].title == "helium");
    // "noble gas" repeats helium in its text, more often than the helium entry does.
    CHECK(Contains(DumpJson(ToJson(page)), "elements:noble gas"));
    CHECK(MustSearch("HELIUM").hits[0].doc_id == "elements:helium");
    CHECK(MustSearch("France").hits[0].doc_id == "iso3166-1:FR");
    CHECK(MustSearch("noble gas").hits[0].doc_id == "elements:noble gas");
  }

  TEST_CASE("a smaller top_k gives the first hits of a larger one") {
    for (const char* text : {"helium", "lead", "dog", "what is a noble gas", "hydro*", "\"noble gas\""}) {
      std::vector<std::string> ten = Ids(MustSearch(text, 10));
      for (int k = 1; k <= 3; ++k) {
        std::vector<std::string> few = Ids(MustSearch(text, k));
        CHECK_MESSAGE(std::equal(few.begin(), few.end(), ten.begin(),
                                 ten.begin() + static_cast<long>(std::min<size_t>(few.size(), ten.size()))),
                      text, " top ", k);
        CHECK(few.size() == std::min<size_t>(static_cast<size_t>(k), ten.size()));
      }
    }
  }

  TEST_CASE("a title match outranks a text match (bm25 weights the title)") {
    // No document is titled "balloon fill"; "balloon" has it in its title, helium in its text.
    SearchPage page = MustSearch("balloon fill");
    REQUIRE(!page.hits.empty());
    CHECK(page.hits[0].doc_id == "elements:balloon");
  }

  TEST_CASE("phrase queries match adjacent words only") {
    std::vector<std::string> ids = Ids(MustSearch("\"light gas\""));
    CHECK(ids == std::vector<std::string>{"elements:balloon"});
    // The same words apart: the helium entry has "lightest" and "gas"... but not "light gas".
    CHECK(Ids(MustSearch("\"gas light\"")).empty());
    // Porter stemming applies inside phrases too.
    CHECK(Contains(DumpJson(ToJson(MustSearch("\"barking sound\""))), "wordnet:v"));
  }

  TEST_CASE("prefix queries match every completion") {
    std::vector<std::string> ids = Ids(MustSearch("hydro*"));
    CHECK(std::find(ids.begin(), ids.end(), "elements:hydrogen") != ids.end());
    ids = Ids(MustSearch("\"canned me\"*"));
    CHECK(ids == std::vector<std::string>{"python-doc:library/spam.html"});
    // Too short a prefix is searched as a word: no error, and no flood of matches.
    CHECK(MustSearch("h*").hits.size() <= 10);
  }

  TEST_CASE("English questions fall back to any content word") {
    SearchPage page = MustSearch("what is the atomic number of neon?");
    REQUIRE(!page.hits.empty());
    CHECK(page.hits[0].doc_id == "elements:neon");
  }

  TEST_CASE("hostile query strings never error beyond a clean result") {
    const std::vector<std::string> hostile = {"\"unbalanced",
                                              "unbalanced\"",
                                              "\"\"\"",
                                              "NEAR(",
                                              "NEAR(helium neon, 2)",
                                              "OR",
                                              "helium OR",
                                              "AND neon",
                                              "NOT",
                                              "*",
                                              "**",
                                              "helium*neon",
                                              "'",
                                              "';DROP TABLE documents;--",
                                              "title:helium",
                                              "^helium",
                                              "helium + neon",
                                              "-helium",
                                              "(helium",
                                              "helium)",
                                              "{helium}",
                                              "col:",
                                              "\\",
                                              "\"he\"llo\"",
                                              "\x01\x02helium",
                                              "h\xC3\xA9lium",
                                              "\xFF\xFE",
                                              "\xE2\x80\x94",
                                              "a*",
                                              "\"noble gas\"*",
                                              std::string(300, '('),
                                              std::string(1000, '"'),
                                              std::string(60, 'x') + "*",
                                              std::string("heli\0um", 7)};
    for (const std::string& text : hostile) {
      Result<SearchPage> page = Fixture().backend->Search({text, 5});
      if (!page.ok()) {
        CHECK_MESSAGE(page.status().code() == StatusCode::kInvalidArgument, text, ": ", page.status().ToString());
        CHECK_MESSAGE(Contains(page.status().message(), "search query is empty"), text, ": ", page.status().ToString());
      }
    }
    // The table survived.
    CHECK(MustSearch("helium").hits[0].doc_id == "elements:helium");
    // Operators are words, not syntax: "OR" alone finds nothing special and fails nothing.
    CHECK(MustSearch("';DROP TABLE documents;--").hits.size() <= 5);
  }

  TEST_CASE("an empty query is InvalidArgument naming it; top_k is bounded") {
    for (const std::string& text : {std::string(), std::string("   "), std::string("\"\""), std::string("* ; ** \"")}) {
      Result<SearchPage> page = Fixture().backend->Search({text, 5});
      REQUIRE_FALSE(page.ok());
      CHECK(page.status().code() == StatusCode::kInvalidArgument);
      CHECK(Contains(page.status().message(), "search query is empty"));
    }
    for (int top_k : {0, -1, OfflineSearchBackend::kMaxTopK + 1}) {
      Result<SearchPage> page = Fixture().backend->Search({"helium", top_k});
      REQUIRE_FALSE(page.ok());
      CHECK(page.status().code() == StatusCode::kInvalidArgument);
      CHECK(Contains(page.status().message(), "top_k"));
    }
    Result<SearchPage> long_query = Fixture().backend->Search({std::string(kMaxQueryBytes + 1, 'a'), 5});
    REQUIRE_FALSE(long_query.ok());
    CHECK(Contains(long_query.status().message(), "limit"));
    CHECK(MustSearch("helium", 1).hits.size() == 1);
  }

  TEST_CASE("the query translation quotes every term") {
    Result<FtsQuery> query = TranslateQuery("The \"noble gas\" of balloon* NEAR(x) \"a\"\"b");
    REQUIRE(query.ok());
    CHECK(query->all_terms == "\"The\" \"noble gas\" \"of\" \"balloon\" * \"NEAR(x)\" \"a\" \"b\"");
    CHECK(query->any_term == "\"noble gas\" OR \"balloon\" * OR \"NEAR(x)\" OR \"a\" OR \"b\"");
    CHECK(query->plain_text == "The noble gas of balloon NEAR(x) a b");
    REQUIRE(query->terms.size() == 7);
    CHECK(query->terms[1].phrase);
    CHECK(query->terms[3].prefix);
    // A lone stopword query keeps its word.
    CHECK(TranslateQuery("the")->any_term == "\"the\"");
  }

  TEST_CASE("snippets contain the matched term") {
    SearchPage page = MustSearch("balloons");
    REQUIRE(!page.hits.empty());
    bool marked = false;
    for (const SearchHit& hit : page.hits)
      marked = marked || Contains(hit.snippet, "**balloons**") || Contains(hit.snippet, "**Balloons**");
    CHECK(marked);
    SearchPage tins = MustSearch("luncheon meat");
    REQUIRE(!tins.hits.empty());
    CHECK(Contains(tins.hits[0].snippet, "**luncheon**"));
    CHECK(Contains(tins.hits[0].snippet, "**meat**"));
  }

  TEST_CASE("open by doc_id and by url; NotFound otherwise") {
    OfflineSearchBackend& backend = *Fixture().backend;
    Result<Document> helium = backend.Open("elements:helium");
    REQUIRE(helium.ok());
    CHECK(helium->title == "helium");
    CHECK(helium->source == "elements");
    CHECK(Contains(helium->text, "Atomic number: 2"));
    CHECK(helium->url == "dict://dict.org/d:helium:elements");
    Result<Document> by_url = backend.Open("dict://dict.org/d:helium:elements");
    REQUIRE(by_url.ok());
    CHECK(by_url->doc_id == "elements:helium");
    Result<Document> spam = backend.Open("https://docs.python.org/3/library/spam.html");
    REQUIRE(spam.ok());
    CHECK(spam->doc_id == "python-doc:library/spam.html");
    CHECK(spam->title == "spam — Canned meat operations");
    for (const std::string& missing : {std::string("elements:unobtainium"), std::string("https://nowhere.example/")}) {
      Result<Document> none = backend.Open(missing);
      REQUIRE_FALSE(none.ok());
      CHECK(none.status().code() == StatusCode::kNotFound);
      CHECK(Contains(none.status().message(), missing));
    }
    CHECK(backend.Open("").status().code() == StatusCode::kInvalidArgument);
  }

  TEST_CASE("dictd entries: aliases, duplicates, braces and dictzip") {
    OfflineSearchBackend& backend = *Fixture().backend;
    // Two entries under "lead": the second gets #2 and links to the first.
    Result<Document> verb = backend.Open("elements:lead#2");
    REQUIRE(verb.ok());
    CHECK(HasLink(*verb, "elements:lead"));
    // The braces are gone from the text; a brace across lines is one link; an alias resolves.
    Result<Document> helium = backend.Open("elements:helium");
    REQUIRE(helium.ok());
    CHECK_FALSE(Contains(helium->text, "{"));
    CHECK(HasLink(*helium, "elements:noble gas"));
    CHECK(HasLink(*helium, "elements:hydrogen"));
    Result<Document> hydrogen = backend.Open("elements:hydrogen");
    REQUIRE(hydrogen.ok());
    CHECK(HasLink(*hydrogen, "elements:helium"));  // written {He}
    // A brace holding a URL is text, not a link.
    Result<Document> balloon = backend.Open("elements:balloon");
    REQUIRE(balloon.ok());
    CHECK(balloon->links.size() == 1);
    CHECK(Contains(balloon->text, "Home page (http://example.org/balloons)"));
    // The dictzip database reads the same way; {ADT} reaches "abstract data type".
    Result<Document> access = backend.Open("foldoc:access functions");
    REQUIRE(access.ok());
    CHECK(HasLink(*access, "foldoc:abstract data type"));
    Result<Document> adt = backend.Open("foldoc:abstract data type");
    REQUIRE(adt.ok());
    CHECK(HasLink(*adt, "foldoc:access functions"));
    CHECK(HasLink(*adt, "foldoc:object"));
    CHECK(Contains(adt->text, "<programming>"));
  }

  TEST_CASE("dictd numbers and keys") {
    CHECK(*DecodeDictdNumber("A") == 0);
    CHECK(*DecodeDictdNumber("BA") == 64);
    CHECK(*DecodeDictdNumber("Gb9L") == ((6 * 64 + 27) * 64 + 61) * 64 + 11);
    CHECK(DecodeDictdNumber("").status().code() == StatusCode::kInvalidArgument);
    CHECK(DecodeDictdNumber("A=").status().code() == StatusCode::kInvalidArgument);
    CHECK(DictdKey("  Noble \n  Gas ") == "noble gas");
  }

  TEST_CASE("wordnet synsets link by their pointers") {
    OfflineSearchBackend& backend = *Fixture().backend;
    SearchPage page = MustSearch("domestic dog");
    REQUIRE(!page.hits.empty());
    Result<Document> dog = backend.Open(page.hits[0].doc_id);
    REQUIRE(dog.ok());
    CHECK(dog->title == "dog, domestic dog, Canis familiaris");
    CHECK(dog->source == "wordnet");
    CHECK(Contains(dog->text, "noun (noun.animal)"));
    CHECK(Contains(dog->text, "hypernym: canine"));
    CHECK(Contains(dog->text, "member holonym: pack"));
    REQUIRE(dog->links.size() == 3);
    CHECK(dog->links[0].anchor == "hypernym: canine");
    // Follow the hypernym chain dog -> canine -> carnivore.
    Result<Document> canine = backend.Open(dog->links[0].target);
    REQUIRE(canine.ok());
    CHECK(canine->title == "canine, canid");
    auto hypernym = std::find_if(canine->links.begin(), canine->links.end(),
                                 [](const DocumentLink& l) { return l.anchor.starts_with("hypernym:"); });
    REQUIRE(hypernym != canine->links.end());
    CHECK(backend.Open(hypernym->target)->title == "carnivore");
    // Satellites live in data.adj; markers like "(a)" are dropped; verbs with frames parse.
    SearchPage doggy = MustSearch("doglike");
    REQUIRE(doggy.hits.size() == 1);
    CHECK(doggy.hits[0].title == "doggy, doglike");
    CHECK(doggy.hits[0].doc_id.starts_with("wordnet:a"));
    CHECK(Contains(backend.Open(doggy.hits[0].doc_id)->text, "similar to: canine"));
  }

  TEST_CASE("iso-codes entries and subdivision links") {
    OfflineSearchBackend& backend = *Fixture().backend;
    Result<Document> paris = backend.Open("iso3166-2:FR-75C");
    REQUIRE(paris.ok());
    CHECK(paris->title == "Paris");
    CHECK(Contains(paris->text, "country: France"));
    CHECK(HasLink(*paris, "iso3166-1:FR"));
    CHECK(HasLink(*paris, "iso3166-2:FR-IDF"));
    CHECK(MustSearch("Ile-de-France").hits[0].doc_id == "iso3166-2:FR-IDF");  // diacritics removed
    CHECK(MustSearch("Laos").hits[0].doc_id == "iso3166-1:LA");
    Result<Document> latin = backend.Open("iso639-3:lat");
    REQUIRE(latin.ok());
    CHECK(Contains(latin->text, "type: ancient"));
    CHECK(Contains(latin->text, "scope: individual language"));
    CHECK(MustSearch("Norwegian Krone").hits[0].doc_id == "iso4217:NOK");
  }

  TEST_CASE("python documentation pages: text without navigation, links between pages") {
    OfflineSearchBackend& backend = *Fixture().backend;
    Result<Document> spam = backend.Open("python-doc:library/spam.html");
    REQUIRE(spam.ok());
    for (const char* dropped :
         {"SCRIPT TEXT", "STYLE TEXT", "MOBILE MENU", "RELATED BAR", "SIDEBAR SECRET", "FOOTER TEXT", "¶"}) {
      CHECK_MESSAGE(!Contains(spam->text, dropped), dropped);
    }
    CHECK(Contains(spam->text, "luncheon meat & serves them"));
    CHECK(Contains(spam->text, "size <= 3"));
    CHECK(Contains(spam->text, "tin = spam.open_tin(2)\n    print(tin)"));  // <pre> kept as is
    CHECK(HasLink(*spam, "python-doc:library/eggs.html"));
    CHECK(HasLink(*spam, "python-doc:index.html"));
    CHECK(spam->links.size() == 2);  // not itself, the web, a stylesheet or outside the tree
    // Index pages and Sphinx's directories are not documents.
    CHECK(backend.Open("python-doc:genindex.html").status().code() == StatusCode::kNotFound);
    CHECK(backend.Open("python-doc:_static/ignored.html").status().code() == StatusCode::kNotFound);
    CHECK(backend.Open("python-doc:index.html")->title == "Tiny documentation");
  }

  TEST_CASE("html text: entities, blocks, raw text, links") {
    HtmlPage page = ExtractHtmlText(
        "<html><head><title> A &amp; B </title></head><body><p>one&nbsp;two &#x41;&#66; &bogus; &#xZZ;</p>"
        "<ul><li>x</li><li>y</li></ul><script>if (a<b) x = '</p>';</script><a href='p.html?q=1'>the  link</a>"
        "<!-- <p>comment</p> --><svg><text>SVG</text></svg> tail < 3</body></html>");
    CHECK(page.title == "A & B");
    CHECK(page.text == "one\u00a0two AB &bogus; &#xZZ;\nx\ny\nthe link tail < 3");
    REQUIRE(page.links.size() == 1);
    CHECK(page.links[0].href == "p.html?q=1");
    CHECK(page.links[0].text == "the link");
    // Whatever the input, no failure.
    for (const std::string& junk : {std::string("<"), std::string("<a href=\"x"), std::string("</div></div><div"),
                                    std::string("<!--"), std::string("&#99999999999;"), std::string("<nav><nav>")}) {
      (void)ExtractHtmlText(junk);
    }
  }

  TEST_CASE("find: literal, case-insensitive, with bounded context") {
    Document document{"d", "t", "u", "s", "Alpha beta\nGamma BETA delta\nbeta", {}};
    auto matches = FindInDocument(document, "Beta", {.regex = false, .context_chars = 6, .max_matches = 20});
    REQUIRE(matches.ok());
    REQUIRE(matches->size() == 3);
    CHECK((*matches)[0].offset == 6);
    CHECK((*matches)[0].line == 1);
    CHECK((*matches)[0].before == "Alpha ");
    CHECK((*matches)[0].match == "beta");
    CHECK((*matches)[0].after == "\nGamma");
    CHECK((*matches)[1].match == "BETA");
    CHECK((*matches)[1].line == 2);
    CHECK((*matches)[2].line == 3);
    CHECK((*matches)[2].after.empty());
    CHECK(FindInDocument(document, "Beta", {.max_matches = 2})->size() == 2);
    CHECK(FindInDocument(document, "epsilon")->empty());
    // Context never splits a UTF-8 character.
    Document utf8{"d", "t", "u", "s", "\xC3\xA9\xC3\xA9x\xC3\xA9\xC3\xA9", {}};
    auto around = FindInDocument(utf8, "x", {.context_chars = 3});
    REQUIRE(around.ok());
    CHECK((*around)[0].before == "\xC3\xA9");
    CHECK((*around)[0].after == "\xC3\xA9");
  }

  TEST_CASE("find: regex, and every limit an agent can hit") {
    Document document{"d", "t", "u", "s", "spam.open_tin(2) and spam.close_tin(3)\n" + std::string(5000, 'a') + "b",
                      {}};
    auto calls = FindInDocument(document, "spam\\.[a-z_]+\\(\\d\\)", {.regex = true});
    REQUIRE(calls.ok());
    REQUIRE(calls->size() == 2);
    CHECK((*calls)[1].match == "spam.close_tin(3)");
    // Catastrophic backtracking patterns stay polynomial.
    auto nested = FindInDocument(document, "(a*)*z", {.regex = true});
    REQUIRE(nested.ok());
    CHECK(nested->empty());
    auto empty_matches = FindInDocument(document, "x*", {.regex = true});
    REQUIRE(empty_matches.ok());
    CHECK(empty_matches->empty());
    // Anchors see lines; a match never reaches across one.
    Document lines{"d", "t", "u", "s", "Alpha beta\nGamma BETA delta\nbeta", {}};
    auto anchored = FindInDocument(lines, "^beta$", {.regex = true});
    REQUIRE(anchored.ok());
    REQUIRE(anchored->size() == 1);
    CHECK((*anchored)[0].line == 3);
    CHECK(FindInDocument(lines, "a.*a", {.regex = true})->size() == 2);
    for (const auto& [pattern, options] : std::vector<std::pair<std::string, FindOptions>>{
             {"", {}},
             {std::string(kMaxFindPatternBytes + 1, 'a'), {}},
             {"a", {.context_chars = kMaxFindContextChars + 1}},
             {"a", {.max_matches = 0}},
             {"(unclosed", {.regex = true}},
             {"a)(b", {.regex = true}},  // would be balanced once wrapped; refused as written
             {"(a)\\1", {.regex = true}}}) {
      auto refused = FindInDocument(document, pattern, options);
      REQUIRE_FALSE(refused.ok());
      CHECK(refused.status().code() == StatusCode::kInvalidArgument);
      CHECK(Contains(refused.status().message(), "find:"));
    }
  }

  TEST_CASE("find: a regex that fails everywhere costs one pass per line, not one per position" *
            doctest::timeout(10)) {
    std::string text;
    for (int line = 0; line < 2500; ++line) text += std::string(79, 'x') + "\n";  // 200 KB
    Document document{"d", "t", "u", "s", text, {}};
    // Searched from every start position this took seconds; one anchored pass per line, milliseconds.
    auto none = FindInDocument(document, ".*x.*y.*q", {.regex = true});
    REQUIRE(none.ok());
    CHECK(none->empty());
  }

  TEST_CASE("source selection and missing packages") {
    CHECK(*ResolveDebianSources({"wordnet", "elements", "wordnet"}) == std::vector<std::string>{"elements", "wordnet"});
    CHECK(ResolveDebianSources({})->size() == DebianSources().size());
    Result<std::vector<std::string>> unknown = ResolveDebianSources({"wikipedia"});
    REQUIRE_FALSE(unknown.ok());
    CHECK(unknown.status().code() == StatusCode::kInvalidArgument);
    CHECK(Contains(unknown.status().message(), "'wikipedia'"));
    CHECK(Contains(unknown.status().message(), "python-doc"));

    testing::TempDir dir;
    DebianCorpusOptions options;
    options.paths = FixturePaths();
    options.paths.dictd_dir = dir / "no-dictd";
    options.sources = {"wordnet", "gcide"};
    Result<CorpusInfo> built = BuildDebianCorpus(dir / "corpus.sqlite", options);
    REQUIRE_FALSE(built.ok());
    CHECK(built.status().code() == StatusCode::kFailedPrecondition);
    CHECK(Contains(built.status().message(), "source gcide missing: install package dict-gcide"));
    CHECK_FALSE(std::filesystem::exists(dir / "corpus.sqlite"));
  }

  TEST_CASE("an unfinished or failed build leaves no file; a finished one replaces the old") {
    testing::TempDir dir;
    const std::string path = dir / "corpus.sqlite";
    {
      auto writer = CorpusWriter::Create(path);
      REQUIRE(writer.ok());
      REQUIRE((*writer)->Add(Document{"x:1", "one", "x:1", "x", "text", {}}).ok());
      Status duplicate = (*writer)->Add(Document{"x:1", "again", "x:1", "x", "text", {}});
      CHECK(duplicate.code() == StatusCode::kAlreadyExists);
      CHECK((*writer)->Add(Document{"", "t", "", "x", "", {}}).code() == StatusCode::kInvalidArgument);
    }
    CHECK(std::filesystem::is_empty(dir.path()));
    {
      std::ofstream(path) << "old";
      auto writer = CorpusWriter::Create(path);
      REQUIRE(writer.ok());
      REQUIRE((*writer)->Add(Document{"x:1", "one", "x:1", "x", "text", {{"x:2", "dangling"}}}).ok());
      auto info = (*writer)->Finish();
      REQUIRE(info.ok());
      CHECK(info->documents == 1);
      CHECK(info->links == 0);  // its target is not in the corpus
      CHECK((*writer)->Add(Document{"x:3", "t", "", "x", "", {}}).code() == StatusCode::kFailedPrecondition);
    }
    CHECK(std::distance(std::filesystem::directory_iterator(dir.path()), std::filesystem::directory_iterator()) == 1);
    auto reader = CorpusReader::Open(path);
    REQUIRE(reader.ok());
    CHECK((*reader)->Get("x:1")->title == "one");
  }

  TEST_CASE("the reader refuses what is not a corpus of its version") {
    testing::TempDir dir;
    CHECK(CorpusReader::Open(dir / "absent.sqlite").status().code() == StatusCode::kNotFound);
    {
      auto db = Database::Open(dir / "other.sqlite", Database::Mode::kReadWriteCreate);
      REQUIRE(db.ok());
      REQUIRE(db->Exec("CREATE TABLE t(x)").ok());
    }
    Result<std::unique_ptr<CorpusReader>> other = CorpusReader::Open(dir / "other.sqlite");
    REQUIRE_FALSE(other.ok());
    CHECK(other.status().code() == StatusCode::kInvalidArgument);
    CHECK(Contains(other.status().message(), "not an envforge search corpus"));
    std::ofstream(dir / "junk.sqlite") << std::string(8192, 'j');
    CHECK(CorpusReader::Open(dir / "junk.sqlite").status().code() == StatusCode::kDataLoss);
    {
      auto db = Database::Open(dir / "future.sqlite", Database::Mode::kReadWriteCreate);
      REQUIRE(db.ok());
      REQUIRE(
          db->Exec(
                "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT); INSERT INTO meta VALUES('format_version', '99')")
              .ok());
    }
    Result<std::unique_ptr<CorpusReader>> future = CorpusReader::Open(dir / "future.sqlite");
    REQUIRE_FALSE(future.ok());
    CHECK(future.status().code() == StatusCode::kFailedPrecondition);
    CHECK(Contains(future.status().message(), "format version 99"));
  }

  TEST_CASE("the real Debian elements dictionary, when dict-elements is installed") {
    const DebianPaths debian;
    if (::access((debian.dictd_dir + "/elements.index").c_str(), R_OK) != 0) {
      MESSAGE("skipped: dict-elements is not installed (/usr/share/dictd/elements.index)");
      return;
    }
    testing::TempDir dir;
    DebianCorpusOptions options;
    options.sources = {"elements"};
    Result<CorpusInfo> info = BuildDebianCorpus(dir / "elements.sqlite", options);
    REQUIRE_MESSAGE(info.ok(), info.status().ToString());
    // bookworm's dict-elements (database 20001107): 142 index lines, 5 of them the database's own
    // 00database entries; the other 137 headwords (elements 1-118, former names such as
    // "unnilquadium", and a few others like "neutron") each have an entry of their own.
    CHECK(info->documents == 137);
    REQUIRE(info->sources.size() == 1);
    CHECK(info->sources[0].name == "elements");
    auto backend = OfflineSearchBackend::OpenCorpus(dir / "elements.sqlite");
    REQUIRE(backend.ok());
    auto page = (*backend)->Search({"helium", 3});
    REQUIRE(page.ok());
    REQUIRE(!page->hits.empty());
    CHECK(page->hits[0].doc_id == "elements:helium");
    CHECK(Contains((*backend)->Open("elements:helium")->text, "Atomic number: 2"));
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::search
