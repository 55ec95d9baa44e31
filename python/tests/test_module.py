"""The envforge module: Runtime (in process) and Client (over a real server) share one API."""
import json
import signal
import sqlite3

import pytest

import envforge
from conftest import cheapest_rated_hotel


def test_runtime_full_episode(envs_dir):
    with envforge.Runtime(str(envs_dir)) as runtime:
        envs = runtime.envs()
        assert [e["name"] for e in envs] == ["trip_planning"]
        task_ids = {t["id"] for t in runtime.tasks("trip_planning")}
        assert "cheapest_rated_hotel" in task_ids
        with runtime.create_session("trip_planning", "cheapest_rated_hotel") as session:
            assert "Suzhou" in session.prompt
            names = [t["name"] for t in session.tools]
            assert "get_all_hotels_by_city" in names and "submit_result" in names
            assert session.versions["env"] == envs[0]["id"]
            answer = cheapest_rated_hotel(session)
            verdict = session.submit(answer)
            assert verdict["passed"] is True
            assert verdict["score"] == 1.0
        assert session.closed


def test_session_tools_are_the_environments_read_once(envs_dir):
    # Creates ask for no tool list; Session.tools reads the environment's once per connection.
    with envforge.Runtime(str(envs_dir)) as runtime:
        expected = runtime.env("trip_planning")["tools"]
        with runtime.create_session("trip_planning", "cheapest_rated_hotel") as session:
            created = runtime.call("session/create", {"env": "trip_planning", "task": "cheapest_rated_hotel",
                                                      "tools": False})
            assert "tools" not in created
            runtime.call("session/close", {"session": created["session"]})
            assert session.tools == expected
            with session.fork() as copy:
                assert copy.tools == expected
        assert session.closed and session.tools == expected
        with runtime.create_session("trip_planning", "cheapest_rated_hotel") as again:
            assert again.tools == expected


def test_wrong_answer_fails_and_typed_outcomes(envs_dir):
    with envforge.Runtime(str(envs_dir)) as runtime:
        with runtime.create_session("trip_planning", "cheapest_rated_hotel") as session:
            verdict = session.submit('{"hotel": "No Such Hotel"}')
            assert verdict["passed"] is False
            bad = session.call("get_all_hotels_by_city", town="Suzhou")
            assert bad.outcome == "invalid_call"
            assert not bad.ok
            missing = session.call("no_such_tool")
            assert missing.outcome == "invalid_call"
            assert "no_such_tool" in missing.message


def test_errors_are_rpc_errors_with_codes(envs_dir):
    with envforge.Runtime(str(envs_dir)) as runtime:
        with pytest.raises(envforge.RpcError) as unknown_env:
            runtime.create_session("no_such_env", "x")
        assert unknown_env.value.code == -32002
        with pytest.raises(envforge.RpcError) as unknown_task:
            runtime.create_session("trip_planning", "no_such_task")
        assert unknown_task.value.code == -32002
        with pytest.raises(envforge.RpcError) as unknown_session:
            runtime.call("tools/call", {"session": "s-000000000000000000000000", "name": "x", "arguments": {}})
        assert unknown_session.value.code == -32001
        with pytest.raises(TypeError):
            runtime.call("envs/list", {"bad": object()})


def _nested(depth):
    value = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_deep_and_self_containing_values_raise_instead_of_crashing(envs_dir):
    # Converting to JSON recursed once per level: a list that contains itself, or 100,000 levels,
    # overflowed the trainer's own stack before the bound.
    cyclic = []
    cyclic.append(cyclic)
    with envforge.Runtime(str(envs_dir)) as runtime:
        with runtime.create_session("trip_planning", "cheapest_rated_hotel") as session:
            for value in (cyclic, _nested(100_000), _nested(101)):
                with pytest.raises(ValueError, match="deeper than 100 levels"):
                    session.call("get_all_hotels_by_city", city=value)
                with pytest.raises(ValueError, match="deeper than 100 levels"):
                    session.submit(value)
            # At the bound the value converts; the schema then refuses a list for a string.
            at_bound = session.call("get_all_hotels_by_city", city=_nested(99))
            assert at_bound.outcome == "invalid_call"
            assert session.call("get_all_hotels_by_city", city="Suzhou").ok


def test_fork_diverges_and_reset(envs_dir):
    with envforge.Runtime(str(envs_dir)) as runtime:
        session = runtime.create_session("trip_planning", "cheapest_rated_hotel")
        first = session.call("get_all_cities")
        fork = session.fork()
        assert fork.id != session.id
        assert fork.call("get_all_cities").content == first.content
        assert fork.submit(cheapest_rated_hotel(fork))["passed"] is True
        fresh = session.reset()
        assert session.closed and fresh.id != session.id
        with pytest.raises(ValueError):
            session.call("get_all_cities")
        fresh.close()
        fork.close()


def test_max_sessions_is_retryable(envs_dir):
    with envforge.Runtime(str(envs_dir), max_sessions=2) as runtime:
        a = runtime.create_session("trip_planning", "cheapest_rated_hotel")
        b = runtime.create_session("trip_planning", "cheapest_rated_hotel")
        with pytest.raises(envforge.RpcError) as full:
            runtime.create_session("trip_planning", "cheapest_rated_hotel")
        assert full.value.code == -32003
        assert full.value.retryable
        a.close()
        c = runtime.create_session("trip_planning", "cheapest_rated_hotel")
        b.close()
        c.close()


def test_runtime_records_trajectories(envs_dir, tmp_path):
    store = tmp_path / "t.sqlite"
    with envforge.Runtime(str(envs_dir), trajectories=str(store)) as runtime:
        with runtime.create_session("trip_planning", "cheapest_rated_hotel") as session:
            session.submit(cheapest_rated_hotel(session))
            calls = runtime.stats()
            assert calls
    with sqlite3.connect(store) as db:
        (episodes,) = db.execute("SELECT COUNT(*) FROM episodes").fetchone()
        (outcome,) = db.execute("SELECT outcome FROM episodes").fetchone()
        (steps,) = db.execute("SELECT COUNT(*) FROM steps").fetchone()
    assert episodes == 1
    assert outcome == "submitted"
    assert steps >= 2


def test_client_against_server(server):
    url, trajectories, process = server
    with pytest.raises(envforge.RpcError) as unauthorized:
        envforge.Client(url).envs()
    assert unauthorized.value.code == -32005
    for transport_url in (url, url.replace("http://", "ws://") + "/ws"):
        with envforge.Client(transport_url, token="sesame") as client:
            assert [e["name"] for e in client.envs()] == ["trip_planning"]
            with client.create_session("trip_planning", "cheapest_rated_hotel") as session:
                assert session.submit(cheapest_rated_hotel(session))["passed"] is True
                with pytest.raises(envforge.RpcError) as unknown:
                    client.call("tools/call", {"session": session.id + "x", "name": "get_all_cities", "arguments": {}})
                assert unknown.value.code == -32001
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0
    with sqlite3.connect(trajectories) as db:
        rows = db.execute("SELECT outcome FROM episodes").fetchall()
    assert len(rows) == 2 and all(r[0] == "submitted" for r in rows)


def test_client_unreachable_server():
    with pytest.raises(envforge.RpcError) as error:
        envforge.Client("http://127.0.0.1:1", token=None, timeout=2).envs()
    assert error.value.retryable or error.value.code == -32007
