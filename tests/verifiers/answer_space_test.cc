// AnswerSpace: x-domain validation and reading, foreign-key links, slots over a template,
// enumeration order, skeletons.
#include <doctest/doctest.h>

#include <set>

#include "tests/verifiers/audit_test_util.h"
#include "tests/verifiers/hotel_db.h"
#include "verifiers/answer_space.h"

namespace envforge::verifiers {
namespace {

using testing::TempDir;

struct HotelDb {
  TempDir dir;
  std::string path = dir / "hotels.db";
  Database db = [this] {
    testing::WriteHotelDb(path);
    return OpenBundleForDomains(path).value();
  }();
};

TEST_SUITE("verifiers.answer_space") {
  TEST_CASE("an x-domain reads the distinct values of its column in order, with its foreign-key parents") {
    HotelDb hotels;
    auto domain = ReadDomain(hotels.db, "hotels.name");
    REQUIRE_MESSAGE(domain.ok(), domain.status().ToString());
    CHECK(domain->source == "hotels.name");
    CHECK(domain->values == std::vector<Json>{"O-One", "P-Cheap", "P-Edge", "P-Lux", "R-Cheap", "R-Mid"});
    REQUIRE(domain->links.size() == 1);
    const DomainLink& link = domain->links[0];
    CHECK(link.column == "city");
    CHECK(link.parent == "cities.name");
    auto paris = link.ParentIndex("Paris");
    REQUIRE(paris);
    std::set<std::string> in_paris;
    for (uint32_t v : link.children[*paris]) in_paris.insert(domain->values[v].get<std::string>());
    CHECK(in_paris == std::set<std::string>{"P-Cheap", "P-Edge", "P-Lux"});
    CHECK(link.parent_values[link.parents[*domain->IndexOf("R-Mid")][0]] == "Rome");

    auto cities = ReadDomain(hotels.db, "CITIES.Name");  // the catalogue's spelling is used
    REQUIRE(cities.ok());
    CHECK(cities->source == "cities.name");
    CHECK(cities->values.size() == 3);
    CHECK(cities->links.empty());

    auto stars = ReadDomain(hotels.db, "hotels.stars");  // NULLs left out, integers stay integers
    REQUIRE(stars.ok());
    CHECK(stars->values == std::vector<Json>{1, 2, 3, 5});
  }

  TEST_CASE("malformed, unknown, reserved and injected x-domain annotations are InvalidArgument") {
    HotelDb hotels;
    for (const char* bad : {"hotels", "hotels.name.x", ".name", "hotels.", "nosuch.name", "hotels.nosuch", "_secret.x",
                            "sqlite_schema.name", "hotels.name; DROP TABLE hotels", "hotels.name\" FROM cities --",
                            "hotels WHERE 1.name"}) {
      CAPTURE(bad);
      auto domain = ReadDomain(hotels.db, bad);
      REQUIRE_FALSE(domain.ok());
      CHECK(domain.status().code() == StatusCode::kInvalidArgument);
      CHECK(domain.status().message().find("x-domain") != std::string::npos);
    }
    // Nothing was dropped or changed.
    auto count = hotels.db.Prepare("SELECT count(*) FROM hotels");
    REQUIRE(count.ok());
    REQUIRE(count->Step().value());
    CHECK(count->ColumnInt(0) == 6);

    Json schema = testing::OneHotelSchema();
    schema["properties"]["hotel"]["x-domain"] = "hotels.nosuch";
    auto space = AnswerSpace::Build(hotels.db, schema, Json{{"hotel", "P-Cheap"}});
    REQUIRE_FALSE(space.ok());
    CHECK(space.status().code() == StatusCode::kInvalidArgument);
    CHECK(space.status().message().find("/hotel") != std::string::npos);
  }

  TEST_CASE("slots follow the gold template; the size is the product of the domains; choices round-trip") {
    HotelDb hotels;
    auto space = AnswerSpace::Build(hotels.db, testing::TwoDaySchema(), testing::TwoDayGold());
    REQUIRE_MESSAGE(space.ok(), space.status().ToString());
    CHECK(space->template_is_gold());
    REQUIRE(space->slots().size() == 4);
    CHECK(space->slots()[0].pointer == "/0/city");
    CHECK(space->slots()[0].record == "/0");
    CHECK(space->slots()[3].pointer == "/1/hotel");
    CHECK(space->Size() == 3u * 6u * 3u * 6u);
    CHECK_FALSE(space->SizeSaturated());
    CHECK(space->domains().size() == 2);  // cities.name and hotels.name, shared by both records
    CHECK(space->Make(space->TemplateChoice()) == testing::TwoDayGold());

    // The day's city is the parent of the day's hotel, within the same record only.
    REQUIRE(space->relations().size() == 2);
    for (const SlotRelation& relation : space->relations()) {
      CHECK(space->slots()[relation.parent].field == "city");
      CHECK(space->slots()[relation.child].field == "hotel");
      CHECK(space->slots()[relation.parent].record == space->slots()[relation.child].record);
    }

    std::set<std::string> all;
    for (uint64_t rank = 0; rank < space->Size(); ++rank) all.insert(DumpJson(space->Make(space->ChoiceAt(rank))));
    CHECK(all.size() == space->Size());
    CHECK(all.count(DumpJson(testing::TwoDayGold())) == 1);
    CHECK(space->ChoiceAt(0) == std::vector<uint32_t>{0, 0, 0, 0});
    CHECK(space->ChoiceAt(1) == std::vector<uint32_t>{0, 0, 0, 1});  // the last slot varies fastest
  }

  TEST_CASE("a gold answer that breaks the schema is replaced by a skeleton; its unknown values are kNoValue") {
    HotelDb hotels;
    auto from_invalid = AnswerSpace::Build(hotels.db, testing::TwoDaySchema(), Json::parse(R"([{"city": 1}])"));
    REQUIRE(from_invalid.ok());
    CHECK_FALSE(from_invalid->template_is_gold());
    CHECK(from_invalid->template_answer().size() == 2);
    CHECK(from_invalid->slots().size() == 4);

    Json hallucinated = testing::TwoDayGold();
    hallucinated[1]["hotel"] = "No Such Hotel";
    auto space = AnswerSpace::Build(hotels.db, testing::TwoDaySchema(), hallucinated);
    REQUIRE(space.ok());
    CHECK(space->template_is_gold());
    CHECK(space->slots()[3].template_value == kNoValue);
    CHECK(space->Make(space->TemplateChoice()) == hallucinated);
  }

  TEST_CASE("enum, const, boolean and bounded integer fields are slots; unbounded numbers are not") {
    HotelDb hotels;
    Json schema = Json::parse(R"({"type": "object", "properties": {
      "day": {"type": "string", "enum": ["mon", "tue", "mon"]},
      "kind": {"const": "trip"},
      "ok": {"type": "boolean"},
      "rooms": {"type": "integer", "minimum": 1, "exclusiveMaximum": 4},
      "budget": {"type": "number", "minimum": 0},
      "huge": {"type": "integer", "minimum": 0, "maximum": 100000}}})");
    Json gold = Json::parse(R"({"day": "tue", "kind": "trip", "ok": true, "rooms": 2, "budget": 10.5, "huge": 7})");
    auto space = AnswerSpace::Build(hotels.db, schema, gold);
    REQUIRE(space.ok());
    std::map<std::string, size_t> sizes;
    for (const Slot& slot : space->slots()) sizes[slot.pointer] = space->domain_of(slot).values.size();
    CHECK(sizes == std::map<std::string, size_t>{{"/day", 2}, {"/kind", 1}, {"/ok", 2}, {"/rooms", 3}});
    CHECK(space->Size() == 12);
  }

  TEST_CASE("skeletons have the schema's shape") {
    Json skeleton = AnswerSpace::Skeleton(testing::TwoDaySchema());
    REQUIRE(skeleton.is_array());
    CHECK(skeleton.size() == 2);
    CHECK(skeleton[0].contains("city"));
    CHECK(skeleton[0]["hotel"].is_string());
    CHECK(AnswerSpace::Skeleton(Json::parse(R"({"type": "integer", "minimum": 3, "maximum": 9})")) == 3);
    CHECK(AnswerSpace::Skeleton(Json::parse(R"({"enum": ["a", "b"]})")) == "a");
  }

  TEST_CASE("a space past 2^64 saturates but keeps its log10 size") {
    HotelDb hotels;
    Json schema = Json::parse(R"({"type": "array", "items": {"type": "string", "x-domain": "hotels.name"}})");
    Json gold = Json::array();
    for (int i = 0; i < 30; ++i) gold.push_back("P-Cheap");
    auto space = AnswerSpace::Build(hotels.db, schema, gold);
    REQUIRE(space.ok());
    CHECK(space->SizeSaturated());
    CHECK(space->Log10Size() == doctest::Approx(30 * std::log10(6.0)));
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::verifiers
