// Reads a dictd database (the format of Debian's dict-* packages) into corpus documents.
//
// A database is two files. `<name>.index`: one line per headword, `headword TAB offset TAB
// length`, the numbers written in dictd's base64 digits (A-Z a-z 0-9 + / for 0..63, most
// significant first, no padding). `<name>.dict.dz`: the entries' text, compressed with dictzip,
// which is gzip with a random-access table in the header's extra field, so zlib reads it as
// ordinary gzip; an uncompressed `<name>.dict` works too.
//
// One document per entry (index lines that point at the same bytes are one entry with several
// headwords): doc_id "<name>:<key>" where key is the headword in lower case with its spaces
// collapsed, "#2", "#3", ... appended when several entries share a headword; the title is the
// headword the entry's text begins with (else the first); the url is the RFC 2229 form
// "dict://dict.org/d:<headword>:<name>"; the text is the entry with its {cross reference} braces
// removed; each brace pair becomes a link to the entry with that headword (resolved through every
// headword of the index, so {ADT} reaches "abstract data type"). The database's own
// "00database..." entries are skipped.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "toolsets/search/corpus_store.h"

namespace envforge::search {

struct DictdDatabase {
  std::string name;  // "gcide"; also the documents' source
  std::string index_path;
  std::string dict_path;  // .dict.dz or .dict
};

// <dir>/<name>.index with <dir>/<name>.dict.dz, or else <dir>/<name>.dict. NotFound naming the
// missing file.
Result<DictdDatabase> LocateDictdDatabase(const std::string& dir, const std::string& name);

// Emits one document per entry into `sink`, in the order of the entries in the .dict file.
// Errors: NotFound or PermissionDenied for unreadable files; DataLoss for a malformed index line,
// an entry outside the .dict data or a corrupt compressed file; whatever `sink` returns.
Status ReadDictdDatabase(const DictdDatabase& database, const DocumentSink& sink);

// A number in dictd's base64 digits. InvalidArgument for an empty string, a character outside
// the alphabet, or a value that does not fit 48 bits.
Result<uint64_t> DecodeDictdNumber(std::string_view digits);

// The key of a headword in doc_ids and links: ASCII lower case, runs of whitespace as one space,
// no space at either end.
std::string DictdKey(std::string_view headword);

}  // namespace envforge::search
