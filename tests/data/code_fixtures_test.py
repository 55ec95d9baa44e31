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
PASS_TO_PASS test the index names. Timings of each run go to stderr (and, with
CODE_FIXTURES_TIMINGS=FILE, into FILE as JSON).
"""

import json
import os
import shutil
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


class CodeFixturesTest(unittest.TestCase):
    timings = {}

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
            out = os.environ.get("CODE_FIXTURES_TIMINGS")
            if out:
                with open(out, "w", encoding="utf-8") as f:
                    json.dump({"sandbox": SANDBOX, "seconds": cls.timings}, f, indent=2, sort_keys=True)

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
        self.assertEqual(set(instance), INSTANCE_KEYS)
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


if __name__ == "__main__":
    unittest.main()
