#include "envsynth/funnel.h"

#include <cinttypes>
#include <utility>

namespace envforge::envsynth {
namespace {

bool Reached(const CandidateRecord& c, const char* stage_name) {
  static const char* kOrder[] = {stage::kProposed, stage::kVerified, stage::kAudited, stage::kInBand, stage::kKept};
  int have = -1, want = -1;
  for (int i = 0; i < 5; ++i) {
    if (c.stage == kOrder[i]) have = i;
    if (std::string(stage_name) == kOrder[i]) want = i;
  }
  return have >= want;
}

// A member of a stage result, which is null until the stage ran.
template <typename T>
T Member(const Json& result, const char* key, T fallback) {
  return result.is_object() ? result.value(key, fallback) : fallback;
}

std::string DropClass(const CandidateRecord& c) {
  if (c.dropped_at == "validation") return "validation: " + Member(c.validation, "attribution", std::string("?"));
  if (c.dropped_at == "audit") return "audit: " + Member(c.audit, "verdict", std::string("?"));
  if (c.dropped_at == "filter") {
    return "filter: " + Member(c.filter, "decision", std::string("?")) +
           (Member(c.filter, "early", false) ? " (early stop)" : "");
  }
  return c.dropped_at;
}

void Add(FunnelRow& row, const CandidateRecord& c, double& pass_sum, double& accept_sum) {
  row.candidates += 1;
  row.verified += Reached(c, stage::kVerified) ? 1 : 0;
  row.audited += Reached(c, stage::kAudited) ? 1 : 0;
  row.in_band += Reached(c, stage::kInBand) ? 1 : 0;
  row.kept += c.stage == stage::kKept && c.dropped_at.empty() ? 1 : 0;
  row.repairs += c.attempt;
  if (Member(c.filter, "scored", int64_t{0}) > 0) {
    row.filtered += 1;
    pass_sum += Member(c.filter, "pass_rate", 0.0);
    row.early_stops += Member(c.filter, "early", false) ? 1 : 0;
  }
  if (Member(c.audit, "space_judged", int64_t{0}) > 0) {
    row.audited_any += 1;
    accept_sum += Member(c.audit, "acceptance_rate", 0.0);
  }
}

}  // namespace

Json FunnelRow::ToJson() const {
  return {{"category", category},
          {"level", level},
          {"candidates", candidates},
          {"verified", verified},
          {"audited_sound", audited},
          {"in_band", in_band},
          {"kept", kept},
          {"filtered", filtered},
          {"mean_pass_rate", filtered ? Json(mean_pass_rate) : Json()},
          {"early_stops", early_stops},
          {"mean_acceptance_rate", audited_any ? Json(mean_acceptance) : Json()},
          {"repairs", repairs}};
}

Json DroppedCandidate::ToJson() const {
  return {{"candidate", key}, {"task", task_id}, {"stage", stage}, {"reason", reason}};
}

Result<Funnel> BuildFunnel(RunStore& store) {
  Funnel funnel;
  funnel.run_path = store.path();
  funnel.config = store.config();
  funnel.envs_planned = store.config().value("envs", int64_t{0});
  ENVFORGE_ASSIGN_OR_RETURN(auto environments, store.Environments());
  for (const EnvironmentRecord& env : environments) {
    funnel.envs_done += env.status == "done" ? 1 : 0;
    funnel.envs_failed += env.status == "failed" ? 1 : 0;
    funnel.envs_with_kept += env.kept_tasks > 0 ? 1 : 0;
    funnel.augmentations += static_cast<int64_t>(env.augmentations.size());
    funnel.seconds += env.seconds;
    funnel.model_calls += env.model_calls;
    funnel.tokens += env.tokens;
    if (env.status == "failed") funnel.failed_envs.push_back(env.key + ": " + env.reason);
  }
  funnel.envs_pending = funnel.envs_planned - funnel.envs_done - funnel.envs_failed;
  ENVFORGE_ASSIGN_OR_RETURN(auto candidates, store.Candidates());
  std::map<std::pair<std::string, int64_t>, std::pair<FunnelRow, std::pair<double, double>>> rows;
  FunnelRow total{"all", 0};
  double total_pass = 0, total_accept = 0;
  for (const CandidateRecord& c : candidates) {
    auto& [row, sums] = rows[{c.category, c.level}];
    row.category = c.category;
    row.level = c.level;
    Add(row, c, sums.first, sums.second);
    Add(total, c, total_pass, total_accept);
    funnel.model_calls += c.model_calls;
    funnel.tokens += c.tokens;
    if (!c.dropped_at.empty()) {
      funnel.drop_classes[DropClass(c)] += 1;
      funnel.dropped.push_back({c.key, c.task_id, c.dropped_at, c.reason});
    }
  }
  for (auto& [key, entry] : rows) {
    auto& [row, sums] = entry;
    row.mean_pass_rate = row.filtered ? sums.first / double(row.filtered) : 0;
    row.mean_acceptance = row.audited_any ? sums.second / double(row.audited_any) : 0;
    funnel.rows.push_back(row);
  }
  total.mean_pass_rate = total.filtered ? total_pass / double(total.filtered) : 0;
  total.mean_acceptance = total.audited_any ? total_accept / double(total.audited_any) : 0;
  funnel.rows.push_back(total);
  return funnel;
}

Json Funnel::ToJson() const {
  Json out_rows = Json::array();
  for (const FunnelRow& row : rows) out_rows.push_back(row.ToJson());
  Json out_dropped = Json::array();
  for (const DroppedCandidate& d : dropped) out_dropped.push_back(d.ToJson());
  const int64_t kept = totals().kept;
  return {{"run", run_path},
          {"config", config},
          {"environments",
           {{"planned", envs_planned},
            {"done", envs_done},
            {"failed", envs_failed},
            {"pending", envs_pending},
            {"with_kept_tasks", envs_with_kept},
            {"failures", failed_envs}}},
          {"funnel", out_rows},
          {"drop_reasons", drop_classes},
          {"dropped", out_dropped},
          {"toolset_augmentations", augmentations},
          {"cost",
           {{"seconds", seconds},
            {"model_calls", model_calls},
            {"tokens", tokens},
            {"seconds_per_kept_task", kept ? Json(seconds / double(kept)) : Json()},
            {"model_calls_per_kept_task", kept ? Json(double(model_calls) / double(kept)) : Json()},
            {"tokens_per_kept_task", kept ? Json(double(tokens) / double(kept)) : Json()},
            {"kept_tasks_per_hour", seconds > 0 ? Json(double(kept) * 3600.0 / seconds) : Json()}}}};
}

void Funnel::Print(std::FILE* out) const {
  std::fprintf(out,
               "run %s: %" PRId64 " environment(s) planned, %" PRId64 " done, %" PRId64 " failed, %" PRId64
               " pending; %" PRId64 " with kept tasks; %" PRId64 " toolset augmentation(s)\n\n",
               run_path.c_str(), envs_planned, envs_done, envs_failed, envs_pending, envs_with_kept, augmentations);
  std::fprintf(out, "%-18s %5s %10s %8s %7s %7s %5s %8s %10s %7s\n", "category", "level", "candidates", "verified",
               "sound", "in_band", "kept", "pass@1", "accepted", "repairs");
  for (const FunnelRow& row : rows) {
    char pass[16] = "-", accept[16] = "-";
    if (row.filtered) std::snprintf(pass, sizeof pass, "%.3f", row.mean_pass_rate);
    if (row.audited_any) std::snprintf(accept, sizeof accept, "%.4f", row.mean_acceptance);
    std::string level = row.level ? std::to_string(row.level) : "all";
    std::fprintf(out,
                 "%-18s %5s %10" PRId64 " %8" PRId64 " %7" PRId64 " %7" PRId64 " %5" PRId64 " %8s %10s %7" PRId64 "\n",
                 row.category.c_str(), level.c_str(), row.candidates, row.verified, row.audited, row.in_band, row.kept,
                 pass, accept, row.repairs);
  }
  std::fprintf(
      out,
      "\n(pass@1: the policy's mean pass rate over the candidates it played; accepted: the audit's mean share of the\n"
      " answer space the verifier accepts)\n");
  if (!drop_classes.empty()) {
    std::fprintf(out, "\ndropped, by reason:\n");
    for (const auto& [name, count] : drop_classes) std::fprintf(out, "  %-40s %" PRId64 "\n", name.c_str(), count);
    size_t shown = 0;
    for (const DroppedCandidate& d : dropped) {
      if (shown++ == 12) {
        std::fprintf(out, "  ... %zu more (--json lists every one)\n", dropped.size() - 12);
        break;
      }
      std::fprintf(out, "  %s (%s) at %s: %s\n", d.key.c_str(), d.task_id.c_str(), d.stage.c_str(),
                   d.reason.substr(0, 160).c_str());
    }
  }
  for (const std::string& failure : failed_envs)
    std::fprintf(out, "failed environment %s\n", failure.substr(0, 300).c_str());
  const int64_t kept = totals().kept;
  std::fprintf(out, "\ncost: %.1f s, %" PRId64 " model calls, %" PRId64 " tokens", seconds, model_calls, tokens);
  if (kept > 0) {
    std::fprintf(out, "; per kept task %.1f s, %.1f model calls, %.0f tokens; %.1f kept tasks/hour",
                 seconds / double(kept), double(model_calls) / double(kept), double(tokens) / double(kept),
                 double(kept) * 3600.0 / seconds);
  }
  std::fprintf(out, "\n");
}

}  // namespace envforge::envsynth
