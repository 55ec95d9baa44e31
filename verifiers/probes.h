// The probes of an audit: answer texts a verifier is run on, grouped in families (issue 3).
//
//   gold          the gold solution's answer, K times in a row, in each lane
//   trivial       answers that must fail whatever the task: empty text, null, [], {}, wrong JSON
//                 types, skeletons with empty/null/zero leaves, a truncated gold answer, oversized
//                 "list everything" answers built from the domains, verdict-shaped answers,
//                 prompt-injection texts (alone, appended to the gold text, embedded in a field
//                 whose domain is closed),
//                 and markdown-fenced variants of those. Each is kept only when it is *certainly
//                 wrong* (CertainlyWrong below), so a trivial probe the verifier accepts is always
//                 a fault.
//   space         the answer space (answer_space.h), enumerated when Size() <= max_enumerate,
//                 else a seeded uniform sample of distinct answers
//   neighbourhood seeded multi-field perturbations of the gold answer (radius 1 + geometric):
//                 a changed slot takes a sibling value (same foreign-key parent) with p = 0.7, else
//                 a uniform one; a slot that is the parent of other slots of its record (a day's
//                 city) is moved with its children half the time
//   boundary      threshold probes: a slot takes a *boundary value* -- an entity whose numeric
//                 attribute equals a number of the task's text (prompt and knobs) or is the nearest
//                 value below or above it (a ticket of exactly 120, of 119, of 121.5) -- and, when
//                 the slot has a parent slot in its record (a day's city), the parent follows the
//                 entity and the record's other children are redrawn in the new parent (half the
//                 time from boundary values too)
//   walk          neighbourhood and boundary moves (35%) applied to answers already accepted by a
//                 judge (the audit feeds these rounds back), exploring the accepted region and its
//                 boundary
//   mutant        single-field mutants of the gold answer: every other domain value
//                 (mutant.replace), values of a wrong related entity (mutant.related: a value whose
//                 parent is another parent of the answer, e.g. a hotel of another day's city),
//                 another field's value (mutant.repeat), a related value of another domain
//                 (mutant.cross_domain: a restaurant of the same city in the hotel field), boundary
//                 numbers and wrong types (mutant.boundary, mutant.type), whitespace and case
//                 variants (mutant.spelling)
//   structural    a record dropped, duplicated, reordered; a key dropped, renamed or added (also
//                 one carrying a prompt injection or verdict keys); the answer wrapped in a list or
//                 an object
//
// Probe texts are deduplicated: a text present in several families is judged once and counted in
// each (ProbeSet::Members).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/json.h"
#include "toolsets/json_schema.h"
#include "verifiers/answer_space.h"
#include "base/rng.h"

namespace envforge::verifiers {

enum class ProbeFamily : uint8_t { kGold, kTrivial, kSpace, kNeighbourhood, kWalk, kMutant, kStructural, kBoundary };
inline constexpr size_t kProbeFamilies = 8;
std::string_view ProbeFamilyName(ProbeFamily family);

struct Probe {
  std::string text;                            // the answer text, exactly as submitted
  ProbeFamily family = ProbeFamily::kTrivial;  // the family that added it first
  std::string kind;                            // finer kind: "null", "injection.field", "mutant.replace", ...
  std::string label;                           // what it is, for a person: "/1/hotel <- \"Hotel X\""
  std::vector<uint32_t> choice;                // its choice in the answer space, empty when it has none
};

// Probes in insertion order, deduplicated by text.
class ProbeSet {
 public:
  // Adds the probe (or finds the one with the same text) and records it as a member of
  // `probe.family`; returns its index.
  size_t Add(Probe probe);
  const std::vector<Probe>& probes() const { return probes_; }
  const Probe& operator[](size_t index) const { return probes_[index]; }
  size_t size() const { return probes_.size(); }
  const std::vector<size_t>& Members(ProbeFamily family) const { return members_[static_cast<size_t>(family)]; }
  bool IsMember(size_t index, ProbeFamily family) const { return (masks_[index] >> static_cast<int>(family)) & 1U; }
  std::optional<size_t> Find(const std::string& text) const;

 private:
  std::vector<Probe> probes_;
  std::vector<uint8_t> masks_;
  std::array<std::vector<size_t>, kProbeFamilies> members_;
  std::unordered_map<std::string, size_t> by_text_;
};

// The answer a verifier receives for `text`: its JSON when it parses, else the raw string.
Json EffectiveAnswer(const std::string& text);

// True when the answer text is wrong whatever the task's rules: its effective answer violates the
// answer schema, or a slot of the space holds a value outside a closed domain (x-domain or enum).
bool CertainlyWrong(const std::string& text, const toolsets::CompiledSchema& schema, const AnswerSpace* space);

struct ProbeContext {
  const Json* schema = nullptr;                        // the answer schema
  const toolsets::CompiledSchema* compiled = nullptr;  // the same, compiled
  const AnswerSpace* space = nullptr;                  // may be null (space could not be built)
  std::optional<std::string> gold_text;                // the gold answer text, when the solution ran
  Json gold = nullptr;                                 // its JSON (null when none or not JSON)
};

// Adds the trivial probes (only certainly wrong ones).
void AddTrivialProbes(const ProbeContext& context, ProbeSet& out);

// Adds the answer space: every answer when Size() <= max_enumerate (returns true), else `samples`
// distinct uniform answers drawn with `rng` (returns false).
bool AddSpaceProbes(const AnswerSpace& space, uint64_t max_enumerate, size_t samples, Rng& rng, ProbeSet& out);

// Adds single-field mutants of the gold answer (the space's template when it is the gold); at most
// `max_values_per_slot` replace mutants per slot (a seeded subset beyond it).
void AddMutantProbes(const ProbeContext& context, size_t max_values_per_slot, Rng& rng, ProbeSet& out);

// Adds structural mutants of the gold answer.
void AddStructuralProbes(const ProbeContext& context, ProbeSet& out);

// Perturbs `choice` in place: `radius` distinct slots change (see the file comment). Returns a
// label such as "/1/hotel, /2/city+children".
std::string Perturb(const AnswerSpace& space, std::vector<uint32_t>& choice, size_t radius, Rng& rng);

// Radius of a neighbourhood move: 1 + Geometric(1/2), at most `slots`.
size_t DrawRadius(size_t slots, Rng& rng);

// Adds `count` neighbourhood probes around `center` (the gold's choice).
void AddNeighbourhoodProbes(const AnswerSpace& space, const std::vector<uint32_t>& center, size_t count,
                            ProbeFamily family, Rng& rng, ProbeSet& out);

// Boundary values of a space: per domain (indexed like AnswerSpace::domains()), the values whose
// entity has a numeric attribute at or next to one of `numbers`.
struct BoundaryValue {
  uint32_t value = 0;
  std::string why;  // "ticket_price = 120", "rating 3.9 < 4"
};
using BoundaryValues = std::vector<std::vector<BoundaryValue>>;

// The thresholds of a task's text, in increasing order: the numbers of the prompt with a comparison
// cue next to them ("<", ">=", "at least", "under", "budget", ...; 24 characters before, 8 after),
// and the knobs' numbers whose key names a comparison, a rating or a price ("min_rating": 4.0) or
// that sit in cue text ("ticket": "< 120"). When none has a cue, every number of both.
std::vector<double> TaskNumbers(const std::string& prompt, const Json& knobs);

// For every x-domain "T.c" of the space and every numeric column of T: the values of c on rows
// where the column equals a number, or holds the nearest value below or above it; at most
// `max_per_query` values per (column, number, side). Errors are the database's.
Result<BoundaryValues> FindBoundaryValues(Database& db, const AnswerSpace& space, const std::vector<double>& numbers,
                                          size_t max_per_query = 16);

// An accepted answer whose `parent_slot` holds `parent_value`, or null: lets a boundary move that
// takes a record to another parent start from a known-good record there instead of a random one.
using ContextFn = std::function<const std::vector<uint32_t>*(size_t parent_slot, uint32_t parent_value)>;

// Moves one slot of `choice` to a boundary value (see the file comment); `context` may be null.
// Returns its label, or "" when no slot has a boundary value.
std::string BoundaryMove(const AnswerSpace& space, const BoundaryValues& boundary, std::vector<uint32_t>& choice,
                         Rng& rng, const ContextFn* context = nullptr);

// Adds `count` boundary probes around `center`.
void AddBoundaryProbes(const AnswerSpace& space, const BoundaryValues& boundary, const std::vector<uint32_t>& center,
                       size_t count, ProbeFamily family, Rng& rng, ProbeSet& out, const ContextFn* context = nullptr);

// Caps a string for reports: the first `max_chars` characters plus "... (N chars)".
std::string Abbreviate(const std::string& text, size_t max_chars);

}  // namespace envforge::verifiers
