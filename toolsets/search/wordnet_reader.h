// Reads WordNet 3.0 (Debian's wordnet-base: /usr/share/wordnet/data.{noun,verb,adj,adv}) into
// corpus documents, one per synset.
//
// Why per synset, not per lemma: a synset is WordNet's unit of meaning; it owns the gloss and
// the semantic pointers (hypernym, part meronym, ...), so hypernym chains, the multi-hop
// questions a search environment wants, are chains of documents. A lemma search still finds
// every synset of the lemma, since the title lists all of a synset's lemmas.
//
// Data line format (wndb(5)): `offset lex_filenum ss_type w_cnt word lex_id [word lex_id...]
// p_cnt [symbol offset pos source/target...] [frames...] | gloss`, w_cnt two hex digits,
// p_cnt three decimal digits; lines starting with two spaces are the licence header.
//
// Document: doc_id and url "wordnet:<p><offset>" with p the file's part of speech (n, v, a, r;
// adjective satellites live in data.adj, so 's' pointers lead to "wordnet:a..."); title the
// synset's lemmas, "dog, domestic dog, Canis familiaris"; text the title, the part of speech and
// lexicographer file ("noun.animal"), the gloss, then one line per relation listing the first
// lemma of each target ("hypernym: canine | domestic animal"); one link per pointer, the anchor
// "<relation>: <target's first lemma>".
#pragma once

#include <string>

#include "base/status.h"
#include "toolsets/search/corpus_store.h"

namespace envforge::search {

// Reads every data.{noun,verb,adj,adv} present in `dir`. Errors: NotFound naming the directory
// when none is present; DataLoss naming file and line for a malformed line; whatever `sink`
// returns.
Status ReadWordNet(const std::string& dir, const DocumentSink& sink);

}  // namespace envforge::search
