"""What a model sees, from Python: ToolResult.message_text (the rollout loop's tool messages)."""
import json
import subprocess

import envforge
from conftest import ENVFORGE, write_script

# Calls on rollout_lab and the outcome each gives: a dict result, a string result, a tool that
# raises, arguments that fail the schema, an unknown tool.
CALLS = [
    ("lookup", {"name": "alpha"}, "ok"),
    ("read_manual", {"pages": 1}, "ok"),
    ("lookup", {"name": "nobody"}, "tool_error"),
    ("lookup", {"town": "Paris"}, "invalid_call"),
    ("no_such_tool", {}, "invalid_call"),
]
SUBMIT = {"tool_calls": [{"name": "submit_result", "arguments": {"answer_text": "{\"code\": 4211}"}}]}


def test_message_text_per_outcome(lab_dir):
    with envforge.Runtime(str(lab_dir)) as runtime, runtime.create_session("rollout_lab", "vault_code") as session:
        found = session.call_with("lookup", {"name": "alpha"})
        assert found.ok and isinstance(found.content, dict)
        # An ok result's content as compact JSON (sorted keys, as the engine's JSON writes it).
        assert found.message_text == json.dumps(found.content, separators=(",", ":"), sort_keys=True)
        manual = session.call("read_manual", pages=1)
        assert manual.ok and isinstance(manual.content, str)
        assert manual.message_text == manual.content  # a string result goes in as is, unquoted
        invalid = session.call("no_such_tool")
        assert invalid.outcome == "invalid_call"
        assert invalid.message_text == json.dumps({"message": invalid.message, "outcome": "invalid_call"},
                                                  separators=(",", ":"))
        failed = session.call_with("lookup", {"name": "nobody"})
        assert failed.outcome == "tool_error"
        assert json.loads(failed.message_text) == {"outcome": "tool_error", "message": failed.message}


def test_message_text_equals_the_rollout_loops_tool_messages(lab_dir, tmp_path):
    turns = [{"tool_calls": [{"name": name, "arguments": arguments}]} for name, arguments, _ in CALLS]
    script = write_script(tmp_path / "script.jsonl", [turns + [SUBMIT]])
    store = tmp_path / "rollout.sqlite"
    figures = envforge.rollout(str(lab_dir), "rollout_lab", "vault_code", backend="scripted:" + script,
                               trajectories=str(store))
    assert figures["passed"] == 1
    shown = subprocess.run([str(ENVFORGE), "traj", "show", str(store), figures["episodes"][0]["id"], "--json"],
                           check=True, capture_output=True, text=True)
    messages = json.loads(shown.stdout)["messages"]
    assert messages[0] == dict(messages[0], role="system", content=envforge.DEFAULT_SYSTEM_PROMPT)
    recorded = [m["content"] for m in messages if m["role"] == "tool"]

    with envforge.Runtime(str(lab_dir)) as runtime, runtime.create_session("rollout_lab", "vault_code") as session:
        results = [session.call_with(name, arguments) for name, arguments, _ in CALLS]
        assert [r.outcome for r in results] == [outcome for _, _, outcome in CALLS]
        submitted = session.call_with("submit_result", SUBMIT["tool_calls"][0]["arguments"])
        assert recorded == [r.message_text for r in results] + [submitted.message_text]
