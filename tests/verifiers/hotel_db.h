// A tiny data set for the unit suites: three cities, six hotels (with a foreign key to cities),
// and a reserved table, written to a plain SQLite file.
#pragma once

#include <doctest/doctest.h>

#include <string>

#include "base/json.h"
#include "base/sqlite.h"

namespace envforge::verifiers::testing {

inline void WriteHotelDb(const std::string& path) {
  auto db = Database::Open(path, Database::Mode::kReadWriteCreate);
  REQUIRE_MESSAGE(db.ok(), db.status().ToString());
  Status created = db->Exec(
      "CREATE TABLE cities(name TEXT PRIMARY KEY, country TEXT NOT NULL);"
      "CREATE TABLE hotels(name TEXT PRIMARY KEY, city TEXT NOT NULL REFERENCES cities(name), price INTEGER NOT NULL,"
      " stars INTEGER);"
      "CREATE TABLE _secret(x TEXT);"
      "INSERT INTO cities VALUES ('Paris', 'FR'), ('Rome', 'IT'), ('Oslo', 'NO');"
      "INSERT INTO hotels VALUES ('P-Cheap', 'Paris', 80, 2), ('P-Edge', 'Paris', 100, 3), ('P-Lux', 'Paris', 300, 5),"
      " ('R-Cheap', 'Rome', 50, 1), ('R-Mid', 'Rome', 150, NULL), ('O-One', 'Oslo', 90, 3);"
      "INSERT INTO _secret VALUES ('hidden');");
  REQUIRE_MESSAGE(created.ok(), created.ToString());
}

// {"hotel": <hotels.name>}
inline Json OneHotelSchema() {
  return ParseJson(R"({"type": "object", "properties": {"hotel": {"type": "string", "minLength": 1,
      "x-domain": "hotels.name"}}, "required": ["hotel"], "additionalProperties": false})")
      .value();
}

// Two day records [{"city", "hotel"}, {"city", "hotel"}].
inline Json TwoDaySchema() {
  return ParseJson(R"({"type": "array", "minItems": 2, "maxItems": 2, "items": {"type": "object",
      "properties": {"city": {"type": "string", "x-domain": "cities.name"},
                     "hotel": {"type": "string", "x-domain": "hotels.name"}},
      "required": ["city", "hotel"], "additionalProperties": false}})")
      .value();
}

inline Json TwoDayGold() {
  return ParseJson(R"([{"city": "Paris", "hotel": "P-Cheap"}, {"city": "Rome", "hotel": "R-Mid"}])").value();
}

}  // namespace envforge::verifiers::testing
