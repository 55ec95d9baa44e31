// A search environment's runtime state (search_environment.h).
#include "sandbox/internal/search_environment.h"

#include <filesystem>

namespace envforge::sandbox::internal {

namespace fs = std::filesystem;

Result<std::shared_ptr<const SearchEnvironment>> SearchEnvironment::Open(const std::string& envdb_path,
                                                                         const std::string& work_dir) {
  ENVFORGE_ASSIGN_OR_RETURN(SearchBundle bundle, LoadSearchBundle(envdb_path));
  std::error_code ec;
  fs::create_directories(work_dir, ec);
  if (ec) return InternalError("cannot create " + work_dir + " for the search corpus: " + ec.message());
  // Owned from here on: a failed extraction removes the directory too.
  std::shared_ptr<SearchEnvironment> environment(new SearchEnvironment(std::move(bundle), work_dir));
  if (environment->bundle_.backend.backend == "offline") {
    const std::string corpus = (fs::path(work_dir) / "corpus.sqlite").string();
    ENVFORGE_RETURN_IF_ERROR(ExtractSearchCorpus(envdb_path, corpus));
    environment->bundle_.backend.corpus = corpus;
  }
  return std::shared_ptr<const SearchEnvironment>(std::move(environment));
}

SearchEnvironment::SearchEnvironment(SearchBundle bundle, std::string work_dir)
    : bundle_(std::move(bundle)), work_dir_(std::move(work_dir)) {}

SearchEnvironment::~SearchEnvironment() {
  std::error_code ignored;
  fs::remove_all(work_dir_, ignored);
}

const search::AnswerKey* SearchEnvironment::FindAnswer(const std::string& task_id) const {
  auto it = bundle_.answers.find(task_id);
  return it == bundle_.answers.end() ? nullptr : &it->second;
}

}  // namespace envforge::sandbox::internal
