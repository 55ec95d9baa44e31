// Interpreter episodes as Jupyter notebooks (agents/notebook_export.h): episodes recorded in a real
// trajectory store (SQLite in a temporary directory) and read back, exported, checked cell by cell
// and, when python3 has nbformat, validated by nbformat itself.
#include "agents/notebook_export.h"

#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <vector>

#include "agents/trajectory_store.h"
#include "base/json.h"
#include "base/subprocess.h"
#include "tests/agents/agents_test_util.h"

namespace envforge::agents {
namespace {

using testing::OpenStore;
using testing::TempDir;
using toolsets::Outcome;

// A 1x1 PNG, base64.
constexpr const char* kPng =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

EpisodeStart InterpreterStart(const std::string& kind) {
  EpisodeStart start;
  start.env_id = std::string(64, 'b');
  start.env_name = "python_interpreter";
  start.task_id = "sum-task";
  start.task_version = "tv1";
  start.verifier_version = "vv1";
  start.client = "test";
  start.kind = kind;
  if (kind == "rollout") start.model = "tiny";
  return start;
}

StepRecord Step(int64_t number, const std::string& tool, Json arguments, Outcome outcome, Json content,
                const std::string& message = "") {
  StepRecord step;
  step.step = number;
  step.tool = tool;
  step.arguments = std::move(arguments);
  step.result.call_id = "call-" + std::to_string(number);
  step.result.outcome = outcome;
  step.result.content = std::move(content);
  step.result.message = message;
  step.result.session_alive = outcome != Outcome::kCrashed;
  step.started_at_us = 1'700'000'000'000'000 + number;
  step.duration_us = 10;
  return step;
}

StepRecord Execute(int64_t number, const std::string& code, Outcome outcome, Json content,
                   const std::string& message = "", const std::string& limit = "") {
  StepRecord step = Step(number, "execute", Json{{"code", code}}, outcome, std::move(content), message);
  step.result.limit = limit;
  return step;
}

Json Content(const std::string& status, Json execution_count, Json outputs, bool truncated = false) {
  return Json{{"status", status},
              {"execution_count", std::move(execution_count)},
              {"outputs", std::move(outputs)},
              {"truncated", truncated}};
}

Json Traceback() { return Json::array({"Traceback (most recent call last)", "ZeroDivisionError: division by zero"}); }

// Records the messages and steps of one episode, the way the rollout loop does: an assistant
// message calling each step's tool, then the tool message answering it.
class Recorder {
 public:
  Recorder(TrajectoryStore& store, const std::string& kind)
      : store_(store), id_(store.BeginEpisode(InterpreterStart(kind))) {}

  void Message(const std::string& role, const std::string& content, Json tool_calls = Json::array(),
               int64_t step = -1) {
    MessageRecord message;
    message.index = next_message_++;
    message.role = role;
    message.content = content;
    message.tool_calls = std::move(tool_calls);
    message.step = step;
    if (role == "tool") message.tool_outcome = "ok";
    message.created_at_us = 1'700'000'000'000'000 + message.index;
    store_.RecordMessage(id_, std::move(message));
  }

  // An assistant message with `text` calling step's tool, the step, and the tool message.
  void Turn(const std::string& text, StepRecord step) {
    const int64_t number = step.step;
    Json call = {{"id", "call-" + std::to_string(number)}, {"name", step.tool}, {"arguments", step.arguments}};
    Message("assistant", text, Json::array({std::move(call)}));
    store_.RecordStep(id_, std::move(step));
    Message("tool", "result", Json::array(), number);
  }

  void Step(StepRecord step) { store_.RecordStep(id_, std::move(step)); }

  Episode Finish(std::optional<EpisodeOutcome> outcome = EpisodeOutcome::kSubmitted) {
    if (outcome) store_.EndEpisode(id_, *outcome);
    Status flushed = store_.Flush();
    REQUIRE_MESSAGE(flushed.ok(), flushed.ToString());
    REQUIRE(store_.Stats().write_errors == 0);
    auto episode = store_.Get(id_);
    REQUIRE_MESSAGE(episode.ok(), episode.status().ToString());
    return std::move(episode).value();
  }

  const std::string& id() const { return id_; }

 private:
  TrajectoryStore& store_;
  std::string id_;
  int64_t next_message_ = 0;
};

// The full interpreter rollout: every output type, an error, a timeout, a crash, a restart, an
// interrupt and a submitted answer.
Episode RecordInterpreterRollout(TrajectoryStore& store, std::string* id = nullptr) {
  Recorder recorder(store, "rollout");
  if (id != nullptr) *id = recorder.id();
  recorder.Message("system", "You are a data scientist.");
  recorder.Message("user", "Compute 1 + 1 and plot it.");
  recorder.Turn(
      "Let me print something first.",
      Execute(
          0, "print('hi')\nimport sys; print('oops', file=sys.stderr)", Outcome::kOk,
          Content("ok", 1,
                  Json::array(
                      {Json{{"output_type", "stream"}, {"name", "stdout"}, {"text", "hi\n"}},
                       Json{{"output_type", "stream"}, {"name", "stderr"}, {"text", Json::array({"oo", "ps\n"})}}}))));
  // An execute_result without metadata or execution_count, with a member nbformat does not know.
  recorder.Turn("", Execute(1, "1 + 1", Outcome::kOk,
                            Content("ok", 2,
                                    Json::array({Json{{"output_type", "execute_result"},
                                                      {"data", Json{{"text/plain", "2"}, {"image/png", kPng}}},
                                                      {"extra", "dropped"}}}))));
  // display_data with a list-of-lines text, JSON data, a non-text value, transient, and an output
  // type that is not nbformat's.
  recorder.Turn("Now a figure.",
                Execute(2, "display(fig)", Outcome::kOk,
                        Content("ok", 3,
                                Json::array({Json{{"output_type", "display_data"},
                                                  {"data", Json{{"text/plain", Json::array({"<Figure ", "size 1x1>"})},
                                                                {"image/png", kPng},
                                                                {"application/json", Json{{"a", 1}}},
                                                                {"text/html", 5}}},
                                                  {"transient", Json{{"display_id", "d1"}}}},
                                             Json{{"output_type", "clear_output"}, {"wait", true}}}),
                                /*truncated=*/true)));
  recorder.Turn("", Execute(3, "1/0", Outcome::kToolError,
                            Content("error", 4,
                                    Json::array({Json{{"output_type", "error"},
                                                      {"ename", "ZeroDivisionError"},
                                                      {"evalue", "division by zero"},
                                                      {"traceback", Traceback()}}})),
                            "ZeroDivisionError: division by zero"));
  // A timeout whose kernel did not come back from the interrupt and was replaced.
  Json timed_out =
      Content("timeout", 5, Json::array({Json{{"output_type", "stream"}, {"name", "stdout"}, {"text", "started\n"}}}));
  timed_out["restarted"] = true;
  recorder.Turn("",
                Execute(4, "while True: pass", Outcome::kTimeout, timed_out, "the cell ran past 10 s", "wall_time"));
  recorder.Turn(
      "", Execute(5, "import os; os._exit(1)", Outcome::kCrashed, Json(), "the kernel died (exit status 1)", "memory"));
  recorder.Turn("The kernel died; restarting.",
                Step(6, "restart", Json::object(), Outcome::kOk, Json{{"status", "ok"}}));
  recorder.Turn("After the restart, I'll recompute.",
                Execute(7, "x = 1 + 1\nx", Outcome::kOk,
                        Content("ok", 1,
                                Json::array({Json{{"output_type", "execute_result"},
                                                  {"execution_count", 1},
                                                  {"data", Json{{"text/plain", "2"}}},
                                                  {"metadata", Json::object()}}}))));
  recorder.Turn("", Step(8, "interrupt", Json::object(), Outcome::kOk, Json{{"interrupted", false}}));
  const Json verdict = {
      {"passed", true}, {"score", 1.0}, {"reasons", Json::array({"the answer matches"})}, {"verifier_version", "vv1"}};
  recorder.Turn("The answer is 2.", Step(9, "submit_result", Json{{"answer_text", "2"}}, Outcome::kOk, verdict));
  store.RecordSubmit(recorder.id(), "2", verdict);
  return recorder.Finish();
}

std::vector<std::string> CellIds(const Json& notebook) {
  std::vector<std::string> ids;
  for (const Json& cell : notebook["cells"]) ids.push_back(cell["id"].get<std::string>());
  return ids;
}

const Json& CellWithId(const Json& notebook, const std::string& id) {
  for (const Json& cell : notebook["cells"]) {
    if (cell["id"] == id) return cell;
  }
  FAIL("no cell " << id);
  static const Json kNone;
  return kNone;
}

TEST_SUITE("agents.notebook_export") {
  TEST_CASE("an interpreter rollout becomes one code cell per execute, with its outputs, between markdown cells") {
    TempDir dir;
    auto store = OpenStore(dir / "traj.sqlite");
    std::string id;
    Episode episode = RecordInterpreterRollout(*store, &id);
    auto exported = EpisodeToNotebook(episode);
    REQUIRE_MESSAGE(exported.ok(), exported.status().ToString());
    const Json& notebook = *exported;

    CHECK(notebook["nbformat"] == 4);
    CHECK(notebook["nbformat_minor"] == 5);
    CHECK(notebook["metadata"]["kernelspec"] ==
          Json{{"name", "python3"}, {"display_name", "Python 3"}, {"language", "python"}});
    CHECK(notebook["metadata"]["language_info"] == Json{{"name", "python"}});
    const Json& meta = notebook["metadata"]["envforge"];
    CHECK(meta["episode_id"] == id);
    CHECK(meta["env"] == "python_interpreter");
    CHECK(meta["task_id"] == "sum-task");
    CHECK(meta["outcome"] == "submitted");
    CHECK(meta["reward"] == 1.0);
    CHECK(meta["passed"] == true);
    CHECK(meta["model"] == "tiny");

    // Prompt first, the model's text where it was said, tool messages and empty texts not shown.
    CHECK(CellIds(notebook) == std::vector<std::string>{"message-1", "message-2", "step-0", "step-1", "message-6",
                                                        "step-2", "step-3", "step-4", "step-4-restart", "step-5",
                                                        "message-14", "step-6", "message-16", "step-7", "step-8",
                                                        "message-20", "step-9"});
    for (const Json& cell : notebook["cells"]) {
      CAPTURE(cell.dump());
      CHECK(cell["metadata"].is_object());
      CHECK(cell["source"].is_string());
      if (cell["cell_type"] == "code") {
        CHECK(cell["metadata"]["envforge"]["tool"] == "execute");
        for (const Json& output : cell["outputs"]) {
          if (output["output_type"] == "display_data" || output["output_type"] == "execute_result") {
            CHECK(output["metadata"].is_object());
          }
        }
      }
    }
    const Json& prompt = notebook["cells"][0];
    CHECK(prompt["cell_type"] == "markdown");
    CHECK(prompt["source"] == "## Task `sum-task`\n\nCompute 1 + 1 and plot it.");
    CHECK(CellWithId(notebook, "message-2")["source"] == "Let me print something first.");

    SUBCASE("streams: text is a string, a list of lines joined") {
      const Json& cell = CellWithId(notebook, "step-0");
      CHECK(cell["cell_type"] == "code");
      CHECK(cell["source"] == "print('hi')\nimport sys; print('oops', file=sys.stderr)");
      CHECK(cell["execution_count"] == 1);
      CHECK(cell["outputs"] == Json::array({Json{{"output_type", "stream"}, {"name", "stdout"}, {"text", "hi\n"}},
                                            Json{{"output_type", "stream"}, {"name", "stderr"}, {"text", "oops\n"}}}));
    }
    SUBCASE("execute_result gets the cell's execution_count and empty metadata; unknown members go") {
      const Json& cell = CellWithId(notebook, "step-1");
      CHECK(cell["execution_count"] == 2);
      CHECK(cell["outputs"] == Json::array({Json{{"output_type", "execute_result"},
                                                 {"execution_count", 2},
                                                 {"data", Json{{"text/plain", "2"}, {"image/png", kPng}}},
                                                 {"metadata", Json::object()}}}));
    }
    SUBCASE("display_data keeps text and JSON data, drops transient, non-text values and unknown outputs") {
      const Json& cell = CellWithId(notebook, "step-2");
      CHECK(cell["outputs"] == Json::array({Json{{"output_type", "display_data"},
                                                 {"data", Json{{"text/plain", "<Figure size 1x1>"},
                                                               {"image/png", kPng},
                                                               {"application/json", Json{{"a", 1}}}}},
                                                 {"metadata", Json::object()}}}));
      CHECK(cell["metadata"]["envforge"]["truncated"] == true);
    }
    SUBCASE("an error keeps its ename, evalue and traceback, and nothing is added") {
      const Json& cell = CellWithId(notebook, "step-3");
      CHECK(cell["execution_count"] == 4);
      REQUIRE(cell["outputs"].size() == 1);
      CHECK(cell["outputs"][0] == Json{{"output_type", "error"},
                                       {"ename", "ZeroDivisionError"},
                                       {"evalue", "division by zero"},
                                       {"traceback", Traceback()}});
      CHECK(cell["metadata"]["envforge"]["outcome"] == "tool_error");
      CHECK(cell["metadata"]["envforge"]["status"] == "error");
    }
    SUBCASE("a timeout keeps what was printed and says it timed out") {
      const Json& cell = CellWithId(notebook, "step-4");
      CHECK(cell["execution_count"] == 5);
      REQUIRE(cell["outputs"].size() == 2);
      CHECK(cell["outputs"][0]["text"] == "started\n");
      CHECK(cell["outputs"][1]["output_type"] == "error");
      CHECK(cell["outputs"][1]["ename"] == "ExecutionTimeout");
      CHECK(cell["outputs"][1]["evalue"] == "the cell ran past 10 s (limit wall_time)");
      const Json& restarted = CellWithId(notebook, "step-4-restart");
      CHECK(restarted["cell_type"] == "markdown");
      CHECK(restarted["source"].get<std::string>().starts_with("*kernel restarted"));
    }
    SUBCASE("a crash without content: no execution_count, a KernelCrashed error") {
      const Json& cell = CellWithId(notebook, "step-5");
      CHECK(cell["cell_type"] == "code");
      CHECK(cell["execution_count"].is_null());
      REQUIRE(cell["outputs"].size() == 1);
      CHECK(cell["outputs"][0]["output_type"] == "error");
      CHECK(cell["outputs"][0]["ename"] == "KernelCrashed");
      CHECK(cell["outputs"][0]["evalue"] == "the kernel died (exit status 1) (limit memory)");
      CHECK(cell["outputs"][0]["traceback"] ==
            Json::array({"KernelCrashed: the kernel died (exit status 1) (limit memory)"}));
      CHECK(cell["metadata"]["envforge"]["outcome"] == "crashed");
    }
    SUBCASE("restart and interrupt are markdown notes; counting starts again after the restart") {
      CHECK(CellWithId(notebook, "step-6")["cell_type"] == "markdown");
      CHECK(CellWithId(notebook, "step-6")["source"] == "*kernel restarted*");
      CHECK(CellWithId(notebook, "step-8")["source"] == "*interrupt: nothing was running*");
      const Json& cell = CellWithId(notebook, "step-7");
      CHECK(cell["execution_count"] == 1);
      CHECK(cell["outputs"][0]["execution_count"] == 1);
    }
    SUBCASE("the submitted answer and its verdict end the notebook") {
      const Json& last = notebook["cells"].back();
      CHECK(last["id"] == "step-9");
      CHECK(last["cell_type"] == "markdown");
      const std::string source = last["source"].get<std::string>();
      CHECK(source.find("**Submitted answer**\n\n```text\n2\n```") != std::string::npos);
      CHECK(source.find("**Verdict:** passed, score 1") != std::string::npos);
      CHECK(source.find("- the answer matches") != std::string::npos);
    }
    SUBCASE("the text form is the same notebook, one-space indented") {
      auto text = EpisodeToNotebookText(episode);
      REQUIRE(text.ok());
      CHECK(text->starts_with("{\n \""));
      CHECK(text->ends_with("}\n"));
      CHECK(ParseJson(*text).value() == notebook);
    }
  }

  TEST_CASE("a served episode has no prompt or model text: only its calls, in step order") {
    TempDir dir;
    auto store = OpenStore(dir / "traj.sqlite");
    Recorder recorder(*store, "served");
    recorder.Step(Execute(0, "a = 1", Outcome::kOk, Content("ok", 1, Json::array())));
    recorder.Step(Step(1, "restart", Json::object(), Outcome::kToolError, Json(), "no kernel to restart"));
    recorder.Step(Execute(2, "", Outcome::kInvalidCall, Json(), "'code' is required"));
    recorder.Step(Step(3, "list_files", Json{{"path", "."}}, Outcome::kOk, Json{{"files", Json::array({"a.csv"})}}));
    recorder.Step(Step(4, "interrupt", Json::object(), Outcome::kOk, Json{{"interrupted", true}}));
    Episode episode = recorder.Finish(std::nullopt);
    auto notebook = EpisodeToNotebook(episode);
    REQUIRE_MESSAGE(notebook.ok(), notebook.status().ToString());
    CHECK(CellIds(*notebook) == std::vector<std::string>{"step-0", "step-1", "step-2", "step-3", "step-4"});
    CHECK((*notebook)["cells"][4]["source"] == "*kernel interrupted*");
    CHECK((*notebook)["cells"][0]["outputs"] == Json::array());
    CHECK((*notebook)["cells"][1]["source"] == "*kernel restart failed* (tool_error: no kernel to restart)");
    const Json& invalid = (*notebook)["cells"][2];
    CHECK(invalid["execution_count"].is_null());
    CHECK(invalid["outputs"] == Json::array({Json{{"output_type", "error"},
                                                  {"ename", "InvalidCall"},
                                                  {"evalue", "'code' is required"},
                                                  {"traceback", Json::array({"InvalidCall: 'code' is required"})}}}));
    const std::string other = (*notebook)["cells"][3]["source"].get<std::string>();
    CHECK(other.find("`list_files`") != std::string::npos);
    CHECK(other.find("a.csv") != std::string::npos);
    CHECK((*notebook)["metadata"]["envforge"]["outcome"].is_null());
    CHECK((*notebook)["metadata"]["envforge"]["reward"].is_null());
  }

  TEST_CASE("after a context event the conversation recorded again is not repeated; the event is shown") {
    TempDir dir;
    auto store = OpenStore(dir / "traj.sqlite");
    Recorder recorder(*store, "rollout");
    recorder.Message("system", "sys");
    recorder.Message("user", "Do the task.");
    recorder.Turn("First I load the data.", Execute(0, "load()", Outcome::kOk, Content("ok", 1, Json::array())));
    ContextEventRecord event;
    event.seq = 0;
    event.turn = 0;
    event.strategy = "summary";
    event.tokens_before = 900;
    event.tokens_after = 100;
    event.messages_dropped = 2;
    event.summary = "Loaded the data.";
    store->RecordContextEvent(recorder.id(), event);
    // What the rollout loop records again: the kept conversation (the prompt with the summary, the
    // first turn), tool messages without their step.
    recorder.Message("system", "sys");
    recorder.Message("user", "Do the task.\n\nSummary so far: Loaded the data.");
    recorder.Message(
        "assistant", "First I load the data.",
        Json::array({Json{{"id", "call-0"}, {"name", "execute"}, {"arguments", Json{{"code", "load()"}}}}}));
    recorder.Message("tool", "result");
    recorder.Turn("Now I compute.", Execute(1, "compute()", Outcome::kOk, Content("ok", 2, Json::array())));
    recorder.Turn("Now I compute.", Execute(2, "compute()", Outcome::kOk, Content("ok", 3, Json::array())));
    store->RecordSubmit(recorder.id(), "42", Json{{"passed", false}, {"score", 0.0}, {"reasons", Json::array()}});
    Episode episode = recorder.Finish(EpisodeOutcome::kSubmitted);
    auto notebook = EpisodeToNotebook(episode);
    REQUIRE_MESSAGE(notebook.ok(), notebook.status().ToString());
    // message-10 repeats message-8's text but makes another call: both turns are shown.
    CHECK(CellIds(*notebook) == std::vector<std::string>{"message-1", "message-2", "step-0", "context-0", "message-8",
                                                         "step-1", "message-10", "step-2", "answer"});
    const std::string context = CellWithId(*notebook, "context-0")["source"].get<std::string>();
    CHECK(context.find("summary") != std::string::npos);
    CHECK(context.find("Loaded the data.") != std::string::npos);
    // No submit step, but an answer stored: the answer cell comes last, from the episode.
    const std::string answer = notebook->at("cells").back()["source"].get<std::string>();
    CHECK(answer.find("```text\n42\n```") != std::string::npos);
    CHECK(answer.find("**Verdict:** failed, score 0") != std::string::npos);
  }

  TEST_CASE("cell ids stay unique and answers cannot break out of their fence") {
    TempDir dir;
    auto store = OpenStore(dir / "traj.sqlite");
    Recorder recorder(*store, "served");
    recorder.Step(Execute(0, "x", Outcome::kOk, Content("ok", 1, Json::array())));
    recorder.Step(Step(1, "submit_result", Json{{"answer_text", "a ``` b ```` c"}}, Outcome::kToolError, Json(),
                       "verifier crashed"));
    Episode episode = recorder.Finish();
    // Two steps with the same number cannot be stored: make one by hand.
    StepRecord again = episode.steps[0];
    episode.steps.push_back(again);
    auto notebook = EpisodeToNotebook(episode);
    REQUIRE(notebook.ok());
    CHECK(CellIds(*notebook) == std::vector<std::string>{"step-0", "step-1", "step-0-2"});
    const std::string submit = (*notebook)["cells"][1]["source"].get<std::string>();
    CHECK(submit.find("`````text\na ``` b ```` c\n`````") != std::string::npos);
    CHECK(submit.find("**Not scored** (tool_error: verifier crashed)") != std::string::npos);
  }

  TEST_CASE("an episode without execute calls is not an interpreter episode: InvalidArgument naming it") {
    TempDir dir;
    auto store = OpenStore(dir / "traj.sqlite");
    Recorder recorder(*store, "served");
    recorder.Step(Step(0, "search_flights", Json{{"from", "A"}}, Outcome::kOk, Json::array()));
    Episode episode = recorder.Finish();
    auto notebook = EpisodeToNotebook(episode);
    REQUIRE_FALSE(notebook.ok());
    CHECK(notebook.status().code() == StatusCode::kInvalidArgument);
    CHECK(notebook.status().message().find(recorder.id()) != std::string::npos);
    CHECK(notebook.status().message().find("search_flights") != std::string::npos);
    CHECK(EpisodeToNotebookText(episode).status().code() == StatusCode::kInvalidArgument);

    Episode empty;
    empty.summary.id = "t-empty";
    CHECK(EpisodeToNotebook(empty).status().message().find("t-empty") != std::string::npos);
  }

  TEST_CASE("nbformat accepts the exported notebook") {
    const std::string python = "/usr/bin/python3";
    auto probe = RunCommand({python, "-c", "import nbformat"});
    if (!probe.ok() || probe->exit_code != 0 || probe->term_signal != 0) {
      MESSAGE("skipped: " << python << " cannot import nbformat");
      return;
    }
    TempDir dir;
    auto store = OpenStore(dir / "traj.sqlite");
    Episode episode = RecordInterpreterRollout(*store);
    auto text = EpisodeToNotebookText(episode);
    REQUIRE_MESSAGE(text.ok(), text.status().ToString());
    const std::string path = dir / "episode.ipynb";
    {
      std::ofstream file(path, std::ios::binary);
      file << *text;
      REQUIRE(file.good());
    }
    auto checked = RunCommand({python, "-c",
                               "import json, sys, nbformat\n"
                               "nb = nbformat.read(sys.argv[1], as_version=4)\n"
                               "nbformat.validate(nb)\n"
                               "# nbformat only warns about a missing cell id (4.5)\n"
                               "assert all(cell.get('id') for cell in json.load(open(sys.argv[1]))['cells'])\n"
                               "print(nb.nbformat, nb.nbformat_minor, len(nb.cells))\n",
                               path});
    REQUIRE(checked.ok());
    INFO("stderr: " << checked->stderr_text);
    CHECK(checked->exit_code == 0);
    CHECK(checked->stdout_text == "4 5 17\n");
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::agents
