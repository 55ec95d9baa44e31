#!/usr/bin/env python3
"""A large Python repository for measuring code sessions (envforge bench sandbox on a code bundle).

Writes DIR/repo, a git repository of --files source files (a package of generated modules, about
the size and layout of a mid-sized project) with a bug in one module, and DIR/instance.json, a
SWE-bench-shaped instance whose gold patch fixes the bug and whose test patch adds the test that
shows it. `envforge code import DIR/instance.json --repo DIR/repo -o X.envdb` then `envforge code
validate X.envdb` finds F2P 1, P2F 0.

    /usr/bin/python3 scripts/code_bench_repo.py --files 5000 --out /tmp/bigrepo
"""
import argparse
import json
import os
import random
import subprocess
import sys

TEST_COMMAND = ("PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -m pytest -rA -p no:cacheprovider "
                "-o junit_family=xunit1 --junitxml=\"$ENVFORGE_JUNIT_DIR/pytest.xml\" tests")


def git(repo, *args, stdin=None):
    env = dict(os.environ, GIT_AUTHOR_NAME="envforge", GIT_AUTHOR_EMAIL="bench@envforge.dev",
               GIT_COMMITTER_NAME="envforge", GIT_COMMITTER_EMAIL="bench@envforge.dev",
               GIT_AUTHOR_DATE="2026-01-01T00:00:00Z", GIT_COMMITTER_DATE="2026-01-01T00:00:00Z")
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True, text=True,
                          input=stdin, env=env).stdout


def module_text(rng, index):
    functions = []
    for j in range(rng.randint(4, 40)):
        functions.append("def scale_%d_%d(value):\n    \"\"\"Scales value by %d.\"\"\"\n    return value * %d + %d\n"
                         % (index, j, j, j, rng.randint(0, 999)))
    return "\n\n".join(functions)


def write(repo, path, text):
    full = os.path.join(repo, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as out:
        out.write(text)


CLAMP_BUGGY = "def clamp(value, low, high):\n    return max(low, value)\n"
CLAMP_FIXED = "def clamp(value, low, high):\n    return max(low, min(value, high))\n"
TESTS_BASE = ("from bigpkg.core.clamp import clamp\n\n\ndef test_clamp_low():\n    assert clamp(-5, 0, 10) == 0\n\n\n"
              "def test_clamp_inside():\n    assert clamp(5, 0, 10) == 5\n")
TESTS_NEW = TESTS_BASE + "\n\ndef test_clamp_high():\n    assert clamp(50, 0, 10) == 10\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=5000, help="source files in the repository (5000)")
    parser.add_argument("--out", required=True, help="directory to write repo/ and instance.json into (must not exist)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.files < 10:
        sys.exit("code_bench_repo: --files must be at least 10")
    if os.path.exists(args.out):
        sys.exit("code_bench_repo: %s exists" % args.out)
    rng = random.Random(args.seed)
    repo = os.path.join(args.out, "repo")
    os.makedirs(repo)
    git(repo, "init", "-q", "-b", "main")
    write(repo, "README.md", "# bigpkg\n\nGenerated modules for measuring working copies.\n")
    write(repo, "bigpkg/__init__.py", "")
    write(repo, "bigpkg/core/__init__.py", "")
    write(repo, "bigpkg/core/clamp.py", CLAMP_BUGGY)
    write(repo, "tests/test_clamp.py", TESTS_BASE)
    for index in range(args.files - 5):
        package = "bigpkg/generated/group%02d/part%d" % (index % 40, index % 6)
        write(repo, "%s/module%05d.py" % (package, index), module_text(rng, index))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "bigpkg: %d files" % args.files)
    base = git(repo, "rev-parse", "HEAD").strip()
    write(repo, "bigpkg/core/clamp.py", CLAMP_FIXED)
    patch = git(repo, "diff", "--", "bigpkg")
    write(repo, "tests/test_clamp.py", TESTS_NEW)
    test_patch = git(repo, "diff", "--", "tests")
    git(repo, "commit", "-q", "-am", "clamp: honour the upper bound")
    instance = {
        "instance_id": "envforge-bench__bigpkg-1", "repo": "envforge-bench/bigpkg", "base_commit": base,
        "problem_statement": "clamp(value, low, high) ignores `high`: clamp(50, 0, 10) returns 50, not 10.",
        "patch": patch, "test_patch": test_patch,
        "FAIL_TO_PASS": ["tests/test_clamp.py::test_clamp_high"],
        "PASS_TO_PASS": ["tests/test_clamp.py::test_clamp_inside", "tests/test_clamp.py::test_clamp_low"],
        "language": "python", "install": "", "test_command": TEST_COMMAND, "junit_producer": "pytest",
    }
    with open(os.path.join(args.out, "instance.json"), "w") as out:
        json.dump(instance, out, indent=1)
    print("%s: %d files at %s" % (args.out, args.files, base[:12]))


if __name__ == "__main__":
    main()
