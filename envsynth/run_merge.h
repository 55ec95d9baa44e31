// Merging run databases (issue 13, "Scale past one machine"): a run split with `--shard I/N`
// (synth_run.h) leaves one RUN.sqlite per shard; MergeRuns combines them into one run database
// that `envforge synth report` (funnel.h) and `envforge synth resume` read like any other.
//
// What is copied. Every table of the run database (run_store.h) and, in it, every column by name
// (the columns are read from the input, not listed here), so columns added to the schema later
// are carried without a change to this file:
//   run_meta      format_version and config are the output's own (below); any other row is
//                 copied, the first input's value winning where inputs disagree;
//   environments  united by key;
//   candidates    united by key;
//   events        every event, with a fresh id, in time order ("at"; ties in input order); an
//                 event identical in every column to one already copied is kept once.
// A key present in two inputs is refused unless its rows are identical in every column (then it
// is kept once): shards of one N with distinct I never overlap, and any set of inputs whose
// environments are disjoint is accepted.
//
// The output's config is the first input's with "shard": [0, 1] (the merged run is the whole
// run: resuming it makes what no shard finished) and "merged_from": the inputs' absolute paths.
//
// Atomicity. The output is written in one transaction to "<output>.tmp.<pid>" beside it (in
// rollback-journal mode, so the file is whole on its own; RunStore::Open turns WAL back on),
// fsynced, renamed into place without replacing anything, and the directory fsynced: the output
// is either complete or absent. Every failure removes the temporary file (a process killed
// mid-merge leaves only that file). Inputs are only read (though opened read-write, as
// RunStore::Open does), each in one snapshot, so a shard that is still running may be merged
// (its later work is not).
//
// Thread safety: concurrent calls are safe when their outputs differ.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace envforge::envsynth {

// Merges the run databases `inputs` into a new run database `output`. Errors:
//   InvalidArgument     no input; an input that is not a run database; configs that differ in a
//                       key other than "shard", "out_dir" and "merged_from" (the message names the
//                       first such key, in key order, and the two files); an environment or
//                       candidate key in two inputs with different rows (names the key and both
//                       files);
//   NotFound            a missing input, or a missing directory for `output`;
//   FailedPrecondition  an input of another format version; an input with a table or a column
//                       this envforge's run database does not have (written by a newer envforge);
//   AlreadyExists       `output` exists (it is left untouched);
//   PermissionDenied, ResourceExhausted, DataLoss, Internal   the file system and SQLite's own.
Status MergeRuns(const std::vector<std::string>& inputs, const std::string& output);

}  // namespace envforge::envsynth
