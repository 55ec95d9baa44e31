// Reads Debian's iso-codes JSON (/usr/share/iso-codes/json) into corpus documents, one per
// entry of each standard: countries (3166-1), their subdivisions (3166-2), former countries
// (3166-3), currencies (4217), languages (639-2, 639-3), language families (639-5) and scripts
// (15924).
//
// Document: doc_id and url "iso<standard>:<code>" ("iso3166-1:FR", "iso3166-2:FR-75",
// "iso4217:EUR", "iso639-3:fra", "iso15924:Latn"); title the entry's name; text the name, what
// it is ("ISO 3166-1 country") and one "field: value" line per field (codes expanded where the
// standard abbreviates them: 639-3 scope and type). A subdivision links to its country
// ("country: France") and to its parent subdivision when it has one.
#pragma once

#include <string>

#include "base/status.h"
#include "toolsets/search/corpus_store.h"

namespace envforge::search {

// Reads every known iso_*.json file present in `dir`. Errors: NotFound naming the directory when
// none is present; DataLoss naming the file for JSON that is not an object holding an array of
// objects under the standard's key; whatever `sink` returns.
Status ReadIsoCodes(const std::string& dir, const DocumentSink& sink);

}  // namespace envforge::search
