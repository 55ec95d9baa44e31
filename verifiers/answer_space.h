// The answer space of a task: the answers its answer schema allows when every annotated field
// takes a value from its domain (ARCHITECTURE.md, "Verifiers"; issue 3, "answer-space probes").
//
// A task's answer schema may annotate a field with the database column its values come from:
// {"type": "string", "x-domain": "hotels.name"}. The space is built over a *template* answer (the
// gold answer when it satisfies the schema, else a skeleton built from the schema): every leaf of
// the template whose schema node has a domain is a *slot*; every other leaf keeps the template's
// value. A slot's domain is, in order of precedence:
//   enum            the schema's "enum" values
//   const           the schema's "const" (a one-value domain)
//   x-domain T.c    SELECT DISTINCT c FROM T WHERE c IS NOT NULL ORDER BY c, read from the bundle
//   boolean         [false, true] for "type": "boolean"
//   integer range   every integer of [minimum, maximum] for an integer with both bounds and at
//                   most kMaxIntegerRange values
// The space is the cartesian product of the slots' domains: Size() answers, addressed by a choice
// (one value index per slot). Equal domains are shared: "hotels.name" is read once.
//
// x-domain validation (no SQL injection): "T.c" must split at its only "." into a table T that is
// a data table of the bundle (type 'table' in sqlite_schema, name not starting with "_" or
// "sqlite_") and a column c of T (pragma_table_info), both compared case-insensitively with the
// catalogue; the SQL then uses the catalogue's names, double-quoted. Anything else is
// InvalidArgument naming the schema pointer and the annotation.
//
// Related entities: for an x-domain T.c, every single-column foreign key of T (T.k REFERENCES
// P(p)) is a DomainLink: the parent values and, per domain value, its parents (a hotel's city).
// The audit uses links for "siblings" (values sharing a parent), "wrong related entity" mutants
// (a value whose parent is another parent of the answer, e.g. a hotel of another day's city) and
// group moves (a slot whose domain is P.p, e.g. a day's city, changed with its children slots).
//
// Thread safety: an AnswerSpace is immutable after Build; const methods may run concurrently.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/json.h"
#include "base/sqlite.h"
#include "base/status.h"

namespace envforge::verifiers {

inline constexpr int64_t kMaxIntegerRange = 1000;

// A single-column foreign key of a domain's table, as seen from the domain's values.
struct DomainLink {
  std::string column;                           // the referencing column of the domain's table ("city")
  std::string parent;                           // "P.p", e.g. "cities.name"
  std::vector<Json> parent_values;              // distinct non-null values of the column, ordered
  std::vector<std::vector<uint32_t>> parents;   // per domain value: indexes into parent_values
  std::vector<std::vector<uint32_t>> children;  // per parent value: indexes into the domain's values
  std::optional<uint32_t> ParentIndex(const Json& value) const;
  std::unordered_map<std::string, uint32_t> parent_index;  // DumpJson(value) -> index
};

struct Domain {
  std::string source;  // "hotels.name", "enum", "const", "boolean", "integer 1..5"
  std::vector<Json> values;
  std::vector<DomainLink> links;                    // x-domain only
  std::unordered_map<std::string, uint32_t> index;  // DumpJson(value) -> index
  std::optional<uint32_t> IndexOf(const Json& value) const;
};

inline constexpr uint32_t kNoValue = UINT32_MAX;

struct Slot {
  std::string pointer;                 // RFC 6901 pointer into the answer: "/1/hotel", "" for the root
  std::string field;                   // the last reference token: "hotel", "1"
  std::string record;                  // pointer of the nearest enclosing array element ("/1"), "" when none
  size_t domain = 0;                   // index into AnswerSpace::domains()
  uint32_t template_value = kNoValue;  // the template's value in the domain, kNoValue when not in it
};

// A group relation inside one record: `child`'s domain links to `parent`'s domain (a hotel slot
// and the city slot of the same day).
struct SlotRelation {
  size_t parent = 0;
  size_t child = 0;
  size_t link = 0;  // index into the child's domain's links
};

class AnswerSpace {
 public:
  // Builds the space of `schema` (which passed toolsets::CheckSchema) over `template_answer`
  // (the gold answer; null or schema-invalid: a skeleton from the schema is used instead). `db`
  // is the bundle, opened read-only. Errors: InvalidArgument for a bad x-domain annotation
  // (message names the schema pointer), the database's errors otherwise.
  static Result<AnswerSpace> Build(Database& db, const Json& schema, const Json& template_answer);

  const Json& template_answer() const { return template_; }
  bool template_is_gold() const { return template_is_gold_; }
  const std::vector<Slot>& slots() const { return slots_; }
  const std::vector<Domain>& domains() const { return domains_; }
  const Domain& domain_of(const Slot& slot) const { return domains_[slot.domain]; }
  const std::vector<SlotRelation>& relations() const { return relations_; }

  // The number of answers: the product of the slots' domain sizes (1 with no slot). Size() is
  // exact up to 2^64 - 1 and saturates there; Log10Size() is always meaningful.
  uint64_t Size() const { return size_; }
  bool SizeSaturated() const { return saturated_; }
  double Log10Size() const { return log10_size_; }

  // The template's choice: one value index per slot (kNoValue where the template's value is not
  // in the domain).
  std::vector<uint32_t> TemplateChoice() const;
  // The answer of a choice (one value index per slot; kNoValue keeps the template's value).
  Json Make(const std::vector<uint32_t>& choice) const;
  // The choice of answer number `rank` in mixed-radix order (slot 0 varies slowest); rank < Size().
  std::vector<uint32_t> ChoiceAt(uint64_t rank) const;

  // A skeleton answer of `schema`: objects with every property, arrays of minItems (at least 1)
  // items, strings "x" (or the first enum/const value), numbers at their lower bound or 0, false.
  static Json Skeleton(const Json& schema);

 private:
  Json template_;
  bool template_is_gold_ = false;
  std::vector<Slot> slots_;
  std::vector<Domain> domains_;
  std::vector<SlotRelation> relations_;
  uint64_t size_ = 1;
  bool saturated_ = false;
  double log10_size_ = 0;
};

// Opens an *.envdb read-only for reading domains. Errors are Database::Open's.
Result<Database> OpenBundleForDomains(const std::string& envdb_path);

// Reads the distinct values of an x-domain "T.c" (validated as above) with its foreign-key links.
Result<Domain> ReadDomain(Database& db, const std::string& annotation);

}  // namespace envforge::verifiers
