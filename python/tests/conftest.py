"""Fixtures for the envforge Python module tests (run by ctest inside `make test`).

The module is imported from the build tree (PYTHONPATH=build/python, set by ctest). Environments
are packed from data/envs/trip_planning with the real CLI; the Client tests start a real
`envforge serve` on an ephemeral port.
"""
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

SOURCE_DIR = pathlib.Path(os.environ.get("ENVFORGE_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
BUILD_DIR = pathlib.Path(os.environ.get("ENVFORGE_BUILD_DIR", SOURCE_DIR / "build"))
ENVFORGE = BUILD_DIR / "bin" / "envforge"

sys.path.insert(0, str(BUILD_DIR / "python"))


def _packed(tmp_path_factory, source, name):
    """`envforge env pack SOURCE -o DIR/NAME.envdb` into a fresh temporary directory; returns DIR."""
    directory = tmp_path_factory.mktemp(name)
    subprocess.run([str(ENVFORGE), "env", "pack", str(source), "-o", str(directory / (name + ".envdb"))],
                   check=True, capture_output=True)
    return directory


@pytest.fixture(scope="session")
def envs_dir(tmp_path_factory):
    return _packed(tmp_path_factory, SOURCE_DIR / "data" / "envs" / "trip_planning", "trip_planning")


@pytest.fixture(scope="session")
def shop_dir(tmp_path_factory):
    """data/envs/shop_eval_a packed (the held-out shop the shipped policy is measured on)."""
    return _packed(tmp_path_factory, SOURCE_DIR / "data" / "envs" / "shop_eval_a", "shop_eval_a")


@pytest.fixture(scope="session")
def lab_dir(tmp_path_factory):
    """tests/fixtures/envs/rollout_lab packed: a lookup tool (dict results), read_manual (text)."""
    return _packed(tmp_path_factory, SOURCE_DIR / "tests" / "fixtures" / "envs" / "rollout_lab", "rollout_lab")


def write_script(path, scripts):
    """A scripted-backend file: scripts is a list of conversations, each a list of responses."""
    with open(path, "w") as out:
        for number, lines in enumerate(scripts):
            for line in lines:
                out.write(json.dumps(dict(line, script=number)) + "\n")
    return str(path)


def cheapest_rated_hotel(session):
    """The gold strategy of the cheapest_rated_hotel task, played through session tool calls."""
    best = None
    listed = session.call("get_all_hotels_by_city", city="Suzhou")
    assert listed.ok, listed
    for name in listed.content:
        info = session.call("get_infos_by_hotel", info_keywords=["price", "rating"], hotel=name)
        assert info.ok, info
        if float(info.content["rating"]) < 4.0:
            continue
        key = (info.content["price"], name)
        if best is None or key < best:
            best = key
    return {"hotel": best[1]}


def start_server(envs_dir, work_dir, token="sesame", session_ttl=60):
    """Starts `envforge serve` over envs_dir on an ephemeral port, recording into work_dir;
    returns (url, trajectories path, process) once it listens."""
    port_file = work_dir / "port"
    trajectories = work_dir / "trajectories.sqlite"
    process = subprocess.Popen(
        [str(ENVFORGE), "serve", "--envs", str(envs_dir), "--port", "0", "--port-file", str(port_file),
         "--trajectories", str(trajectories), "--token", token, "--session-ttl", str(session_ttl)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while not (port_file.exists() and port_file.read_text().strip()):
        if process.poll() is not None:
            raise RuntimeError("envforge serve exited: " + process.stderr.read().decode())
        if time.time() > deadline:
            process.kill()
            raise RuntimeError("envforge serve did not report its port")
        time.sleep(0.05)
    port = int(port_file.read_text().strip())
    return f"http://127.0.0.1:{port}", trajectories, process


def stop_server(process):
    """SIGTERM (the usual drain), SIGKILL past 30 s; nothing when it already exited."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def server(envs_dir, tmp_path):
    """A running `envforge serve`; yields (url, trajectories path, process)."""
    url, trajectories, process = start_server(envs_dir, tmp_path)
    yield url, trajectories, process
    stop_server(process)
