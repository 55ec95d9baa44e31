"""What a model sees, from Python: encode_chat / parse_completion (the engine's DeepSeek-V3.2 chat
format), DEFAULT_SYSTEM_PROMPT and ToolResult.message_text (the rollout loop's tool messages).

The expected renderings are those of tests/inference/chat_format_test.cc (written from the format's
rules), so the binding is checked against the same strings as the C++ encoder.
"""
import json
import subprocess

import pytest

import envforge
from conftest import ENVFORGE, write_script

BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"
USER = "<｜User｜>"
ASSISTANT = "<｜Assistant｜>"


def param(key, value, is_string):
    return '<｜DSML｜parameter name="%s" string="%s">%s</｜DSML｜parameter>' % (key, "true" if is_string else "false", value)


# chat_format_test.cc, "tool calls and results; reasoning kept only after the last user message".
TOOL_CONVERSATION = [
    {"role": "user", "content": "Q1"},
    {"role": "assistant", "content": "A1", "reasoning_content": "old reasoning"},
    {"role": "user", "content": "Q2"},
    {"role": "assistant", "content": "", "reasoning_content": "need data",
     "tool_calls": [{"name": "lookup", "arguments": {"days": 2, "city": "Paris"}},
                    {"id": "call_1", "type": "function", "function": {"name": "ping", "arguments": "{}"}}]},
    {"role": "tool", "content": "R1", "tool_call_id": "call_0"},
    {"role": "tool", "content": "R2", "tool_call_id": "call_1"},
    {"role": "assistant", "content": "Done.", "reasoning_content": "got it"},
]
TOOL_CONVERSATION_THINKING = (
    BOS + USER + "Q1" + ASSISTANT + "</think>" + "A1" + EOS
    + USER + "Q2" + ASSISTANT + "<think>" + "need data</think>"
    + "\n\n<｜DSML｜function_calls>\n"
    + '<｜DSML｜invoke name="lookup">\n' + param("city", "Paris", True) + "\n" + param("days", "2", False)
    + "\n</｜DSML｜invoke>\n"
    + '<｜DSML｜invoke name="ping">\n\n</｜DSML｜invoke>'
    + "\n</｜DSML｜function_calls>" + EOS
    + "\n\n<function_results>\n<result>R1</result>\n<result>R2</result>\n</function_results>\n\n<think>"
    + "got it</think>Done." + EOS)


def test_encode_chat_single_turns():
    assert envforge.encode_chat([{"role": "user", "content": "hello"}]) == BOS + USER + "hello" + ASSISTANT + "</think>"
    assert envforge.encode_chat([{"role": "user", "content": "hello"}], thinking=True) == (
        BOS + USER + "hello" + ASSISTANT + "<think>")
    assert envforge.encode_chat([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]) == (
        BOS + "Be brief." + USER + "hi" + ASSISTANT + "</think>")
    assert envforge.encode_chat([{"role": "user", "content": "x"}], add_bos=False) == USER + "x" + ASSISTANT + "</think>"


def test_encode_chat_tool_calls_and_results_byte_identical():
    assert envforge.encode_chat(TOOL_CONVERSATION, thinking=True) == TOOL_CONVERSATION_THINKING
    chat = envforge.encode_chat(TOOL_CONVERSATION)
    assert "need data" not in chat and "<think>" not in chat
    assert "</function_results>\n\n</think>Done." + EOS in chat
    # As in the reference encoder, turns before the last user message never render their reasoning,
    # so drop_thinking changes nothing.
    assert envforge.encode_chat(TOOL_CONVERSATION, thinking=True, drop_thinking=False) == TOOL_CONVERSATION_THINKING
    # Messages as `envforge traj show --json` prints them (extra keys, empty lists) render the same.
    recorded = [dict(m, index=i, tool_calls=m.get("tool_calls", [])) for i, m in enumerate(TOOL_CONVERSATION)]
    assert envforge.encode_chat(recorded, thinking=True) == TOOL_CONVERSATION_THINKING


def test_encode_chat_arguments_dict_sorted_text_in_order():
    def rendered(arguments):
        return envforge.encode_chat([{"role": "user", "content": "go"},
                                     {"role": "assistant", "tool_calls": [{"name": "f", "arguments": arguments}]}])
    from_dict = rendered({"text": 'multi\nline "quoted"', "flag": True, "items": [1, "two", None], "nested": {"k": 1.5}})
    assert param("flag", "true", False) in from_dict
    assert param("items", '[1, "two", null]', False) in from_dict
    assert param("nested", '{"k": 1.5}', False) in from_dict
    assert param("text", 'multi\nline "quoted"', True) in from_dict
    assert from_dict.index('name="flag"') < from_dict.index('name="text"')  # a dict: sorted keys
    from_text = rendered('{"z": 1, "a": 2}')
    assert from_text.index('name="z"') < from_text.index('name="a"')  # JSON text: its own order
    assert rendered(None) == rendered({}) == rendered("{}")


def test_encode_chat_tools_block():
    tools = [{"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object"}}},
             {"name": "g", "inputSchema": {"type": "object"}}]
    text = envforge.encode_chat([{"role": "system", "content": "S"}, {"role": "user", "content": "u"}], tools=tools)
    assert text.startswith(BOS + "S\n\n## Tools\n\nYou have access to a set of tools")
    assert ('Here are the functions available in JSONSchema format:\n<functions>\n'
            '{"description": "d", "name": "f", "parameters": {"type": "object"}}\n'
            '{"name": "g", "parameters": {"type": "object"}}\n</functions>\n' + USER + "u") in text
    created = envforge.encode_chat([{"role": "user", "content": "u"}], tools=[{"name": "g"}])
    assert created.startswith(BOS + "\n\n## Tools\n")


def test_encode_chat_a_rollout_prompt_with_session_tools(lab_dir):
    with envforge.Runtime(str(lab_dir)) as runtime, runtime.create_session("rollout_lab", "vault_code") as session:
        text = envforge.encode_chat([{"role": "system", "content": envforge.DEFAULT_SYSTEM_PROMPT},
                                     {"role": "user", "content": session.prompt}], tools=session.tools)
    assert text.startswith(BOS + envforge.DEFAULT_SYSTEM_PROMPT + "\n\n## Tools\n")
    assert '"name": "submit_result"' in text and '"name": "lookup"' in text
    assert text.endswith(USER + session.prompt + ASSISTANT + "</think>")


@pytest.mark.parametrize("messages, tools, match", [
    ("user: hi", None, "messages: expected a list of dicts, got str"),
    (["hi"], None, r"messages\[0\]: expected a dict, got str"),
    ([{"content": "x"}], None, r"messages\[0\].role: required"),
    ([{"role": "user", "content": 3}], None, r"messages\[0\].content: expected a str, got int"),
    ([{"role": "developer", "content": "x"}], None, r"messages\[0\]: the developer role is not accepted"),
    ([{"role": "wizard", "content": "x"}], None, r"messages\[0\]: unknown role 'wizard'"),
    ([{"role": "user", "content": "x"}, {"role": "tool", "content": "r"}], None,
     r"messages\[1\]: tool message without a preceding assistant tool call"),
    ([{"role": "user", "content": "x", "tool_calls": [{"name": "f"}]}], None,
     r"messages\[0\].tool_calls: only assistant messages have tool calls"),
    ([{"role": "user", "content": "x", "reasoning_content": "hmm"}], None,
     r"messages\[0\].reasoning_content: only assistant messages have reasoning"),
    ([{"role": "assistant", "tool_calls": {"name": "f"}}], None, r"messages\[0\].tool_calls: expected a list, got dict"),
    ([{"role": "assistant", "tool_calls": [{"arguments": {}}]}], None, r"messages\[0\].tool_calls\[0\].name: a tool call needs a name"),
    ([{"role": "assistant", "tool_calls": [{"type": "custom", "function": {"name": "f"}}]}], None,
     r"messages\[0\].tool_calls\[0\].type: expected \"function\", got 'custom'"),
    ([{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [{"name": "f", "arguments": [1]}]}], None,
     "arguments must be a JSON object"),
    ([{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [{"name": "f", "arguments": "{oops"}]}], None,
     "not valid JSON"),
    ([{"role": "user", "content": "x"}], {"name": "f"}, "tools: expected a list of tool specs, got dict"),
    ([{"role": "user", "content": "x"}], [3], r"tools\[0\]: expected a tool object"),
])
def test_encode_chat_bad_messages_raise_value_error(messages, tools, match):
    with pytest.raises(ValueError, match=match):
        envforge.encode_chat(messages, tools=tools)


def test_parse_completion():
    calls = ('\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="search">\n' + param("limit", "3", False) + "\n"
             + param("query", "weather Paris", True) + "\n</｜DSML｜invoke>\n</｜DSML｜function_calls>")
    parsed = envforge.parse_completion("I should look it up.</think>Let me check." + calls + EOS, thinking=True)
    assert parsed == {"content": "Let me check.", "reasoning_content": "I should look it up.",
                      "tool_calls": [{"name": "search", "arguments": {"limit": 3, "query": "weather Paris"}}],
                      "finished": True, "truncated": False}
    plain = envforge.parse_completion("The answer is 2." + EOS)
    assert plain["content"] == "The answer is 2." and plain["tool_calls"] == [] and plain["finished"]
    cut = envforge.parse_completion("partial answer<｜end▁of")
    assert cut["content"] == "partial answer" and cut["truncated"] and not cut["finished"]
    with pytest.raises(ValueError, match="special token"):
        envforge.parse_completion("a" + USER + "b" + EOS)
    # What encode_chat renders for an assistant turn parses back to the same turn.
    turn = TOOL_CONVERSATION[3]
    prompt = envforge.encode_chat(TOOL_CONVERSATION[:3], thinking=True)
    full = envforge.encode_chat(TOOL_CONVERSATION[:4], thinking=True)
    assert full.startswith(prompt)
    back = envforge.parse_completion(full[len(prompt):], thinking=True)
    assert back["reasoning_content"] == turn["reasoning_content"] and back["finished"]
    assert back["tool_calls"] == [{"name": "lookup", "arguments": {"city": "Paris", "days": 2}},
                                  {"name": "ping", "arguments": {}}]

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
