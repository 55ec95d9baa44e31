"""The worker's argument validator (sandbox/worker/python/runtime.py _validate, which checks a gold
solution's tool calls inside the sandbox) against schema_agreement_cases.json, the cases
toolsets_test runs through toolsets/json_schema.cc (which checks an agent's calls): both paths
must accept and refuse the same arguments.

runtime.py runs inside the worker's embedded interpreter, whose native modules (_envforge,
_envforge_analyze) do not exist here; _validate uses neither, so empty stand-ins let the file
import."""

import importlib.util
import json
import os
import sys
import types

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CASES = json.load(open(os.path.join(HERE, "schema_agreement_cases.json")))["cases"]


@pytest.fixture(scope="module")
def runtime():
    native = types.ModuleType("_envforge")
    native.json_value_too_deep = lambda value: False
    native.MAX_JSON_VALUE_DEPTH = 128
    saved = {name: sys.modules.get(name) for name in ("_envforge", "_envforge_analyze")}
    sys.modules["_envforge"] = native
    sys.modules["_envforge_analyze"] = types.ModuleType("_envforge_analyze")
    try:
        spec = importlib.util.spec_from_file_location("envforge_worker_runtime",
                                                      os.path.join(ROOT, "sandbox/worker/python/runtime.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        for name, old in saved.items():
            if old is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old


@pytest.mark.parametrize("case", CASES, ids=[json.dumps(c["schema"]) + " " + json.dumps(c["instance"]) for c in CASES])
def test_worker_validator_agrees(runtime, case):
    errors = []
    runtime._validate(case["schema"], case["instance"], "", errors)
    assert (not errors) == case["valid"], errors


def test_const_message_matches_the_cpp_validator(runtime):
    errors = []
    runtime._validate({"const": 2}, 3, "", errors)
    assert errors == ["must equal 2"]
