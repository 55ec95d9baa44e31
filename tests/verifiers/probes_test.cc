// Probe generation: trivial probes are certainly wrong, mutants cover every single-field change
// and the wrong related entities, structural mutants, seeded reproducibility.
#include <doctest/doctest.h>

#include <set>

#include "tests/verifiers/audit_test_util.h"
#include "tests/verifiers/hotel_db.h"
#include "verifiers/probes.h"

namespace envforge::verifiers {
namespace {

using testing::TempDir;

struct TwoDay {
  TempDir dir;
  std::string path = dir / "hotels.db";
  Database db = [this] {
    testing::WriteHotelDb(path);
    return OpenBundleForDomains(path).value();
  }();
  Json schema = testing::TwoDaySchema();
  toolsets::CompiledSchema compiled = toolsets::CompiledSchema::Compile(schema).value();
  AnswerSpace space = AnswerSpace::Build(db, schema, testing::TwoDayGold()).value();
  std::string gold_text = DumpJson(testing::TwoDayGold());
  ProbeContext Context() const {
    ProbeContext context;
    context.schema = &schema;
    context.compiled = &compiled;
    context.space = &space;
    context.gold_text = gold_text;
    context.gold = testing::TwoDayGold();
    return context;
  }
};

std::set<std::string> Kinds(const ProbeSet& probes, ProbeFamily family) {
  std::set<std::string> kinds;
  for (size_t i : probes.Members(family)) kinds.insert(probes[i].kind);
  return kinds;
}

bool HasText(const ProbeSet& probes, const std::string& text) { return probes.Find(text).has_value(); }

TEST_SUITE("verifiers.probes") {
  TEST_CASE("a probe set deduplicates texts and counts a text in every family that added it") {
    ProbeSet probes;
    size_t a = probes.Add(Probe{"[1]", ProbeFamily::kSpace, "space.sampled", "", {1}});
    size_t b = probes.Add(Probe{"[1]", ProbeFamily::kMutant, "mutant.replace", "", {}});
    size_t c = probes.Add(Probe{"[2]", ProbeFamily::kMutant, "mutant.replace", "", {}});
    CHECK(a == b);
    CHECK(c == 1);
    CHECK(probes.size() == 2);
    CHECK(probes.Members(ProbeFamily::kSpace).size() == 1);
    CHECK(probes.Members(ProbeFamily::kMutant).size() == 2);
    CHECK(probes.IsMember(a, ProbeFamily::kSpace));
    CHECK(probes.IsMember(a, ProbeFamily::kMutant));
    CHECK(probes[a].kind == "space.sampled");  // the first family's description stays
    CHECK(probes[a].choice == std::vector<uint32_t>{1});
  }

  TEST_CASE("trivial probes are all certainly wrong and cover every kind the issue lists") {
    TwoDay fixture;
    ProbeSet probes;
    AddTrivialProbes(fixture.Context(), probes);
    REQUIRE(probes.size() > 30);
    for (const Probe& probe : probes.probes()) {
      CAPTURE(probe.text);
      CHECK(CertainlyWrong(probe.text, fixture.compiled, &fixture.space));
      CHECK(probe.text != fixture.gold_text);
    }
    std::set<std::string> kinds = Kinds(probes, ProbeFamily::kTrivial);
    for (const char* kind :
         {"empty", "type", "verdict", "injection.alone", "injection.appended", "injection.field", "truncated",
          "skeleton", "everything.joined", "everything.lists", "everything.records", "everything.values", "fenced"}) {
      CAPTURE(kind);
      CHECK(kinds.count(kind) == 1);
    }
    for (const char* text : {"", "null", "[]", "{}", "```json\n{}\n```"}) CHECK(HasText(probes, text));
    CHECK(HasText(probes, fixture.gold_text.substr(0, fixture.gold_text.size() / 2)));
    // The gold answer itself and a valid alternative are not certainly wrong.
    CHECK_FALSE(CertainlyWrong(fixture.gold_text, fixture.compiled, &fixture.space));
    CHECK_FALSE(CertainlyWrong(R"([{"city": "Oslo", "hotel": "O-One"}, {"city": "Rome", "hotel": "R-Mid"}])",
                               fixture.compiled, &fixture.space));
    CHECK(CertainlyWrong(R"([{"city": "Oslo", "hotel": "O-Two"}, {"city": "Rome", "hotel": "R-Mid"}])",
                         fixture.compiled, &fixture.space));
  }

  TEST_CASE("single-field mutants: every other value, wrong related entities, repeats, cross-domain, types") {
    TwoDay fixture;
    ProbeSet probes;
    Rng rng(7);
    AddMutantProbes(fixture.Context(), 1000, rng, probes);
    std::set<std::string> kinds = Kinds(probes, ProbeFamily::kMutant);
    for (const char* kind : {"mutant.related", "mutant.replace", "mutant.repeat", "mutant.cross_domain", "mutant.type",
                             "mutant.boundary", "mutant.spelling"}) {
      CAPTURE(kind);
      CHECK(kinds.count(kind) == 1);
    }
    Json gold = testing::TwoDayGold();
    // Every other hotel in day 1's hotel field.
    for (const char* hotel : {"O-One", "P-Edge", "P-Lux", "R-Cheap", "R-Mid"}) {
      Json mutant = gold;
      mutant[0]["hotel"] = hotel;
      CHECK(HasText(probes, DumpJson(mutant)));
    }
    // A wrong related entity: day 1's hotel taken from day 2's city (Rome) is labelled as such.
    Json related = gold;
    related[0]["hotel"] = "R-Cheap";
    auto index = probes.Find(DumpJson(related));
    REQUIRE(index);
    CHECK(probes[*index].kind == "mutant.related");
    // A repeat: day 2's hotel copied into day 1.
    Json repeat = gold;
    repeat[0]["hotel"] = "R-Mid";
    CHECK(HasText(probes, DumpJson(repeat)));
    // The gold answer is never a mutant.
    CHECK_FALSE(HasText(probes, DumpJson(gold)));
  }

  TEST_CASE("structural mutants drop, duplicate, reorder and rename") {
    TwoDay fixture;
    ProbeSet probes;
    AddStructuralProbes(fixture.Context(), probes);
    std::set<std::string> kinds = Kinds(probes, ProbeFamily::kStructural);
    for (const char* kind : {"structural.drop", "structural.duplicate", "structural.reorder", "structural.rename",
                             "structural.drop_key", "structural.extra_key", "structural.wrap"}) {
      CAPTURE(kind);
      CHECK(kinds.count(kind) == 1);
    }
    Json gold = testing::TwoDayGold();
    CHECK(HasText(probes, DumpJson(Json::array({gold[0]}))));
    CHECK(HasText(probes, DumpJson(Json::array({gold[1], gold[0]}))));
    CHECK(HasText(probes, DumpJson(Json::array({gold[0], gold[0], gold[1]}))));
  }

  TEST_CASE("the space is enumerated when small, sampled when large, and the same seed gives the same probes") {
    TwoDay fixture;
    ProbeSet enumerated;
    Rng rng(1);
    CHECK(AddSpaceProbes(fixture.space, 1000, 10, rng, enumerated));
    CHECK(enumerated.Members(ProbeFamily::kSpace).size() == fixture.space.Size());

    auto sample = [&](uint64_t seed) {
      ProbeSet probes;
      Rng seeded(seed);
      CHECK_FALSE(AddSpaceProbes(fixture.space, 100, 50, seeded, probes));
      AddNeighbourhoodProbes(fixture.space, fixture.space.TemplateChoice(), 40, ProbeFamily::kNeighbourhood, seeded,
                             probes);
      std::vector<std::string> texts;
      for (const Probe& probe : probes.probes()) texts.push_back(probe.text);
      return texts;
    };
    auto first = sample(42);
    CHECK(first.size() >= 80);
    CHECK(first == sample(42));
    CHECK(first != sample(43));
  }

  TEST_CASE("probes of a gold answer with multi-byte characters stay valid UTF-8") {
    Json schema = testing::OneHotelSchema();
    auto compiled = toolsets::CompiledSchema::Compile(schema).value();
    ProbeContext context;
    context.schema = &schema;
    context.compiled = &compiled;
    context.gold = Json{{"hotel", "\u676d\u5dde\u897f\u6e56\u996d\u5e97"}};  // 6 CJK characters
    context.gold_text = DumpJson(context.gold);
    ProbeSet probes;
    AddTrivialProbes(context, probes);
    Rng rng(5);
    AddMutantProbes(context, 100, rng, probes);
    AddStructuralProbes(context, probes);
    REQUIRE(probes.size() > 30);
    for (const Probe& probe : probes.probes()) {
      CAPTURE(probe.label);
      CHECK_NOTHROW((void)Json(probe.text).dump());  // strict: throws on invalid UTF-8
    }
  }

  TEST_CASE("a group move changes a day's city together with its hotel") {
    TwoDay fixture;
    Rng rng(3);
    size_t coherent = 0;
    for (int i = 0; i < 200; ++i) {
      std::vector<uint32_t> choice = fixture.space.TemplateChoice();
      std::string label = Perturb(fixture.space, choice, 1, rng);
      if (label.find("+children") == std::string::npos) continue;
      Json answer = fixture.space.Make(choice);
      for (const auto& day : answer) {
        std::string city = day["city"], hotel = day["hotel"];
        CHECK(hotel[0] == city[0]);  // hotels are named after their city's initial
      }
      ++coherent;
    }
    CHECK(coherent > 20);
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::verifiers
