// What the session manager keeps per search environment (kind "search"): the backend its
// sessions open and the tasks' answer keys, read once when the environment is opened. An offline
// corpus is copied out of the bundle into a directory of its own (each session's backend opens it
// read-only, one SQLite connection per session); the directory goes with the object.
//
// Thread safety: immutable once opened; shared by the io thread and the sessions' search threads.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "sandbox/search_bundle.h"

namespace envforge::sandbox::internal {

class SearchEnvironment {
 public:
  // Reads the bundle's backend and answer keys; an offline corpus is extracted to
  // <work_dir>/corpus.sqlite (work_dir is created, and must not exist yet or be empty). Errors:
  // those of LoadSearchBundle and ExtractSearchCorpus; Internal when work_dir cannot be created.
  static Result<std::shared_ptr<const SearchEnvironment>> Open(const std::string& envdb_path,
                                                               const std::string& work_dir);
  ~SearchEnvironment();  // removes work_dir
  SearchEnvironment(const SearchEnvironment&) = delete;
  SearchEnvironment& operator=(const SearchEnvironment&) = delete;

  // The configuration a session opens its backend with (offline: corpus is the extracted file).
  const search::SearchBackendConfig& backend() const { return bundle_.backend; }
  // The task's answer key; nullptr for an unknown task.
  const search::AnswerKey* FindAnswer(const std::string& task_id) const;

 private:
  SearchEnvironment(SearchBundle bundle, std::string work_dir);
  SearchBundle bundle_;
  std::string work_dir_;
};

}  // namespace envforge::sandbox::internal
