"""Tests of scripts/code_fixtures.py, the eight-language fixtures of code environments (issue 14).

Run by ctest (tests/data/CMakeLists.txt) with ENVFORGE_BUILD_DIR set to the build directory (the
CLI is $ENVFORGE_BUILD_DIR/bin/envforge); by hand:

    ENVFORGE_BUILD_DIR=build /usr/bin/python3 tests/data/code_fixtures_test.py -v

(without ENVFORGE_BUILD_DIR, build/bin/envforge is used when it exists, else the tests that parse
reports are skipped). Languages whose toolchain is missing on this machine are skipped with the
generator's "toolchain missing" line.

Per language, for real: a fresh copy of the repository at base_commit (no history), install, then
test_command in a sandbox (bubblewrap: no network, everything read-only except the working copy,
$HOME, $TMPDIR and $ENVFORGE_JUNIT_DIR, all fresh; `unshare -rn` when bubblewrap is unusable),
three times: BEFORE = base + test_patch, AFTER = BEFORE + patch, BAD = BEFORE + bad_patch.diff.
Each report is read by `envforge code junit FILE --producer P --json` and must not be broken;
the ids must not depend on --root. Then: FAIL_TO_PASS is exactly the tests failing, erroring or
missing BEFORE and passing AFTER; PASS_TO_PASS exactly those passing on both sides; nothing
passes BEFORE and fails AFTER; BAD keeps every FAIL_TO_PASS passing and fails exactly the one
PASS_TO_PASS test the index names.

Per language again, end to end through the CLI (test_cli_*): `envforge code import` (the task, the
full base commit); `code validate --runs 2` (valid, F2P/P2P as the instance states them, no flaky
test, the lists stored in the bundle's _code table); `code validate --runs 1 --patch bad_patch.diff`
(exit 1, P2F exactly the test the index names, the stored lists untouched); then `session run`
sessions: the gold patch through apply_patch and submit_result (passed); submit_result alone
(failed, each F2P named); the test files deleted with run_command (failed; and, where the test patch
leaves some test files alone, the gold patch plus the deletion fails with those P2P tests missing);
git in the working copy (neither the fix commit, nor a later one, nor the fixed blobs are there;
`git log --all` holds the commits up to base; one ref, no remote, reflog or stash); read_file,
list_dir, search_code on a file the patch touches and run_tests (the P2P tests pass).
test_cli_submission_that_does_not_build_fails is an expected failure: envforge grades a submission
that does not build as an infra error instead of failed.

Timings of each run go to stderr (and, with CODE_FIXTURES_TIMINGS=FILE, into FILE as JSON: "seconds"
for the direct runs, "cli_seconds" for the CLI steps).
"""

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "scripts", "code_fixtures.py")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import code_fixtures  # noqa: E402


def _envforge():
    """$ENVFORGE_BUILD_DIR/bin/envforge (else $ENVFORGE, else build/bin/envforge), or None."""
    if os.environ.get("ENVFORGE_BUILD_DIR"):
        path = os.path.join(os.environ["ENVFORGE_BUILD_DIR"], "bin", "envforge")
    else:
        path = os.environ.get("ENVFORGE") or os.path.join(ROOT, "build", "bin", "envforge")
    path = os.path.abspath(path)
    return path if os.access(path, os.X_OK) else None


ENVFORGE = _envforge()
INSTANCE_KEYS = {"instance_id", "repo", "base_commit", "problem_statement", "patch", "test_patch",
                 "FAIL_TO_PASS", "PASS_TO_PASS", "language", "install", "test_command", "junit_producer"}
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
RUN_TIMEOUT = 600
FAILING = {"fail", "error", "missing"}


def _sandbox_prefix():
    """How test commands are isolated: "bwrap" (no network, / read-only), "unshare" (`unshare -rn`:
    no network) or "none"; CODE_FIXTURES_SANDBOX forces one."""
    forced = os.environ.get("CODE_FIXTURES_SANDBOX")
    if forced:
        if forced not in ("bwrap", "unshare", "none"):
            raise SystemExit("CODE_FIXTURES_SANDBOX must be bwrap, unshare or none")
        return forced
    if shutil.which("bwrap"):
        probe = subprocess.run(["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                                "--unshare-net", "true"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if probe.returncode == 0:
            return "bwrap"
    if shutil.which("unshare"):
        probe = subprocess.run(["unshare", "-rn", "true"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if probe.returncode == 0:
            return "unshare"
    return "none"


SANDBOX = _sandbox_prefix()


def _run_shell(script, wc, home, tmp, junit, timeout=RUN_TIMEOUT):
    """Runs `sh -c script` in wc as the contract says; returns (rc, output, seconds)."""
    env = {"PATH": PATH, "HOME": home, "TMPDIR": tmp, "ENVFORGE_JUNIT_DIR": junit, "LANG": "C.UTF-8"}
    if SANDBOX == "bwrap":
        cmd = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
               "--bind", wc, wc, "--bind", home, home, "--bind", tmp, tmp, "--bind", junit, junit,
               "--unshare-net", "--unshare-pid", "--die-with-parent", "--chdir", wc, "sh", "-c", script]
    elif SANDBOX == "unshare":
        cmd = ["unshare", "-rn", "sh", "-c", script]
    else:
        cmd = ["sh", "-c", script]
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=wc, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, errors="replace", timeout=timeout)
    return proc.returncode, proc.stdout, time.monotonic() - start


def _git(repo, *args):
    return subprocess.run(["git", "-c", "color.ui=false"] + list(args), cwd=repo, check=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True).stdout


def _parse_reports(junit, producer, wc):
    """{test id: status} over every XML file in junit, read by envforge code junit."""
    files = sorted(f for f in os.listdir(junit) if f.endswith(".xml"))
    if not files:
        raise AssertionError("no JUnit XML written into ENVFORGE_JUNIT_DIR")
    statuses = {}
    for name in files:
        path = os.path.join(junit, name)
        reports = []
        for extra in ([], ["--root", wc]):
            proc = subprocess.run([ENVFORGE, "code", "junit", path, "--producer", producer, "--json"] + extra,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
            if proc.returncode != 0:
                raise AssertionError("envforge code junit %s: rc %d: %s" % (name, proc.returncode, proc.stderr))
            reports.append(json.loads(proc.stdout))
        report, rooted = reports
        if report["broken"]:
            raise AssertionError("%s is broken: %s" % (name, report["problems"]))
        ids = [t["id"] for t in report["tests"]]
        if ids != [t["id"] for t in rooted["tests"]]:
            raise AssertionError("%s: ids depend on --root: %s vs %s" % (name, ids, [t["id"] for t in rooted["tests"]]))
        for test in report["tests"]:
            if test["id"] in statuses:
                raise AssertionError("test id %r appears in two reports" % test["id"])
            statuses[test["id"]] = test["status"]
    return statuses


# ---- end to end through the CLI: code import, code validate, session run ------------------

# How a session deletes the fixture's tests (section (c) of _check_cli): the files that define tests,
# per language. Support files the build needs stay (TypeScript's test/globals.d.ts, PHPUnit's
# tests/bootstrap.php): deleting them breaks the build, which is a different case.
DELETE_TESTS = {
    "python": "rm -rf tests",
    "java": "rm -rf src/test",
    "javascript": "rm -rf test",
    "typescript": "rm -f test/*.test.ts",
    "c": "rm -rf tests",
    "cpp": "rm -rf tests",
    "go": "rm -f *_test.go",
    "php": "rm -f tests/*Test.php",
}
CLI_COLUMNS = [("import", "import"), ("validate", "validate --runs 2"), ("validate_before", "tests before"),
               ("validate_after", "tests after"), ("validate_bad", "validate bad"), ("session_gold", "s:gold"),
               ("session_empty", "s:empty"), ("session_delete", "s:rm tests"),
               ("session_gold_delete", "s:gold+rm"), ("session_git", "s:git"), ("session_tools", "s:tools")]


def _cli_table(timings):
    """The seconds of the CLI steps per language, as a small table: wall times of each command (s:X
    a `session run`), and "tests before/after", the before_seconds/after_seconds that
    `code validate --runs 2 --json` reports (the test command's time in one run, the first after)."""
    widths = [max(len(title), 6) for _, title in CLI_COLUMNS]
    lines = ["code fixtures through the CLI, seconds (tests before/after: one run of the test command "
             "inside validate; s:* a session run)",
             "%-10s " % "language" + " ".join("%*s" % (w, t) for w, (_, t) in zip(widths, CLI_COLUMNS)) + "   total"]
    for lang in code_fixtures.LANGUAGES:
        if lang not in timings:
            continue
        t = timings[lang]
        cells = ["%*s" % (w, "-" if t.get(k) is None else "%.2f" % t[k]) for w, (k, _) in zip(widths, CLI_COLUMNS)]
        lines.append("%-10s " % lang + " ".join(cells) + "  %6.2f" % t["total"])
    return "\n".join(lines) + "\n"


def _diff_files(diff):
    return sorted({line.split(" b/", 1)[1] for line in diff.splitlines() if line.startswith("diff --git ")})


class CodeFixturesTest(unittest.TestCase):
    timings = {}
    cli_timings = {}

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="code-fixtures-test-")
        cls.out = os.path.join(cls.tmp, "fixtures")
        proc = subprocess.run([sys.executable, SCRIPT, "--out", cls.out], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True, timeout=600)
        cls.gen_rc, cls.gen_stderr = proc.returncode, proc.stderr
        with open(os.path.join(cls.out, "index.json"), encoding="utf-8") as f:
            cls.index = {e["language"]: e for e in json.load(f)}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)
        if cls.timings:
            for lang, t in sorted(cls.timings.items()):
                sys.stderr.write("code fixture %-10s before %6.2f s  after %6.2f s  bad %6.2f s  (sandbox %s)\n"
                                 % (lang, t["before"], t["after"], t["bad"], SANDBOX))
        if cls.cli_timings:
            sys.stderr.write(_cli_table(cls.cli_timings))
        out = os.environ.get("CODE_FIXTURES_TIMINGS")
        if out and (cls.timings or cls.cli_timings):
            with open(out, "w", encoding="utf-8") as f:
                json.dump({"sandbox": SANDBOX, "seconds": cls.timings, "cli_seconds": cls.cli_timings},
                          f, indent=2, sort_keys=True)

    # ---- the generator as a whole -------------------------------------------------------

    def test_generator_exit_status_and_index(self):
        self.assertEqual(self.gen_rc, 0, self.gen_stderr)
        self.assertEqual(sorted(self.index), sorted(code_fixtures.LANGUAGES))
        lines = []
        with open(os.path.join(self.out, "all.jsonl"), encoding="utf-8") as f:
            lines = [json.loads(line) for line in f]
        written = [l for l in code_fixtures.LANGUAGES if self.index[l]["written"]]
        self.assertEqual([i["language"] for i in lines], written)
        for lang, entry in self.index.items():
            if entry["written"]:
                self.assertEqual(entry["toolchain"], "present")
            else:
                self.assertIn("%s: toolchain missing: " % lang, self.gen_stderr)
                self.assertFalse(os.path.exists(os.path.join(self.out, lang)))

    def test_deterministic(self):
        other = os.path.join(self.tmp, "again")
        langs = [l for l in code_fixtures.LANGUAGES if self.index[l]["written"]]
        if not langs:
            self.skipTest("no toolchain present")
        with open(os.devnull, "w") as devnull:
            code_fixtures.generate(other, langs, log=devnull)
        for name in ["index.json", "all.jsonl"] + ["%s/%s" % (l, f) for l in langs
                                                   for f in ("instance.json", "bad_patch.diff")]:
            with open(os.path.join(self.out, name), "rb") as a, open(os.path.join(other, name), "rb") as b:
                self.assertEqual(a.read(), b.read(), name)

    def test_list_writes_nothing(self):
        proc = subprocess.run([sys.executable, SCRIPT, "--list"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True, cwd=self.tmp)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual([l.split()[0] for l in proc.stdout.splitlines()], code_fixtures.LANGUAGES)

    def test_missing_toolchain_is_skipped_with_a_line(self):
        # An empty PATH: every language lacks git at least; nothing is written, exit 0.
        out = os.path.join(self.tmp, "nopath")
        proc = subprocess.run([sys.executable, SCRIPT, "--out", out, "--language", "go", "--language", "c"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                              env={"PATH": os.path.join(self.tmp, "empty-bin")})
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("go: toolchain missing: git", proc.stderr)
        self.assertIn("c: toolchain missing: git", proc.stderr)
        with open(os.path.join(out, "index.json"), encoding="utf-8") as f:
            index = json.load(f)
        self.assertEqual([(e["language"], e["written"], e["toolchain"]) for e in index],
                         [("c", False, "missing"), ("go", False, "missing")])
        with open(os.path.join(out, "all.jsonl"), encoding="utf-8") as f:
            self.assertEqual(f.read(), "")

    # ---- one language -------------------------------------------------------------------

    def _fixture(self, lang):
        entry = self.index[lang]
        if not entry["written"]:
            self.skipTest("%s: toolchain missing: %s" % (lang, ", ".join(entry["missing"])))
        d = os.path.join(self.out, lang)
        with open(os.path.join(d, "instance.json"), encoding="utf-8") as f:
            instance = json.load(f)
        with open(os.path.join(d, "bad_patch.diff"), encoding="utf-8") as f:
            bad = f.read()
        return entry, instance, bad, os.path.join(d, "repo")

    def _check_shape(self, lang, entry, instance, bad, repo):
        spec = code_fixtures.SPECS[lang]
        optional = {"test_subset_command"} if "test_subset_command" in spec else set()
        self.assertEqual(set(instance), INSTANCE_KEYS | optional)
        self.assertEqual(instance["instance_id"], "envforge-fixtures__%s-1" % lang)
        self.assertEqual(instance["repo"], "envforge-fixtures/%s" % lang)
        self.assertEqual(instance["language"], lang)
        self.assertIsInstance(instance["install"], str)
        self.assertTrue(instance["problem_statement"].strip())
        # History: >= 4 commits, main branch, base before fix, the fix not reachable from base.
        self.assertEqual(_git(repo, "symbolic-ref", "HEAD").strip(), "refs/heads/main")
        shas = _git(repo, "rev-list", "--reverse", "HEAD").split()
        self.assertGreaterEqual(len(shas), 5)
        base, fix = entry["base_commit"], entry["fix_commit"]
        self.assertEqual(instance["base_commit"], base)
        self.assertEqual(len(base), 40)
        self.assertLess(shas.index(base), shas.index(fix))
        self.assertNotEqual(shas[-1], fix, "a commit after the fix")
        self.assertNotIn(fix, _git(repo, "rev-list", base).split())
        # patch: source files only; test_patch: test files only; both git diffs base..fix.
        def files(diff):
            return sorted({line.split(" b/", 1)[1] for line in diff.splitlines() if line.startswith("diff --git ")})
        src, tests = files(instance["patch"]), files(instance["test_patch"])
        self.assertTrue(src and tests)
        self.assertTrue(all(not spec["is_test"](p) for p in src), src)
        self.assertTrue(all(spec["is_test"](p) for p in tests), tests)
        self.assertEqual(sorted(src + tests), sorted(_git(repo, "diff", "--name-only", base, fix).split()))
        self.assertLessEqual(set(src), set(files(bad)), "the bad patch holds the gold patch's files")
        self.assertTrue(all(not spec["is_test"](p) for p in files(bad)), files(bad))
        self.assertNotEqual(bad, instance["patch"])
        # Test ids.
        f2p, p2p = instance["FAIL_TO_PASS"], instance["PASS_TO_PASS"]
        self.assertTrue(f2p)
        self.assertGreaterEqual(len(p2p), 4)
        self.assertFalse(set(f2p) & set(p2p))
        self.assertEqual(len(set(f2p)), len(f2p))
        self.assertEqual(len(set(p2p)), len(p2p))
        self.assertIn(entry["bad_patch_breaks"], p2p)

    def _working_copy(self, repo, base, patches, name):
        """A fresh copy of the repository's tree at base (no .git), with patches applied."""
        wc = os.path.join(self.tmp, "runs", name, "wc")
        os.makedirs(wc)
        archive = subprocess.run(["git", "archive", "--format=tar", base], cwd=repo, check=True,
                                 stdout=subprocess.PIPE).stdout
        subprocess.run(["tar", "-x", "-C", wc], input=archive, check=True)
        for i, patch in enumerate(patches):
            path = os.path.join(self.tmp, "runs", name, "p%d.diff" % i)
            with open(path, "w", encoding="utf-8", newline="\n") as f:
                f.write(patch)
            proc = subprocess.run(["git", "apply", "--whitespace=nowarn", path], cwd=wc,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
            self.assertEqual(proc.returncode, 0, "%s: patch %d does not apply: %s" % (name, i, proc.stderr))
        return wc

    def _run(self, lang, instance, wc, name):
        """install + test_command as the contract says; returns ({id: status}, seconds)."""
        run_dir = os.path.dirname(wc)
        dirs = {}
        for d in ("home", "tmp", "junit"):
            dirs[d] = os.path.join(run_dir, d)
            os.makedirs(dirs[d])
        seconds = 0.0
        if instance["install"].strip():
            rc, out, took = _run_shell(instance["install"], wc, dirs["home"], dirs["tmp"], dirs["junit"])
            seconds += took
            self.assertEqual(rc, 0, "%s %s: install failed:\n%s" % (lang, name, out[-4000:]))
            self.assertEqual(os.listdir(dirs["junit"]), [], "install wrote reports")
        rc, out, took = _run_shell(instance["test_command"], wc, dirs["home"], dirs["tmp"], dirs["junit"])
        seconds += took
        try:
            statuses = _parse_reports(dirs["junit"], instance["junit_producer"], wc)
        except AssertionError as e:
            raise AssertionError("%s %s (rc %d): %s\n--- output ---\n%s" % (lang, name, rc, e, out[-6000:]))
        # The build stays out of the working copy: nothing untracked but what the patches added.
        return statuses, seconds, rc

    def _check_language(self, lang):
        if ENVFORGE is None:
            self.skipTest("no built envforge (set ENVFORGE_BUILD_DIR)")
        entry, instance, bad, repo = self._fixture(lang)
        self._check_shape(lang, entry, instance, bad, repo)
        base = instance["base_commit"]
        before_wc = self._working_copy(repo, base, [instance["test_patch"]], lang + "-before")
        after_wc = self._working_copy(repo, base, [instance["test_patch"], instance["patch"]], lang + "-after")
        bad_wc = self._working_copy(repo, base, [instance["test_patch"], bad], lang + "-bad")
        before, t_before, rc_before = self._run(lang, instance, before_wc, "before")
        after, t_after, rc_after = self._run(lang, instance, after_wc, "after")
        broken, t_bad, _ = self._run(lang, instance, bad_wc, "bad")
        self.timings[lang] = {"before": round(t_before, 2), "after": round(t_after, 2), "bad": round(t_bad, 2)}

        def status(statuses, test):
            return statuses.get(test, "missing")

        f2p, p2p = instance["FAIL_TO_PASS"], instance["PASS_TO_PASS"]
        for test in f2p:
            self.assertIn(status(before, test), FAILING, "%s: F2P %s before" % (lang, test))
            self.assertEqual(status(after, test), "pass", "%s: F2P %s after" % (lang, test))
        for test in p2p:
            self.assertEqual(status(before, test), "pass", "%s: P2P %s before" % (lang, test))
            self.assertEqual(status(after, test), "pass", "%s: P2P %s after" % (lang, test))
        everything = set(before) | set(after)
        computed_f2p = sorted(t for t in everything if status(before, t) in FAILING and status(after, t) == "pass")
        computed_p2p = sorted(t for t in everything if status(before, t) == "pass" and status(after, t) == "pass")
        computed_p2f = sorted(t for t in everything if status(before, t) == "pass" and status(after, t) in FAILING)
        self.assertEqual(computed_f2p, sorted(f2p), "%s: F2P" % lang)
        self.assertEqual(computed_p2p, sorted(p2p), "%s: P2P" % lang)
        self.assertEqual(computed_p2f, [], "%s: P2F" % lang)
        self.assertEqual(sorted(after), sorted(f2p + p2p), "%s: every test after the fix is F2P or P2P" % lang)
        self.assertNotEqual(rc_before, 0, "%s: the test command reports failures by its exit status" % lang)
        self.assertEqual(rc_after, 0, "%s: the test command succeeds after the fix" % lang)
        # The bad patch: F2P still pass, exactly the named P2P test fails.
        bad_p2f = sorted(t for t in p2p if status(broken, t) in FAILING)
        self.assertEqual(bad_p2f, [entry["bad_patch_breaks"]], "%s: P2F of the bad patch" % lang)
        for test in f2p:
            self.assertEqual(status(broken, test), "pass", "%s: F2P %s with the bad patch" % (lang, test))
        # Builds went to $TMPDIR: the working copies hold only the repository's files.
        for wc in (before_wc, after_wc):
            tracked = set(_git(repo, "ls-tree", "-r", "--name-only", base).split())
            tracked |= set(_git(repo, "ls-tree", "-r", "--name-only", entry["fix_commit"]).split())
            present = set()
            for d, dirs, names in os.walk(wc):
                dirs[:] = [x for x in dirs if x != "__pycache__"]
                present |= {os.path.relpath(os.path.join(d, n), wc) for n in names}
            self.assertEqual(sorted(present - tracked), [],
                             "%s: files the test command left in the working copy" % lang)

    # ---- one language through the CLI: import, validate, sessions --------------------------

    def _cli(self, *args, timeout=RUN_TIMEOUT):
        """envforge ARGS: (exit status, stdout, stderr, seconds)."""
        start = time.monotonic()
        proc = subprocess.run([ENVFORGE] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, errors="replace", timeout=timeout)
        return proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start

    def _session(self, lang, envdb, task, name, calls, rc=0):
        """`envforge session run` over CALLS ([(tool, arguments)]): ([result per call], seconds).
        Every call's outcome must be ok."""
        path = os.path.join(self.tmp, "cli", "%s-%s.jsonl" % (lang, name))
        with open(path, "w", encoding="utf-8") as f:
            for tool, arguments in calls:
                f.write(json.dumps({"name": tool, "arguments": arguments}) + "\n")
        code, out, err, seconds = self._cli("session", "run", envdb, "--task", task, "--calls", path, "--json")
        where = "%s session %s (envforge session run %s --task %s --calls %s --json)" % (lang, name, envdb, task, path)
        self.assertEqual(code, rc, "%s: exit %d\nstdout: %s\nstderr: %s" % (where, code, out[-4000:], err[-4000:]))
        results = [json.loads(line) for line in out.splitlines() if line.strip()]
        self.assertEqual(len(results), len(calls), "%s: one result per call:\n%s" % (where, out[-4000:]))
        for (tool, _), result in zip(calls, results):
            self.assertEqual(result["outcome"], "ok", "%s: %s: %s" % (where, tool, json.dumps(result)[:4000]))
        return results, seconds

    def _check_cli(self, lang):
        if ENVFORGE is None:
            self.skipTest("no built envforge (set ENVFORGE_BUILD_DIR)")
        entry, instance, _, repo = self._fixture(lang)
        d = os.path.join(self.out, lang)
        bad_path = os.path.join(d, "bad_patch.diff")
        task, base, fix = instance["instance_id"], instance["base_commit"], entry["fix_commit"]
        f2p, p2p = instance["FAIL_TO_PASS"], instance["PASS_TO_PASS"]
        os.makedirs(os.path.join(self.tmp, "cli"), exist_ok=True)
        envdb = os.path.join(self.tmp, "cli", lang + ".envdb")
        t = {}

        # 1. code import: the task and the full base commit.
        rc, out, err, t["import"] = self._cli("code", "import", os.path.join(d, "instance.json"), "--repo", repo,
                                              "-o", envdb, "--json")
        self.assertEqual(rc, 0, "%s: code import: %s%s" % (lang, out, err))
        imported = json.loads(out)
        self.assertEqual(imported["tasks"], [task])
        self.assertEqual(imported["base_commits"], [base])

        # 2. code validate: valid, the lists as the instance states them, stored in the bundle; the
        # bad patch is refused with the broken P2P test named (and the stored lists stay).
        rc, out, err, t["validate"] = self._cli("code", "validate", envdb, "--runs", "2", "--json")
        self.assertEqual(rc, 0, "%s: code validate --runs 2 exit %d:\n%s\n%s" % (lang, rc, out[-6000:], err[-2000:]))
        (validation,) = json.loads(out)
        self.assertEqual(validation["task"], task)
        self.assertTrue(validation["valid"], validation["reason"])
        self.assertEqual(validation["runs"], 2)
        self.assertEqual(validation["PASS_TO_FAIL"], [])
        self.assertEqual(validation["flaky"], [], "%s: flaky tests over 2 runs" % lang)
        self.assertEqual(set(validation["FAIL_TO_PASS"]), set(f2p), "%s: validate F2P" % lang)
        self.assertEqual(set(validation["PASS_TO_PASS"]), set(p2p), "%s: validate P2P" % lang)
        t["validate_before"], t["validate_after"] = validation["before_seconds"], validation["after_seconds"]

        def stored():
            db = sqlite3.connect("file:%s?mode=ro" % envdb, uri=True)
            try:
                row = db.execute("SELECT validation FROM _code WHERE task_id = ?", (task,)).fetchone()
            finally:
                db.close()
            self.assertIsNotNone(row and row[0], "%s: no validation stored in %s" % (lang, envdb))
            return json.loads(row[0])

        kept = stored()
        self.assertEqual(set(kept["FAIL_TO_PASS"]), set(f2p), "%s: stored F2P" % lang)
        self.assertEqual(set(kept["PASS_TO_PASS"]), set(p2p), "%s: stored P2P" % lang)
        self.assertEqual(kept["PASS_TO_FAIL"], [], "%s: stored P2F" % lang)
        self.assertTrue(kept["valid"])

        rc, out, err, t["validate_bad"] = self._cli("code", "validate", envdb, "--runs", "1", "--patch", bad_path, "--json")
        self.assertEqual(rc, 1, "%s: code validate --patch bad_patch.diff exit %d:\n%s\n%s" % (lang, rc, out[-6000:], err[-2000:]))
        (refused,) = json.loads(out)
        self.assertFalse(refused["valid"])
        self.assertEqual(refused["PASS_TO_FAIL"], [entry["bad_patch_breaks"]], "%s: P2F of the bad patch" % lang)
        self.assertIn(entry["bad_patch_breaks"], refused["reason"])
        self.assertEqual(set(refused["FAIL_TO_PASS"]), set(f2p), "%s: the bad patch still fixes the issue" % lang)
        self.assertEqual(stored(), kept, "%s: validate --patch overwrote the stored validation" % lang)

        # 3a. The gold patch through apply_patch, then submit: passed.
        patched = _diff_files(instance["patch"])
        results, t["session_gold"] = self._session(lang, envdb, task, "gold", [
            ("apply_patch", {"patch": instance["patch"]}), ("submit_result", {})])
        self.assertTrue(results[0]["content"]["applied"])
        self.assertEqual(sorted(results[0]["content"]["files"]), patched)
        verdict = results[1]["content"]
        self.assertIs(verdict["passed"], True, "%s: gold patch: %s" % (lang, verdict))
        self.assertEqual(verdict["reasons"], [])
        self.assertGreater(verdict["diff_bytes"], 0)

        # 3b. Nothing submitted: failed, every F2P test named.
        results, t["session_empty"] = self._session(lang, envdb, task, "empty", [("submit_result", {})])
        verdict = results[0]["content"]
        self.assertIs(verdict["passed"], False, "%s: empty submission: %s" % (lang, verdict))
        self.assertEqual(verdict["diff_bytes"], 0)
        self.assertEqual(sorted(r.rsplit(": ", 1)[0] for r in verdict["reasons"]), sorted(f2p), verdict["reasons"])

        # 3c. The tests deleted: failed. Without the fix, the F2P tests fail (the grader brings back
        # the test files the test patch touches); with the fix, where the test patch leaves some test
        # files alone, their P2P tests are missing, and missing counts as failing.
        spec = code_fixtures.SPECS[lang]
        at_base = set(_git(repo, "ls-tree", "-r", "--name-only", base).split())
        delete = DELETE_TESTS[lang] + " && git ls-files --deleted"
        results, t["session_delete"] = self._session(lang, envdb, task, "delete", [
            ("run_command", {"command": delete}), ("submit_result", {})])
        self.assertEqual(results[0]["content"]["exit_code"], 0, results[0]["content"]["output"])
        deleted = set(results[0]["content"]["output"].split())
        self.assertTrue(deleted and all(spec["is_test"](p) for p in deleted) and deleted <= at_base, deleted)
        verdict = results[1]["content"]
        self.assertIs(verdict["passed"], False, "%s: tests deleted: %s" % (lang, verdict))
        self.assertTrue(set(f2p) <= {r.rsplit(": ", 1)[0] for r in verdict["reasons"]}, verdict["reasons"])
        untouched = deleted - set(_diff_files(instance["test_patch"]))
        t["session_gold_delete"] = None
        if untouched:
            results, t["session_gold_delete"] = self._session(lang, envdb, task, "gold-delete", [
                ("apply_patch", {"patch": instance["patch"]}), ("run_command", {"command": delete}), ("submit_result", {})])
            self.assertEqual(set(results[1]["content"]["output"].split()), deleted)
            verdict = results[2]["content"]
            self.assertIs(verdict["passed"], False, "%s: fixed, tests deleted: %s" % (lang, verdict))
            self.assertTrue(verdict["reasons"], verdict)
            for reason in verdict["reasons"]:
                test, status = reason.rsplit(": ", 1)
                self.assertEqual(status, "missing", reason)
                self.assertIn(test, p2p, reason)

        # 3d. The fix is not in the working copy's repository: neither its commit, nor a later one,
        # nor the fixed files' blobs; the history is exactly the commits up to base, on main alone.
        fix_blobs = [_git(repo, "rev-parse", "%s:%s" % (fix, p)).strip() for p in patched]
        calls = [("run_command", {"command": "git cat-file -e %s" % sha}) for sha in [fix, entry["head_commit"]] + fix_blobs]
        calls += [("run_command", {"command": "git log --all --oneline | wc -l"}),
                  ("run_command", {"command": "git rev-parse HEAD && git for-each-ref --format='%(objectname) %(refname)' "
                                              "&& git remote | wc -l && git reflog | wc -l && git stash list | wc -l"})]
        results, t["session_git"] = self._session(lang, envdb, task, "git", calls)
        for (_, arguments), result in zip(calls, results[:-2]):
            self.assertNotEqual(result["content"]["exit_code"], 0,
                                "%s: `%s` finds the object in the session: %s" % (lang, arguments["command"], result["content"]))
        self.assertEqual(int(results[-2]["content"]["output"]), len(_git(repo, "rev-list", base).split()),
                         "%s: git log --all in the session" % lang)
        self.assertEqual(results[-1]["content"]["output"].split("\n"),
                         [base, "%s refs/heads/main" % base, "0", "0", "0", ""], "%s: refs" % lang)

        # 3e. Reading, listing and searching a file the patch touches; run_tests: the P2P tests pass.
        source = patched[0]
        text = _git(repo, "show", "%s:%s" % (base, source))
        words = sorted({w for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]{5,}", text)}, key=lambda w: (-len(w), w))
        self.assertTrue(words, source)
        folder = os.path.dirname(source)
        results, t["session_tools"] = self._session(lang, envdb, task, "tools", [
            ("read_file", {"path": source}), ("list_dir", {}), ("list_dir", {"path": folder or "."}),
            ("search_code", {"pattern": words[0]}), ("run_tests", {}),
            ("run_tests", {"tests": [p2p[0], f2p[0]]})])
        read, top, listing, search, tests, subset = (r["content"] for r in results)
        self.assertEqual(read["path"], source)
        self.assertFalse(read["truncated"])
        self.assertEqual(read["total_lines"], len(text.splitlines()))
        self.assertEqual("".join(line.split("\t", 1)[1] + "\n" for line in read["content"].splitlines()),
                         "\n".join(text.splitlines()) + "\n", "%s: read_file %s" % (lang, source))
        self.assertIn(source.split("/")[0] + ("/" if folder else ""), top["entries"])
        self.assertNotIn(".git/", top["entries"])
        self.assertIn(source, listing["entries"])
        self.assertTrue(any(m.startswith(source + ":") or m.startswith("./" + source + ":") for m in search["matches"]),
                        "%s: search_code %r: %s" % (lang, words[0], search["matches"]))
        self.assertEqual(tests["problems"], [], "%s: run_tests: %s" % (lang, tests["output"][-3000:]))
        for test in p2p:
            self.assertEqual(tests["tests"].get(test, "missing"), "pass",
                             "%s: run_tests: P2P %s\n%s" % (lang, test, tests["output"][-3000:]))
        # A subset: only those tests in the answer (an F2P test the test patch adds is "missing"),
        # run alone where the instance says how to select them.
        self.assertEqual(sorted(subset["tests"]), sorted({p2p[0], f2p[0]}), "%s: run_tests subset" % lang)
        self.assertEqual(subset["tests"][p2p[0]], "pass", "%s: run_tests subset: %s" % (lang, subset["output"][-3000:]))
        if "test_subset_command" in instance:
            self.assertEqual(subset["selection"], "subset run", lang)
            self.assertLess(subset["ran"], tests["ran"], "%s: the subset ran alone" % lang)
        else:
            self.assertEqual(subset["selection"], "whole suite run, subset reported", lang)
            self.assertEqual(subset["ran"], tests["ran"], lang)
        t["total"] = sum(v for k, v in t.items() if v is not None and k not in ("validate_before", "validate_after"))
        self.cli_timings[lang] = {k: (None if v is None else round(v, 2)) for k, v in t.items()}

    # A submission that does not build leaves no JUnit XML: grading calls it failed (its tests are
    # missing), not an infrastructure error.
    def test_cli_submission_that_does_not_build_fails(self):
        if ENVFORGE is None:
            self.skipTest("no built envforge (set ENVFORGE_BUILD_DIR)")
        _, instance, _, repo = self._fixture("c")
        os.makedirs(os.path.join(self.tmp, "cli"), exist_ok=True)
        envdb = os.path.join(self.tmp, "cli", "c-broken.envdb")
        rc, out, err, _ = self._cli("code", "import", os.path.join(self.out, "c", "instance.json"), "--repo", repo, "-o", envdb)
        self.assertEqual(rc, 0, out + err)
        results, _ = self._session("c", envdb, instance["instance_id"], "broken", [
            ("apply_patch", {"patch": instance["patch"]}),
            ("run_command", {"command": "echo 'this is not C' >> " + _diff_files(instance["patch"])[0]}),
            ("submit_result", {})])
        self.assertIs(results[2]["content"]["passed"], False)

    # A model's episodes on a code environment: envforge rollout through the same sessions, with
    # a scripted backend (one script applies the gold patch and submits, one submits nothing).
    def test_cli_rollout_on_a_code_environment(self):
        if ENVFORGE is None:
            self.skipTest("no built envforge (set ENVFORGE_BUILD_DIR)")
        _, instance, _, repo = self._fixture("python")
        os.makedirs(os.path.join(self.tmp, "cli"), exist_ok=True)
        envdb = os.path.join(self.tmp, "cli", "python-rollout.envdb")
        rc, out, err, _ = self._cli("code", "import", os.path.join(self.out, "python", "instance.json"), "--repo", repo, "-o", envdb)
        self.assertEqual(rc, 0, out + err)
        script = os.path.join(self.tmp, "cli", "python-rollout.jsonl")
        lines = [{"script": 0, "content": "", "tool_calls": [{"name": "apply_patch", "arguments": {"patch": instance["patch"]}}]},
                 {"script": 0, "content": "", "tool_calls": [{"name": "submit_result", "arguments": {}}]},
                 {"script": 1, "content": "", "tool_calls": [{"name": "submit_result", "arguments": {}}]}]
        with open(script, "w", encoding="utf-8") as f:
            f.write("".join(json.dumps(line) + "\n" for line in lines))
        rc, out, err, _ = self._cli("rollout", envdb, "--task", instance["instance_id"], "--backend", "scripted:" + script,
                                    "-n", "4", "--json")
        self.assertEqual(rc, 0, out + err)
        figures = json.loads(out)
        # Which episode plays which script depends on the order they start in: two of each.
        self.assertEqual(sorted(e["passed"] for e in figures["episodes"]), [False, False, True, True], out)
        self.assertEqual(figures["pass_at_k"]["1"], 0.5)
        self.assertEqual(figures["outcomes"], {"submitted": 4})

    def test_python(self):
        self._check_language("python")

    def test_java(self):
        self._check_language("java")

    def test_javascript(self):
        self._check_language("javascript")

    def test_typescript(self):
        self._check_language("typescript")

    def test_c(self):
        self._check_language("c")

    def test_cpp(self):
        self._check_language("cpp")

    def test_go(self):
        self._check_language("go")

    def test_php(self):
        self._check_language("php")

    def test_cli_python(self):
        self._check_cli("python")

    def test_cli_java(self):
        self._check_cli("java")

    def test_cli_javascript(self):
        self._check_cli("javascript")

    def test_cli_typescript(self):
        self._check_cli("typescript")

    def test_cli_c(self):
        self._check_cli("c")

    def test_cli_cpp(self):
        self._check_cli("cpp")

    def test_cli_go(self):
        self._check_cli("go")

    def test_cli_php(self):
        self._check_cli("php")


if __name__ == "__main__":
    unittest.main()
