#!/usr/bin/python3
"""The eight-language fixtures of code environments (issue 14): small real repositories with a
real test suite each, an issue, a gold patch, a test patch and a deliberately bad patch.

    /usr/bin/python3 scripts/code_fixtures.py --out DIR [--language L ...] [--list]

For each language (python, java, javascript, typescript, c, cpp, go, php) it writes

    DIR/<lang>/repo/          a git repository (branch main) of five commits: initial, feature,
                              BASE (the bug is present), FIX (the source fix and new/changed
                              tests), and one later commit, so that an importer must cut the
                              history (the fix is not reachable from BASE)
    DIR/<lang>/instance.json  one SWE-bench-shaped instance (instance_id, repo, base_commit,
                              problem_statement, patch, test_patch, FAIL_TO_PASS, PASS_TO_PASS,
                              language, install, test_command, junit_producer)
    DIR/<lang>/bad_patch.diff the gold patch plus one more change that breaks one PASS_TO_PASS
                              test (validation must refuse it with that test in P2F)

and DIR/all.jsonl (the written instances, one a line) and DIR/index.json (one entry per
requested language: written or skipped, with its toolchain status). A language whose toolchain
is missing is skipped with "<lang>: toolchain missing: <what>" on stderr; the script exits 0
unless a toolchain that is present fails its probe (exit 1). --list prints the languages, their
runners and toolchain status, and writes nothing.

The contract of the instances:
  * install: a shell script run once in a fresh copy of the repository at base before the tests
    (all are "" here: every build happens inside test_command);
  * test_command: run with `sh -c` in the working copy's root, without network, with HOME and
    TMPDIR fresh empty writable directories, the working copy writable and everything else
    read-only. It runs the whole suite and writes JUnit XML into $ENVFORGE_JUNIT_DIR (exists,
    empty); its exit status may be non-zero when tests fail. Builds go under $TMPDIR, never into
    the working copy (a stale build could otherwise run deleted tests);
  * FAIL_TO_PASS / PASS_TO_PASS: test ids exactly as `envforge code junit FILE --producer
    <junit_producer>` prints them for the runner's report (checked by
    tests/data/code_fixtures_test.py, which runs every fixture before and after the gold patch).

Runners (Debian bookworm packages, installed by scripts/setup.sh; nothing from npm):
  python      pytest (python3-pytest), xunit1 report
  java        JUnit 5 console launcher (junit5) over javac (default-jdk-headless), legacy XML
  javascript  mocha (Debian mocha 10.1) with its built-in xunit reporter
  typescript  tsc (node-typescript) to $TMPDIR, then mocha's xunit reporter on the output
  c           CMake + CTest --output-junit, one CTest test per test case
  cpp         GoogleTest (libgtest-dev) through make, --gtest_output=xml
  go          gotestsum (gotestsum, golang-go) --junitfile
  php         PHPUnit 9 (phpunit, php-cli) --log-junit

Deterministic: fixed author, committer, e-mail and dates (GIT_*_DATE), no user or system git
configuration, so the commit hashes and every output byte are the same on every run (for a
given git version).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

LANGUAGES = ["python", "java", "javascript", "typescript", "c", "cpp", "go", "php"]

AUTHOR_NAME = "Envforge Fixtures"
AUTHOR_EMAIL = "fixtures@envforge.invalid"
COMMITTER_NAME = "Envforge Maintainer"
COMMITTER_EMAIL = "maintainer@envforge.invalid"

BASE_INDEX = 2  # commits[2] is the base commit, commits[3] the fix
FIX_INDEX = 3

NODE_PATH_PREFIX = 'NODE_PATH=/usr/share/nodejs${NODE_PATH:+:$NODE_PATH}'
MOCHA_XUNIT = 'mocha --reporter xunit --reporter-option output="$ENVFORGE_JUNIT_DIR/mocha.xml"'


# Shell text: the TestIds of $ENVFORGE_TESTS_FILE as one anchored regex alternation, regex
# metacharacters escaped ("^(a|b\.c)$"), after the sed expressions `rewrite` (e.g. "-e 's/::/ /'").
def ids_regex(rewrite=""):
    return ('"^($(sed %s -e \'s/[][\\.*^$()+?{}|/]/\\\\&/g\' \"$ENVFORGE_TESTS_FILE\" | paste -sd\'|\'))$"'
            % rewrite).replace("sed  -e", "sed -e")


def _text(s):
    """Source text: a leading newline dropped, exactly one trailing newline."""
    if s.startswith("\n"):
        s = s[1:]
    return s.rstrip("\n") + "\n"


# ------------------------------------------------------------------------------------------
# python: intervals (merging closed integer intervals), pytest
# ------------------------------------------------------------------------------------------

PY_MERGE_C1 = _text('''
"""Merging of closed integer intervals."""


def _check(interval):
    start, end = interval
    if start > end:
        raise ValueError("interval start %r is after its end %r" % (start, end))
    return start, end


def merge(intervals):
    """Merges overlapping closed intervals; returns a sorted list of (start, end) tuples."""
    ordered = sorted(_check(i) for i in intervals)
    merged = []
    for start, end in ordered:
        if merged and start < merged[-1][1]:
            last_start, last_end = merged[-1]
            merged[-1] = (last_start, max(last_end, end))
        else:
            merged.append((start, end))
    return merged


def total_length(intervals):
    """The length covered by the union of the intervals."""
    return sum(end - start for start, end in merge(intervals))
''')

PY_COVERS = _text('''
def covers(intervals, point):
    """True when some interval contains point (both bounds included)."""
    return any(start <= point <= end for start, end in merge(intervals))
''')

PY_MERGE_C3 = PY_MERGE_C1 + "\n\n" + PY_COVERS
PY_MERGE_C4 = PY_MERGE_C3.replace("if merged and start < merged[-1][1]:",
                                  "if merged and start <= merged[-1][1]:")

PY_TEXT = _text('''
"""Reading and writing interval lists such as "1-3, 5-7, 9"."""

import re

_PART = re.compile(r"^(-?\\d+)(?:-(-?\\d+))?$")


def parse(text):
    """Parses "1-3, 5-7, 9" into [(1, 3), (5, 7), (9, 9)]."""
    result = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        match = _PART.match(part)
        if not match:
            raise ValueError("not an interval: %r" % part)
        start = int(match.group(1))
        end = int(match.group(2)) if match.group(2) is not None else start
        if start > end:
            raise ValueError("interval start %d is after its end %d" % (start, end))
        result.append((start, end))
    return result


def format_intervals(intervals):
    """Writes intervals back in the form parse() reads: "1-3,5,8-10"."""
    return ",".join(str(s) if s == e else "%d-%d" % (s, e) for s, e in intervals)
''')

PY_INIT_C1 = _text('''
"""intervals: merging, measuring and parsing closed integer intervals."""

from intervals.merge import merge, total_length

__all__ = ["merge", "total_length"]
''')

PY_INIT_C2 = _text('''
"""intervals: merging, measuring and parsing closed integer intervals."""

from intervals.merge import merge, total_length
from intervals.text import format_intervals, parse

__all__ = ["format_intervals", "merge", "parse", "total_length"]
''')

PY_INIT_C3 = _text('''
"""intervals: merging, measuring and parsing closed integer intervals."""

from intervals.merge import covers, merge, total_length
from intervals.text import format_intervals, parse

__all__ = ["covers", "format_intervals", "merge", "parse", "total_length"]
''')

PY_INIT_C5 = PY_INIT_C3.replace('\n__all__', '\n__version__ = "1.1.0"\n\n__all__')

PY_TEST_MERGE_C1 = _text('''
import pytest

from intervals import merge, total_length


def test_merge_empty():
    assert merge([]) == []


def test_merge_overlapping():
    assert merge([(1, 4), (2, 6), (8, 10)]) == [(1, 6), (8, 10)]


def test_merge_unsorted():
    assert merge([(8, 10), (1, 4), (2, 3)]) == [(1, 4), (8, 10)]


def test_merge_disjoint():
    assert merge([(1, 2), (4, 5)]) == [(1, 2), (4, 5)]


def test_merge_rejects_reversed():
    with pytest.raises(ValueError):
        merge([(5, 1)])


def test_total_length():
    assert total_length([(1, 4), (2, 6), (10, 11)]) == 6
''')

PY_TEST_MERGE_C3 = PY_TEST_MERGE_C1.replace(
    "from intervals import merge, total_length", "from intervals import covers, merge, total_length") + _text('''


def test_covers():
    assert covers([(1, 3), (6, 8)], 3)
    assert not covers([(1, 3), (6, 8)], 4)
''')

PY_TEST_MERGE_C4 = PY_TEST_MERGE_C3.replace(
    "    assert merge([(8, 10), (1, 4), (2, 3)]) == [(1, 4), (8, 10)]\n",
    "    assert merge([(8, 10), (1, 4), (2, 3), (4, 7)]) == [(1, 7), (8, 10)]\n").replace(
    "\n\ndef test_merge_disjoint():", _text('''


def test_merge_touching():
    assert merge([(1, 3), (3, 5)]) == [(1, 5)]
''').rstrip("\n") + "\n\n\ndef test_merge_disjoint():")

PY_TEST_TEXT_C2 = _text('''
import pytest

from intervals import format_intervals, parse


def test_parse_basic():
    assert parse("1-3,5-7") == [(1, 3), (5, 7)]


def test_parse_spaces():
    assert parse(" 1-3 ,  5-7 ") == [(1, 3), (5, 7)]


def test_parse_single_point():
    assert parse("4") == [(4, 4)]


def test_parse_rejects_garbage():
    with pytest.raises(ValueError):
        parse("1-x")


def test_format_round_trip():
    text = "1-3,5,8-10"
    assert format_intervals(parse(text)) == text
''')

PY_TEST_TEXT_C4 = PY_TEST_TEXT_C2.replace(
    "from intervals import format_intervals, parse", "from intervals import format_intervals, merge, parse") + _text('''


def test_parse_then_merge_touching():
    assert format_intervals(merge(parse("1-3,3-5,7"))) == "1-5,7"
''')

PY_README_C1 = _text('''
# intervals

Merging and measuring closed integer intervals.

```python
>>> from intervals import merge, total_length
>>> merge([(1, 4), (2, 6), (8, 10)])
[(1, 6), (8, 10)]
>>> total_length([(1, 4), (2, 6)])
5
```

Run the tests with `python3 -m pytest`.
''')

PY_README_C2 = PY_README_C1.replace("Run the tests", _text('''
Interval lists read and write as text:

```python
>>> from intervals import parse, format_intervals
>>> parse("1-3, 5-7, 9")
[(1, 3), (5, 7), (9, 9)]
```
''') + "\nRun the tests")

PY_README_C5 = PY_README_C2 + _text('''

## Changes

* 1.1.0: intervals that share an endpoint merge (`[(1, 3), (3, 5)]` becomes `[(1, 5)]`); `covers`.
''')

PYTHON = {
    "name": "intervals",
    "runner": "pytest (python3-pytest), junit_family=xunit1",
    "junit_producer": "pytest",
    "is_test": lambda p: p.startswith("tests/"),
    "commits": [
        ("Initial import: merging closed intervals", {
            ".gitignore": "__pycache__/\n.pytest_cache/\n*.egg-info/\n",
            "README.md": PY_README_C1,
            "pyproject.toml": _text('''
[project]
name = "intervals"
version = "1.0.0"
description = "Merging and measuring closed integer intervals"
requires-python = ">=3.8"

[tool.pytest.ini_options]
testpaths = ["tests"]
'''),
            "intervals/__init__.py": PY_INIT_C1,
            "intervals/merge.py": PY_MERGE_C1,
            "tests/test_merge.py": PY_TEST_MERGE_C1,
        }),
        ("Add parse() and format_intervals() for interval lists as text", {
            "README.md": PY_README_C2,
            "intervals/__init__.py": PY_INIT_C2,
            "intervals/text.py": PY_TEXT,
            "tests/test_text.py": PY_TEST_TEXT_C2,
        }),
        ("Add covers(): whether a point lies in a set of intervals", {
            "intervals/__init__.py": PY_INIT_C3,
            "intervals/merge.py": PY_MERGE_C3,
            "tests/test_merge.py": PY_TEST_MERGE_C3,
        }),
        ("Merge intervals that share an endpoint (fixes #7)", {
            "intervals/merge.py": PY_MERGE_C4,
            "tests/test_merge.py": PY_TEST_MERGE_C4,
            "tests/test_text.py": PY_TEST_TEXT_C4,
        }),
        ("Release 1.1.0", {
            "README.md": PY_README_C5,
            "intervals/__init__.py": PY_INIT_C5,
        }),
    ],
    "bad_edit": ("intervals/text.py", "        part = part.strip()\n", ""),
    "problem_statement": _text('''
merge() keeps intervals that touch at an endpoint apart

Intervals are closed (the README says so and `covers()` treats both bounds as included), but
`merge` only joins intervals that overlap by more than a point:

```python
>>> from intervals import merge
>>> merge([(1, 3), (3, 5)])
[(1, 3), (3, 5)]
>>> merge([(8, 10), (1, 4), (2, 3), (4, 7)])
[(1, 4), (4, 7), (8, 10)]
```

Expected `[(1, 5)]` and `[(1, 7), (8, 10)]`: both intervals contain 3 (resp. 4), so they
overlap. The same shows up through the text helpers:
`format_intervals(merge(parse("1-3,3-5,7")))` gives `"1-3,3-5,7"` instead of `"1-5,7"`.
'''),
    "install": "",
    "test_command": ("PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -m pytest -rA -p no:cacheprovider "
                     "--continue-on-collection-errors -o junit_family=xunit1 -o junit_logging=no "
                     "--junitxml=\"$ENVFORGE_JUNIT_DIR/pytest.xml\" tests"),
    # pytest takes TestIds as node ids, but refuses to run anything when one does not exist (a
    # test the test patch adds): the ids asked for are matched against what pytest collects.
    "test_subset_command": ("export PYTHONDONTWRITEBYTECODE=1; /usr/bin/python3 -m pytest --collect-only -q "
                            "-p no:cacheprovider tests 2>/dev/null | grep -Fx -f \"$ENVFORGE_TESTS_FILE\" | "
                            "xargs -r -d '\\n' /usr/bin/python3 -m pytest -rA -p no:cacheprovider "
                            "-o junit_family=xunit1 -o junit_logging=no --junitxml=\"$ENVFORGE_JUNIT_DIR/pytest.xml\""),
    "FAIL_TO_PASS": [
        "tests/test_merge.py::test_merge_touching",
        "tests/test_merge.py::test_merge_unsorted",
        "tests/test_text.py::test_parse_then_merge_touching",
    ],
    "PASS_TO_PASS": [
        "tests/test_merge.py::test_covers",
        "tests/test_merge.py::test_merge_disjoint",
        "tests/test_merge.py::test_merge_empty",
        "tests/test_merge.py::test_merge_overlapping",
        "tests/test_merge.py::test_merge_rejects_reversed",
        "tests/test_merge.py::test_total_length",
        "tests/test_text.py::test_format_round_trip",
        "tests/test_text.py::test_parse_basic",
        "tests/test_text.py::test_parse_rejects_garbage",
        "tests/test_text.py::test_parse_single_point",
        "tests/test_text.py::test_parse_spaces",
    ],
    "bad_breaks": "tests/test_text.py::test_parse_spaces",
}

# ------------------------------------------------------------------------------------------
# java: Roman numerals, JUnit 5 console launcher
# ------------------------------------------------------------------------------------------

JAVA_ROMAN_C1 = _text('''
package org.envforge.roman;

/** Conversion between integers and Roman numerals (1 to 3999). */
public final class Roman {
    private static final int[] VALUES = {1000, 900, 500, 400, 100, 50, 10, 9, 5, 4, 1};
    private static final String[] SYMBOLS = {"M", "CM", "D", "CD", "C", "L", "X", "IX", "V", "IV", "I"};

    private Roman() {}

    /** Writes n (1 to 3999) as a Roman numeral in canonical form. */
    public static String toRoman(int n) {
        if (n < 1 || n > 3999) {
            throw new IllegalArgumentException("out of range: " + n);
        }
        StringBuilder out = new StringBuilder();
        int rest = n;
        for (int i = 0; i < VALUES.length; i++) {
            while (rest >= VALUES[i]) {
                out.append(SYMBOLS[i]);
                rest -= VALUES[i];
            }
        }
        return out.toString();
    }
}
''')

JAVA_FROM_ROMAN = _text('''

    /** Reads a Roman numeral, upper or lower case; throws IllegalArgumentException on bad input. */
    public static int fromRoman(String text) {
        if (text == null || text.isEmpty()) {
            throw new IllegalArgumentException("empty numeral");
        }
        int total = 0;
        int previous = 0;
        for (int i = text.length() - 1; i >= 0; i--) {
            int value = valueOf(Character.toUpperCase(text.charAt(i)));
            if (value < previous) {
                total -= value;
            } else {
                total += value;
                previous = value;
            }
        }
        return total;
    }

    private static int valueOf(char c) {
        switch (c) {
            case 'I': return 1;
            case 'V': return 5;
            case 'X': return 10;
            case 'L': return 50;
            case 'C': return 100;
            case 'D': return 500;
            case 'M': return 1000;
            default: throw new IllegalArgumentException("not a Roman digit: " + c);
        }
    }
}
''')

JAVA_ROMAN_C2 = JAVA_ROMAN_C1[:JAVA_ROMAN_C1.rstrip("\n").rfind("}")].rstrip("\n") + "\n" + JAVA_FROM_ROMAN
JAVA_ROMAN_C4 = JAVA_ROMAN_C2.replace(
    '    private static final int[] VALUES = {1000, 900, 500, 400, 100, 50, 10, 9, 5, 4, 1};\n'
    '    private static final String[] SYMBOLS = {"M", "CM", "D", "CD", "C", "L", "X", "IX", "V", "IV", "I"};\n',
    '    private static final int[] VALUES = {1000, 900, 500, 400, 100, 90, 50, 40, 10, 9, 5, 4, 1};\n'
    '    private static final String[] SYMBOLS = {\n'
    '        "M", "CM", "D", "CD", "C", "XC", "L", "XL", "X", "IX", "V", "IV", "I"\n'
    '    };\n')

JAVA_MAIN_C3 = _text('''
package org.envforge.roman;

/** Command line: converts each argument, numbers to numerals and numerals to numbers. */
public final class Main {
    private Main() {}

    public static void main(String[] args) {
        for (String arg : args) {
            if (!arg.isEmpty() && arg.chars().allMatch(Character::isDigit)) {
                System.out.println(Roman.toRoman(Integer.parseInt(arg)));
            } else {
                System.out.println(Roman.fromRoman(arg));
            }
        }
    }
}
''')

JAVA_MAIN_C5 = JAVA_MAIN_C3.replace(
    "    public static void main(String[] args) {\n",
    "    public static void main(String[] args) {\n"
    "        if (args.length == 0) {\n"
    "            System.err.println(\"usage: roman NUMBER|NUMERAL ...\");\n"
    "            System.exit(2);\n"
    "        }\n")

JAVA_TEST_C1 = _text('''
package org.envforge.roman;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

class RomanTest {
    @Test
    void toRomanSmallNumbers() {
        assertEquals("I", Roman.toRoman(1));
        assertEquals("III", Roman.toRoman(3));
        assertEquals("IV", Roman.toRoman(4));
        assertEquals("IX", Roman.toRoman(9));
    }

    @Test
    void toRomanLargeNumbers() {
        assertEquals("MCMLXXXVII", Roman.toRoman(1987));
        assertEquals("MMMDCCCLXXXVIII", Roman.toRoman(3888));
    }

    @Test
    void toRomanRejectsZero() {
        assertThrows(IllegalArgumentException.class, () -> Roman.toRoman(0));
    }

    @Test
    void toRomanRejectsTooLarge() {
        assertThrows(IllegalArgumentException.class, () -> Roman.toRoman(4000));
    }
}
''')

JAVA_TEST_C4 = JAVA_TEST_C1.replace(
    '        assertEquals("MMMDCCCLXXXVIII", Roman.toRoman(3888));\n',
    '        assertEquals("MMMDCCCLXXXVIII", Roman.toRoman(3888));\n'
    '        assertEquals("MCMXCIV", Roman.toRoman(1994));\n').replace(
    "    @Test\n    void toRomanRejectsZero() {",
    _text('''
    @Test
    void toRomanFortiesAndNineties() {
        assertEquals("XL", Roman.toRoman(40));
        assertEquals("XLIX", Roman.toRoman(49));
        assertEquals("XC", Roman.toRoman(90));
        assertEquals("XCIV", Roman.toRoman(94));
    }
''') + "\n    @Test\n    void toRomanRejectsZero() {")

JAVA_PARSE_TEST_C2 = _text('''
package org.envforge.roman;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

class RomanParseTest {
    @Test
    void fromRomanBasic() {
        assertEquals(1987, Roman.fromRoman("MCMLXXXVII"));
    }

    @Test
    void fromRomanSubtractive() {
        assertEquals(44, Roman.fromRoman("XLIV"));
        assertEquals(3999, Roman.fromRoman("MMMCMXCIX"));
    }

    @Test
    void fromRomanLowerCase() {
        assertEquals(14, Roman.fromRoman("xiv"));
    }

    @Test
    void fromRomanRejectsBadDigits() {
        assertThrows(IllegalArgumentException.class, () -> Roman.fromRoman("XIZ"));
    }
}
''')

JAVA_README_C1 = _text('''
# roman

Roman numerals for Java: `Roman.toRoman(1987)` is `"MCMLXXXVII"`.

Build and test with the JUnit 5 console launcher:

```sh
javac -d build -cp junit-jupiter-api.jar $(find src -name '*.java')
java -jar junit-platform-console-standalone.jar -cp build --scan-classpath
```
''')

JAVA_README_C2 = JAVA_README_C1.replace(
    '`Roman.toRoman(1987)` is `"MCMLXXXVII"`.',
    '`Roman.toRoman(1987)` is `"MCMLXXXVII"`,\n`Roman.fromRoman("XLIV")` is `44`.')
JAVA_README_C3 = JAVA_README_C2 + _text('''

From the command line: `java -cp build org.envforge.roman.Main 1987 XLIV`.
''')
JAVA_README_C5 = JAVA_README_C3 + _text('''

## Changes

* 40, 90 and their multiples are written XL and XC (`toRoman(1994)` is `MCMXCIV`).
* `Main` prints a usage line when called without arguments.
''')

JAVA_CP = ("/usr/share/java/junit-jupiter-api.jar:/usr/share/java/apiguardian-api.jar:"
           "/usr/share/java/opentest4j.jar:/usr/share/java/junit-platform-commons.jar")

JAVA = {
    "name": "roman",
    "runner": "JUnit 5 console launcher 1.9 (junit5) over javac 17 (default-jdk-headless), legacy XML",
    "junit_producer": "surefire",
    "is_test": lambda p: p.startswith("src/test/"),
    "commits": [
        ("Initial import: integers to Roman numerals", {
            ".gitignore": "build/\ntarget/\n*.class\n",
            "README.md": JAVA_README_C1,
            "src/main/java/org/envforge/roman/Roman.java": JAVA_ROMAN_C1,
            "src/test/java/org/envforge/roman/RomanTest.java": JAVA_TEST_C1,
        }),
        ("Add Roman.fromRoman", {
            "README.md": JAVA_README_C2,
            "src/main/java/org/envforge/roman/Roman.java": JAVA_ROMAN_C2,
            "src/test/java/org/envforge/roman/RomanParseTest.java": JAVA_PARSE_TEST_C2,
        }),
        ("Add a command-line entry point", {
            "README.md": JAVA_README_C3,
            "src/main/java/org/envforge/roman/Main.java": JAVA_MAIN_C3,
        }),
        ("toRoman: write 40 and 90 as XL and XC (fixes #3)", {
            "src/main/java/org/envforge/roman/Roman.java": JAVA_ROMAN_C4,
            "src/test/java/org/envforge/roman/RomanTest.java": JAVA_TEST_C4,
        }),
        ("Main: usage line without arguments; changelog", {
            "README.md": JAVA_README_C5,
            "src/main/java/org/envforge/roman/Main.java": JAVA_MAIN_C5,
        }),
    ],
    "bad_edit": ("src/main/java/org/envforge/roman/Roman.java",
                 "        if (n < 1 || n > 3999) {\n", "        if (n < 0 || n > 3999) {\n"),
    "problem_statement": _text('''
toRoman writes 40 as XXXX and 90 as LXXXX

Numbers with 40-49 or 90-99 in them come out in the additive form instead of the canonical
subtractive one:

```java
Roman.toRoman(40);    // "XXXX", expected "XL"
Roman.toRoman(94);    // "LXXXXIV", expected "XCIV"
Roman.toRoman(1994);  // "MCMLXXXXIV", expected "MCMXCIV"
```

400 and 900 are fine (CD, CM) and so are 4 and 9 (IV, IX); only XL and XC are never used.
`fromRoman` reads both forms, so round trips hide the problem, but the output is not what
anyone expects to see on a clock face or a copyright line.
'''),
    "install": "",
    # Both JVMs short-lived: the client compiler alone and the serial collector (a run's CPU time
    # 3.4-4.0 s -> 2.2 s here).
    "test_command": ('out="${TMPDIR:-/tmp}/classes" && rm -rf "$out" && mkdir -p "$out" && '
                     'javac -J-XX:TieredStopAtLevel=1 -J-XX:+UseSerialGC -nowarn -encoding UTF-8 -d "$out" '
                     '-cp ' + JAVA_CP + ' $(find src -name "*.java" | sort) && '
                     'java -XX:-UsePerfData -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Djava.io.tmpdir="${TMPDIR:-/tmp}" '
                     '-jar /usr/share/java/junit-platform-console-standalone.jar --disable-banner '
                     '--details=tree --disable-ansi-colors -cp "$out" --scan-classpath "$out" '
                     '--include-engine=junit-jupiter '
                     '--reports-dir "$ENVFORGE_JUNIT_DIR"'),
    "FAIL_TO_PASS": [],   # filled in below (ids depend on the launcher's report)
    "PASS_TO_PASS": [],
    "bad_breaks": None,
}

# ------------------------------------------------------------------------------------------
# javascript: arithmetic expression evaluator, mocha
# ------------------------------------------------------------------------------------------

JS_TOKENIZER = _text('''
'use strict';

const OPERATORS = new Set(['+', '-', '*', '/']);

/**
 * Splits an arithmetic expression into tokens:
 * { type: 'number', value: 3.5 }, { type: 'op', value: '+' }, { type: 'paren', value: '(' }.
 */
function tokenize(text) {
  const tokens = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (/\\s/.test(c)) {
      i += 1;
    } else if (/[0-9.]/.test(c)) {
      let j = i;
      while (j < text.length && /[0-9.]/.test(text[j])) j += 1;
      const literal = text.slice(i, j);
      if (!/^(\\d+\\.?\\d*|\\.\\d+)$/.test(literal)) {
        throw new SyntaxError(`bad number '${literal}' at ${i}`);
      }
      tokens.push({ type: 'number', value: Number(literal) });
      i = j;
    } else if (OPERATORS.has(c)) {
      tokens.push({ type: 'op', value: c });
      i += 1;
    } else if (c === '(' || c === ')') {
      tokens.push({ type: 'paren', value: c });
      i += 1;
    } else {
      throw new SyntaxError(`unexpected character '${c}' at ${i}`);
    }
  }
  return tokens;
}

module.exports = { tokenize, OPERATORS };
''')

JS_EVALUATE_C2 = _text('''
'use strict';

const { tokenize } = require('./tokenizer');

const PRECEDENCE = { '+': 1, '-': 1, '*': 2, '/': 2 };

const APPLY = {
  '+': (a, b) => a + b,
  '-': (a, b) => a - b,
  '*': (a, b) => a * b,
  '/': (a, b) => a / b,
};

/** Converts infix tokens to reverse Polish notation (shunting-yard). */
function toRpn(tokens) {
  const output = [];
  const stack = [];
  for (const token of tokens) {
    if (token.type === 'number') {
      output.push(token);
    } else if (token.type === 'op') {
      while (stack.length > 0) {
        const top = stack[stack.length - 1];
        if (top.type !== 'op' || PRECEDENCE[top.value] <= PRECEDENCE[token.value]) break;
        output.push(stack.pop());
      }
      stack.push(token);
    } else if (token.value === '(') {
      stack.push(token);
    } else {
      while (stack.length > 0 && stack[stack.length - 1].value !== '(') output.push(stack.pop());
      if (stack.length === 0) throw new SyntaxError('unbalanced parenthesis');
      stack.pop();
    }
  }
  while (stack.length > 0) {
    const token = stack.pop();
    if (token.type === 'paren') throw new SyntaxError('unbalanced parenthesis');
    output.push(token);
  }
  return output;
}

/** Evaluates an arithmetic expression with + - * / and parentheses. */
function evaluate(text) {
  const values = [];
  for (const token of toRpn(tokenize(text))) {
    if (token.type === 'number') {
      values.push(token.value);
    } else {
      if (values.length < 2) throw new SyntaxError(`missing operand for '${token.value}'`);
      const right = values.pop();
      const left = values.pop();
      values.push(APPLY[token.value](left, right));
    }
  }
  if (values.length !== 1) throw new SyntaxError('malformed expression');
  return values[0];
}

module.exports = { evaluate, toRpn };
''')

JS_EVALUATE_C4 = JS_EVALUATE_C2.replace(
    "        if (top.type !== 'op' || PRECEDENCE[top.value] <= PRECEDENCE[token.value]) break;\n",
    "        // Every operator is left-associative: pop those of equal precedence too.\n"
    "        if (top.type !== 'op' || PRECEDENCE[top.value] < PRECEDENCE[token.value]) break;\n")

JS_TEST_TOKENIZER = _text('''
'use strict';

const assert = require('assert');
const { tokenize } = require('../lib/tokenizer');

describe('tokenize', function () {
  it('splits numbers and operators', function () {
    assert.deepStrictEqual(tokenize('1+22*3'), [
      { type: 'number', value: 1 },
      { type: 'op', value: '+' },
      { type: 'number', value: 22 },
      { type: 'op', value: '*' },
      { type: 'number', value: 3 },
    ]);
  });

  it('ignores spaces and tabs', function () {
    assert.deepStrictEqual(tokenize(' 4\\t-  5 ').map((t) => t.value), [4, '-', 5]);
  });

  it('reads decimal numbers', function () {
    assert.deepStrictEqual(tokenize('3.25 + .5').map((t) => t.value), [3.25, '+', 0.5]);
  });

  it('rejects unknown characters', function () {
    assert.throws(() => tokenize('2 $ 3'), SyntaxError);
  });
});
''')

JS_TEST_EVALUATE_C2 = _text('''
'use strict';

const assert = require('assert');
const { evaluate } = require('../lib/evaluate');

describe('evaluate', function () {
  it('applies operator precedence', function () {
    assert.strictEqual(evaluate('2 + 3 * 4'), 14);
    assert.strictEqual(evaluate('2 * 3 + 4'), 10);
  });

  it('honours parentheses', function () {
    assert.strictEqual(evaluate('(2 + 3) * 4'), 20);
  });

  it('evaluates a lone number', function () {
    assert.strictEqual(evaluate('42'), 42);
  });

  it('rejects unbalanced parentheses', function () {
    assert.throws(() => evaluate('(1 + 2'), SyntaxError);
    assert.throws(() => evaluate('1 + 2)'), SyntaxError);
  });
});
''')

JS_TEST_EVALUATE_C4 = JS_TEST_EVALUATE_C2.replace("\n  it('evaluates a lone number'", _text('''

  it('subtracts from left to right', function () {
    assert.strictEqual(evaluate('8 - 3 - 2'), 3);
    assert.strictEqual(evaluate('10 - 4 + 1'), 7);
  });

  it('divides from left to right', function () {
    assert.strictEqual(evaluate('100 / 10 / 5'), 2);
  });
''').rstrip("\n") + "\n\n  it('evaluates a lone number'")

JS_PACKAGE_C1 = _text('''
{
  "name": "exprcalc",
  "version": "1.0.0",
  "description": "A small arithmetic expression evaluator",
  "license": "MIT",
  "scripts": {
    "test": "mocha 'test/**/*.test.js'"
  }
}
''')
JS_PACKAGE_C3 = JS_PACKAGE_C1.replace('  "license": "MIT",\n', '  "license": "MIT",\n  "main": "lib/index.js",\n')
JS_PACKAGE_C5 = JS_PACKAGE_C3.replace('"version": "1.0.0"', '"version": "1.0.1"')

JS_README_C1 = _text('''
# exprcalc

Tokenizes arithmetic expressions (`lib/tokenizer.js`). Tests: `mocha 'test/**/*.test.js'`.
''')
JS_README_C2 = JS_README_C1.replace(
    "(`lib/tokenizer.js`).", "(`lib/tokenizer.js`) and evaluates them\n(`lib/evaluate.js`, shunting-yard).")
JS_README_C3 = JS_README_C2 + _text('''

```js
const { evaluate } = require('exprcalc');
evaluate('(2 + 3) * 4'); // 20
```
''')
JS_README_C5 = JS_README_C3 + _text('''

## 1.0.1

* Operators of equal precedence apply from left to right (`8 - 3 - 2` is 3).
''')

JS_INDEX = _text('''
'use strict';

const { tokenize } = require('./tokenizer');
const { evaluate, toRpn } = require('./evaluate');

module.exports = { tokenize, evaluate, toRpn };
''')

JAVASCRIPT = {
    "name": "exprcalc",
    "runner": "mocha 10.1 (Debian mocha), built-in xunit reporter",
    "junit_producer": "generic",
    "is_test": lambda p: p.startswith("test/"),
    "commits": [
        ("Initial import: expression tokenizer", {
            ".gitignore": "node_modules/\n",
            "README.md": JS_README_C1,
            "package.json": JS_PACKAGE_C1,
            "lib/tokenizer.js": JS_TOKENIZER,
            "test/tokenizer.test.js": JS_TEST_TOKENIZER,
        }),
        ("Add evaluate(): shunting-yard over the tokens", {
            "README.md": JS_README_C2,
            "lib/evaluate.js": JS_EVALUATE_C2,
            "test/evaluate.test.js": JS_TEST_EVALUATE_C2,
        }),
        ("Add lib/index.js as the package entry point", {
            "README.md": JS_README_C3,
            "package.json": JS_PACKAGE_C3,
            "lib/index.js": JS_INDEX,
        }),
        ("evaluate: make operators left-associative (fixes #12)", {
            "lib/evaluate.js": JS_EVALUATE_C4,
            "test/evaluate.test.js": JS_TEST_EVALUATE_C4,
        }),
        ("Release 1.0.1", {
            "README.md": JS_README_C5,
            "package.json": JS_PACKAGE_C5,
        }),
    ],
    "bad_edit": ("lib/tokenizer.js", "    if (/\\s/.test(c)) {\n", "    if (c === ' ') {\n"),
    "problem_statement": _text('''
evaluate() gets chains of - and / wrong

Operators of the same precedence are applied right to left:

```js
const { evaluate } = require('exprcalc');
evaluate('8 - 3 - 2');     // 7, expected 3
evaluate('10 - 4 + 1');    // 5, expected 7
evaluate('100 / 10 / 5');  // 50, expected 2
```

It looks like `8 - 3 - 2` is computed as `8 - (3 - 2)`. Mixed precedence
(`2 + 3 * 4` = 14) and parentheses work. Subtraction and division should be
left-associative like in every calculator.
'''),
    "install": "",
    "test_command": NODE_PATH_PREFIX + " " + MOCHA_XUNIT + " 'test/**/*.test.js'",
    # TestIds are "describe::title"; mocha's --grep matches the full title "describe title".
    "test_subset_command": (NODE_PATH_PREFIX + " " + MOCHA_XUNIT + " 'test/**/*.test.js' --grep "
                            + ids_regex("-e 's/::/ /'")),
    "FAIL_TO_PASS": [
        "evaluate::divides from left to right",
        "evaluate::subtracts from left to right",
    ],
    "PASS_TO_PASS": [
        "evaluate::applies operator precedence",
        "evaluate::evaluates a lone number",
        "evaluate::honours parentheses",
        "evaluate::rejects unbalanced parentheses",
        "tokenize::ignores spaces and tabs",
        "tokenize::reads decimal numbers",
        "tokenize::rejects unknown characters",
        "tokenize::splits numbers and operators",
    ],
    "bad_breaks": "tokenize::ignores spaces and tabs",
}

# ------------------------------------------------------------------------------------------
# typescript: CSV line and table parser, tsc + mocha
# ------------------------------------------------------------------------------------------

TS_CSV_C1 = _text('''
/** Splits one CSV line into fields (RFC 4180 quoting; no embedded newlines). */
export function parseLine(line: string, delimiter: string = ","): string[] {
  if (delimiter.length !== 1 || delimiter === '"') {
    throw new Error(`bad delimiter ${JSON.stringify(delimiter)}`);
  }
  const fields: string[] = [];
  let field = "";
  let quoted = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quoted) {
      if (c === '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c === '"') {
      quoted = true;
    } else if (c === delimiter) {
      fields.push(field);
      field = "";
    } else {
      field += c;
    }
  }
  if (quoted) {
    throw new Error("unterminated quoted field");
  }
  fields.push(field);
  return fields;
}
''')

TS_CSV_C4 = TS_CSV_C1.replace(
    "      if (c === '\"') {\n        quoted = false;\n      } else {\n",
    "      if (c === '\"' && line[i + 1] === '\"') {\n"
    "        field += '\"';  // a doubled quote inside quotes stands for one quote\n"
    "        i++;\n"
    "      } else if (c === '\"') {\n"
    "        quoted = false;\n"
    "      } else {\n")

TS_FORMAT = _text('''

/** Writes fields as one CSV line, quoting the fields that need it. */
export function formatLine(fields: string[], delimiter: string = ","): string {
  return fields
    .map((f) => (f.includes('"') || f.includes(delimiter) || /[\\r\\n]/.test(f) ? `"${f.replace(/"/g, '""')}"` : f))
    .join(delimiter);
}
''')
TS_CSV_C5 = TS_CSV_C4 + TS_FORMAT

TS_TABLE = _text('''
import { parseLine } from "./csv";

export type Row = Record<string, string>;

/** Reads CSV text whose first line is a header into one object per row; blank lines are skipped. */
export function parseTable(text: string, delimiter: string = ","): Row[] {
  const lines = text.split(/\\r?\\n/).filter((line) => line.trim() !== "");
  if (lines.length === 0) {
    return [];
  }
  const header = parseLine(lines[0], delimiter);
  return lines.slice(1).map((line, index) => {
    const cells = parseLine(line, delimiter);
    if (cells.length !== header.length) {
      throw new Error(`row ${index + 1} has ${cells.length} fields, the header ${header.length}`);
    }
    const row: Row = {};
    header.forEach((name, column) => {
      row[name] = cells[column];
    });
    return row;
  });
}
''')

TS_INDEX = _text('''
export * from "./csv";
export * from "./table";
''')

TS_GLOBALS = _text('''
// What the tests use from mocha and node's assert, declared here: no @types packages offline.
declare function describe(title: string, body: () => void): void;
declare function it(title: string, body: () => void): void;

declare module "assert" {
  export function strictEqual(actual: unknown, expected: unknown, message?: string): void;
  export function deepStrictEqual(actual: unknown, expected: unknown, message?: string): void;
  export function throws(block: () => unknown, error?: unknown, message?: string): void;
}
''')

TS_TEST_CSV_C1 = _text('''
import * as assert from "assert";
import { parseLine } from "../src/csv";

describe("parseLine", () => {
  it("splits plain fields", () => {
    assert.deepStrictEqual(parseLine("a,b,c"), ["a", "b", "c"]);
  });

  it("keeps empty fields", () => {
    assert.deepStrictEqual(parseLine(",x,,"), ["", "x", "", ""]);
  });

  it("keeps delimiters inside quotes", () => {
    assert.deepStrictEqual(parseLine('"a,b",c'), ["a,b", "c"]);
  });

  it("supports another delimiter", () => {
    assert.deepStrictEqual(parseLine("a;b,c", ";"), ["a", "b,c"]);
  });

  it("rejects an unterminated quote", () => {
    assert.throws(() => parseLine('"abc'));
  });
});
''')

TS_TEST_CSV_C4 = TS_TEST_CSV_C1.replace('\n  it("supports another delimiter"', _text('''

  it("unescapes doubled quotes", () => {
    assert.deepStrictEqual(parseLine('"say ""hi""",x'), ['say "hi"', "x"]);
    assert.deepStrictEqual(parseLine('""""'), ['"']);
  });
''').rstrip("\n") + '\n\n  it("supports another delimiter"')

TS_TEST_TABLE_C2 = _text('''
import * as assert from "assert";
import { parseTable } from "../src/table";

describe("parseTable", () => {
  it("maps rows to header names", () => {
    assert.deepStrictEqual(parseTable("name,qty\\napple,3\\npear,5"), [
      { name: "apple", qty: "3" },
      { name: "pear", qty: "5" },
    ]);
  });

  it("skips blank lines", () => {
    assert.deepStrictEqual(parseTable("a,b\\r\\n\\r\\n1,2\\n"), [{ a: "1", b: "2" }]);
  });

  it("rejects a row with too many fields", () => {
    assert.throws(() => parseTable("a,b\\n1,2,3"));
  });
});
''')

TS_TEST_TABLE_C4 = TS_TEST_TABLE_C2.replace('\n  it("rejects a row with too many fields"', _text('''

  it("keeps quotes in quoted cells", () => {
    assert.deepStrictEqual(parseTable('title,year\\n"The ""Best"" Film",1999'), [
      { title: 'The "Best" Film', year: "1999" },
    ]);
  });
''').rstrip("\n") + '\n\n  it("rejects a row with too many fields"')

TS_TSCONFIG = _text('''
{
  "compilerOptions": {
    "target": "ES2019",
    "lib": ["ES2019"],
    "module": "commonjs",
    "skipLibCheck": true,
    "strict": true,
    "rootDir": ".",
    "outDir": "dist",
    "types": [],
    "newLine": "lf"
  },
  "include": ["src/**/*.ts", "test/**/*.ts"]
}
''')

TS_PACKAGE_C1 = _text('''
{
  "name": "tiny-csv",
  "version": "0.1.0",
  "description": "CSV lines and tables for TypeScript",
  "license": "MIT",
  "scripts": {
    "build": "tsc -p tsconfig.json",
    "test": "tsc -p tsconfig.json && mocha 'dist/test/**/*.test.js'"
  }
}
''')
TS_PACKAGE_C3 = TS_PACKAGE_C1.replace('  "license": "MIT",\n', '  "license": "MIT",\n  "main": "dist/src/index.js",\n')
TS_PACKAGE_C5 = TS_PACKAGE_C3.replace('"version": "0.1.0"', '"version": "0.2.0"')

TS_README_C1 = _text('''
# tiny-csv

`parseLine('a,"b,c"')` is `["a", "b,c"]`. Build with `tsc`, test with mocha on `dist/test`.
''')
TS_README_C2 = TS_README_C1 + _text('''

`parseTable(text)` maps every row after the header to an object keyed by the header's names.
''')
TS_README_C3 = TS_README_C2 + _text('''

Everything is exported from `src/index.ts`.
''')
TS_README_C5 = TS_README_C3 + _text('''

## 0.2.0

* Doubled quotes inside quoted fields read as one quote (`"say ""hi"""` is `say "hi"`).
* `formatLine(fields)` writes a line back.
''')

TYPESCRIPT = {
    "name": "tiny-csv",
    "runner": "tsc 4.8 (node-typescript) into $TMPDIR, then mocha 10.1 (Debian mocha) xunit reporter",
    "junit_producer": "generic",
    "is_test": lambda p: p.startswith("test/"),
    "commits": [
        ("Initial import: CSV line parser", {
            ".gitignore": "dist/\nnode_modules/\n",
            "README.md": TS_README_C1,
            "package.json": TS_PACKAGE_C1,
            "tsconfig.json": TS_TSCONFIG,
            "src/csv.ts": TS_CSV_C1,
            "test/globals.d.ts": TS_GLOBALS,
            "test/csv.test.ts": TS_TEST_CSV_C1,
        }),
        ("Add parseTable(): rows keyed by the header", {
            "README.md": TS_README_C2,
            "src/table.ts": TS_TABLE,
            "test/table.test.ts": TS_TEST_TABLE_C2,
        }),
        ("Add src/index.ts as the package entry point", {
            "README.md": TS_README_C3,
            "package.json": TS_PACKAGE_C3,
            "src/index.ts": TS_INDEX,
        }),
        ("parseLine: read doubled quotes inside quoted fields (fixes #5)", {
            "src/csv.ts": TS_CSV_C4,
            "test/csv.test.ts": TS_TEST_CSV_C4,
            "test/table.test.ts": TS_TEST_TABLE_C4,
        }),
        ("Add formatLine(); release 0.2.0", {
            "README.md": TS_README_C5,
            "package.json": TS_PACKAGE_C5,
            "src/csv.ts": TS_CSV_C5,
        }),
    ],
    "bad_edit": ("src/csv.ts", "    } else if (c === delimiter) {\n      fields.push(field);\n",
                 "    } else if (c === delimiter) {\n      if (field !== \"\") fields.push(field);\n"),
    "problem_statement": _text('''
Doubled quotes inside a quoted field are dropped

RFC 4180 escapes a quote inside a quoted field by doubling it, but `parseLine` loses the quotes:

```ts
parseLine('"say ""hi""",x');   // ["say hi", "x"], expected ['say "hi"', "x"]
parseLine('""""');             // [""], expected ['"']
```

Tables exported from spreadsheets hit this all the time, e.g. a title cell
`"The ""Best"" Film"` comes out of `parseTable` as `The Best Film`.
'''),
    "install": "",
    "test_command": ('out="${TMPDIR:-/tmp}/tsc-out" && rm -rf "$out" && tsc -p tsconfig.json --outDir "$out" && '
                     + NODE_PATH_PREFIX + " " + MOCHA_XUNIT + ' "$out/test/*.test.js"'),
    # As JavaScript's: mocha's --grep over the full titles.
    "test_subset_command": ('out="${TMPDIR:-/tmp}/tsc-out" && rm -rf "$out" && tsc -p tsconfig.json --outDir "$out" && '
                            + NODE_PATH_PREFIX + " " + MOCHA_XUNIT + ' "$out/test/*.test.js" --grep '
                            + ids_regex("-e 's/::/ /'")),
    "FAIL_TO_PASS": [
        "parseLine::unescapes doubled quotes",
        "parseTable::keeps quotes in quoted cells",
    ],
    "PASS_TO_PASS": [
        "parseLine::keeps delimiters inside quotes",
        "parseLine::keeps empty fields",
        "parseLine::rejects an unterminated quote",
        "parseLine::splits plain fields",
        "parseLine::supports another delimiter",
        "parseTable::maps rows to header names",
        "parseTable::rejects a row with too many fields",
        "parseTable::skips blank lines",
    ],
    "bad_breaks": "parseLine::keeps empty fields",
}

# ------------------------------------------------------------------------------------------
# c: path normalisation, CMake + CTest
# ------------------------------------------------------------------------------------------

C_HEADER_C1 = _text('''
#ifndef PATHUTIL_H
#define PATHUTIL_H

#include <stddef.h>

/* Writes the normal form of path into out (size bytes, NUL included): empty and "."
   components dropped, ".." resolved against the component before it (kept at the start of a
   relative path, dropped at the root of an absolute one). Returns 0, or -1 when out is too
   small. */
int path_normalize(const char *path, char *out, size_t size);

#endif
''')
C_HEADER_C2 = C_HEADER_C1.replace("\n#endif", _text('''

/* Writes left/right into out; right alone when it is absolute or left is empty. Returns 0, or
   -1 when out is too small. */
int path_join(const char *left, const char *right, char *out, size_t size);
''').rstrip("\n") + "\n\n#endif")
C_HEADER_C3 = C_HEADER_C2.replace("\n#endif", _text('''

/* 1 when path starts at the root, 0 otherwise. */
int path_is_absolute(const char *path);
''').rstrip("\n") + "\n\n#endif")
C_HEADER_C5 = C_HEADER_C3.replace("\n#endif", _text('''

/* The last component of path, without trailing slashes: writes it into out (size bytes).
   Returns 0, or -1 when out is too small. */
int path_basename(const char *path, char *out, size_t size);
''').rstrip("\n") + "\n\n#endif")

C_PATH_C1 = _text('''
#include "pathutil.h"

#include <string.h>

/* Appends len bytes of text to out, which holds *used bytes; -1 when they do not fit. */
static int append(char *out, size_t size, size_t *used, const char *text, size_t len) {
  if (*used + len + 1 > size) return -1;
  memcpy(out + *used, text, len);
  *used += len;
  out[*used] = '\\0';
  return 0;
}

int path_normalize(const char *path, char *out, size_t size) {
  int absolute = path[0] == '/';
  size_t root = absolute ? 1 : 0; /* bytes of out that ".." never removes */
  size_t used = 0;
  size_t depth = 0; /* components in out that a ".." may remove */
  const char *p = path;
  if (size == 0) return -1;
  out[0] = '\\0';
  if (absolute && append(out, size, &used, "/", 1) != 0) return -1;
  while (*p) {
    const char *end;
    size_t len;
    while (*p == '/') p++;
    if (!*p) break;
    end = strchr(p, '/');
    len = end ? (size_t)(end - p) : strlen(p);
    if (len == 1 && p[0] == '.') {
      /* the current directory: nothing to add */
    } else if (len == 2 && p[0] == '.' && p[1] == '.') {
      if (depth > 0) {
        while (used > root && out[used - 1] != '/') used--;
        if (used > root) used--; /* the separator before the removed component */
        out[used] = '\\0';
        depth--;
      } else if (!absolute) {
        if (used > 0 && append(out, size, &used, "/", 1) != 0) return -1;
        if (append(out, size, &used, "..", 2) != 0) return -1;
      }
    } else {
      if (used > root && append(out, size, &used, "/", 1) != 0) return -1;
      if (append(out, size, &used, p, len) != 0) return -1;
      depth++;
    }
    p += len;
  }
  return 0;
}
''')

C_JOIN = _text('''

int path_join(const char *left, const char *right, char *out, size_t size) {
  size_t used = 0;
  size_t left_len = strlen(left);
  if (size == 0) return -1;
  out[0] = '\\0';
  if (right[0] == '/' || left_len == 0) return append(out, size, &used, right, strlen(right));
  if (append(out, size, &used, left, left_len) != 0) return -1;
  if (left[left_len - 1] != '/' && append(out, size, &used, "/", 1) != 0) return -1;
  return append(out, size, &used, right, strlen(right));
}
''')
C_IS_ABSOLUTE = _text('''

int path_is_absolute(const char *path) { return path[0] == '/'; }
''')
C_BASENAME = _text('''

int path_basename(const char *path, char *out, size_t size) {
  size_t end = strlen(path);
  size_t start;
  size_t used = 0;
  if (size == 0) return -1;
  out[0] = '\\0';
  while (end > 1 && path[end - 1] == '/') end--;
  start = end;
  while (start > 0 && path[start - 1] != '/') start--;
  if (start == end && end > 0) start = end - 1; /* the root "/" */
  return append(out, size, &used, path + start, end - start);
}
''')

C_PATH_C2 = C_PATH_C1 + C_JOIN
C_PATH_C3 = C_PATH_C2 + C_IS_ABSOLUTE
C_PATH_C4 = C_PATH_C3.replace("    p += len;\n  }\n  return 0;\n}\n",
                              "    p += len;\n  }\n"
                              "  /* Everything cancelled out: the current directory, not an empty path. */\n"
                              "  if (used == 0 && append(out, size, &used, \".\", 1) != 0) return -1;\n"
                              "  return 0;\n}\n")
C_PATH_C5 = C_PATH_C4 + C_BASENAME

C_TEST_HEAD = _text('''
/* Test cases of pathutil. One CTest test per case: `test_path CASE` runs CASE and exits 0
   when it passes, 1 when it fails (the differences on stderr), 2 for an unknown case. */
#include <stdio.h>
#include <string.h>

#include "pathutil.h"

static int failures;

static void expect_str(const char *what, const char *got, const char *want) {
  if (strcmp(got, want) != 0) {
    fprintf(stderr, "%s: got \\"%s\\", want \\"%s\\"\\n", what, got, want);
    failures++;
  }
}

static void check_normalize(const char *in, const char *want) {
  char out[256];
  if (path_normalize(in, out, sizeof out) != 0) {
    fprintf(stderr, "path_normalize(\\"%s\\") failed\\n", in);
    failures++;
    return;
  }
  expect_str(in, out, want);
}
''')

C_TEST_JOIN_HELPER = _text('''

static void check_join(const char *left, const char *right, const char *want) {
  char out[256];
  if (path_join(left, right, out, sizeof out) != 0) {
    fprintf(stderr, "path_join(\\"%s\\", \\"%s\\") failed\\n", left, right);
    failures++;
    return;
  }
  expect_str(right, out, want);
}
''')

C_TEST_CASES_C1 = _text('''

static void normalize_plain(void) { check_normalize("a/b/c", "a/b/c"); }
static void normalize_dot(void) { check_normalize("a/./b/.", "a/b"); }
static void normalize_dotdot(void) {
  check_normalize("a/b/../c", "a/c");
  check_normalize("../a/../../b", "../../b");
}
static void normalize_double_slash(void) { check_normalize("a//b///c/", "a/b/c"); }
static void normalize_absolute(void) {
  check_normalize("/a/../../b", "/b");
  check_normalize("/..", "/");
}
''')
C_TEST_CASES_JOIN = _text('''
static void join_basic(void) { check_join("a", "b", "a/b"); }
static void join_trailing_slash(void) { check_join("a/", "b", "a/b"); }
static void join_absolute_right(void) { check_join("a", "/b", "/b"); }
''')
C_TEST_CASES_ABS = _text('''
static void is_absolute(void) {
  if (!path_is_absolute("/x") || path_is_absolute("x") || path_is_absolute("")) {
    fprintf(stderr, "path_is_absolute is wrong\\n");
    failures++;
  }
}
''')
C_TEST_CASES_FIX = _text('''
static void normalize_to_dot(void) {
  check_normalize("a/..", ".");
  check_normalize("a/b/../..", ".");
  check_normalize("./.", ".");
}
static void normalize_empty(void) { check_normalize("", "."); }
''')
C_TEST_CASES_BASENAME = _text('''
static void basename_cases(void) {
  char out[64];
  const char *cases[][2] = {{"a/b/c", "c"}, {"a/b/", "b"}, {"c", "c"}, {"/", "/"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (path_basename(cases[i][0], out, sizeof out) != 0) {
      fprintf(stderr, "path_basename(\\"%s\\") failed\\n", cases[i][0]);
      failures++;
      continue;
    }
    expect_str(cases[i][0], out, cases[i][1]);
  }
}
''')

C_TEST_MAIN = _text('''

int main(int argc, char **argv) {
  size_t i;
  if (argc != 2) {
    fprintf(stderr, "usage: test_path CASE\\n");
    return 2;
  }
  for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (strcmp(argv[1], cases[i].name) == 0) {
      cases[i].run();
      if (failures > 0) return 1;
      printf("%s: ok\\n", argv[1]);
      return 0;
    }
  }
  fprintf(stderr, "unknown test case %s\\n", argv[1]);
  return 2;
}
''')


def _c_test_file(case_blocks, names):
    table = ["", "struct test_case {", "  const char *name;", "  void (*run)(void);", "};", "",
             "static const struct test_case cases[] = {"]
    for name in names:
        fn = "basename_cases" if name == "basename" else name
        table.append('    {"%s", %s},' % (name, fn))
    table.append("};")
    return C_TEST_HEAD + "".join(case_blocks) + "\n".join(table) + "\n" + C_TEST_MAIN


C_NAMES_C1 = ["normalize_plain", "normalize_dot", "normalize_dotdot", "normalize_double_slash",
              "normalize_absolute"]
C_NAMES_C2 = C_NAMES_C1 + ["join_basic", "join_trailing_slash", "join_absolute_right"]
C_NAMES_C3 = C_NAMES_C2 + ["is_absolute"]
C_NAMES_C4 = C_NAMES_C3 + ["normalize_to_dot", "normalize_empty"]
C_NAMES_C5 = C_NAMES_C4 + ["basename"]

C_TEST_C1 = _c_test_file([C_TEST_CASES_C1], C_NAMES_C1)
C_TEST_C2 = _c_test_file([C_TEST_JOIN_HELPER, C_TEST_CASES_C1, C_TEST_CASES_JOIN], C_NAMES_C2)
C_TEST_C3 = _c_test_file([C_TEST_JOIN_HELPER, C_TEST_CASES_C1, C_TEST_CASES_JOIN, C_TEST_CASES_ABS], C_NAMES_C3)
C_TEST_C4 = _c_test_file([C_TEST_JOIN_HELPER, C_TEST_CASES_C1, C_TEST_CASES_JOIN, C_TEST_CASES_ABS,
                          C_TEST_CASES_FIX], C_NAMES_C4)
C_TEST_C5 = _c_test_file([C_TEST_JOIN_HELPER, C_TEST_CASES_C1, C_TEST_CASES_JOIN, C_TEST_CASES_ABS,
                          C_TEST_CASES_FIX, C_TEST_CASES_BASENAME], C_NAMES_C5)


def _c_tests_cmake(names):
    return _text('''
add_executable(test_path test_path.c)
target_link_libraries(test_path PRIVATE pathutil)

# One CTest test per case of test_path.c.
foreach(name
''') + "".join("    %s\n" % n for n in names) + _text('''
    )
  add_test(NAME path.${name} COMMAND test_path ${name})
endforeach()
''')


C_CMAKE = _text('''
cmake_minimum_required(VERSION 3.13)
project(pathutil VERSION 1.0 LANGUAGES C)

set(CMAKE_C_STANDARD 99)
set(CMAKE_C_STANDARD_REQUIRED ON)

add_library(pathutil src/path.c)
target_include_directories(pathutil PUBLIC include)

enable_testing()
add_subdirectory(tests)
''')

C_README_C1 = _text('''
# pathutil

Lexical path manipulation in C99: `path_normalize("a/./b/../c")` gives `"a/c"`.

```sh
cmake -S . -B build && cmake --build build && ctest --test-dir build
```
''')
C_README_C2 = C_README_C1.replace('gives `"a/c"`.', 'gives `"a/c"`,\n`path_join("a", "b")` gives `"a/b"`.')
C_README_C5 = C_README_C2 + _text('''

## Changes

* `path_normalize` returns `"."` for paths that cancel out (`"a/.."`) and for `""`.
* `path_basename`.
''')

C_LANG = {
    "name": "pathutil",
    "runner": "CMake 3.25 + CTest --output-junit (one CTest test per test case), gcc 12",
    "junit_producer": "ctest",
    "is_test": lambda p: p.startswith("tests/"),
    "commits": [
        ("Initial import: path_normalize", {
            ".gitignore": "build/\n",
            "README.md": C_README_C1,
            "CMakeLists.txt": C_CMAKE,
            "include/pathutil.h": C_HEADER_C1,
            "src/path.c": C_PATH_C1,
            "tests/CMakeLists.txt": _c_tests_cmake(C_NAMES_C1),
            "tests/test_path.c": C_TEST_C1,
        }),
        ("Add path_join", {
            "README.md": C_README_C2,
            "include/pathutil.h": C_HEADER_C2,
            "src/path.c": C_PATH_C2,
            "tests/CMakeLists.txt": _c_tests_cmake(C_NAMES_C2),
            "tests/test_path.c": C_TEST_C2,
        }),
        ("Add path_is_absolute", {
            "include/pathutil.h": C_HEADER_C3,
            "src/path.c": C_PATH_C3,
            "tests/CMakeLists.txt": _c_tests_cmake(C_NAMES_C3),
            "tests/test_path.c": C_TEST_C3,
        }),
        ("path_normalize: \".\" instead of an empty path (fixes #9)", {
            "src/path.c": C_PATH_C4,
            "tests/CMakeLists.txt": _c_tests_cmake(C_NAMES_C4),
            "tests/test_path.c": C_TEST_C4,
        }),
        ("Add path_basename", {
            "README.md": C_README_C5,
            "include/pathutil.h": C_HEADER_C5,
            "src/path.c": C_PATH_C5,
            "tests/CMakeLists.txt": _c_tests_cmake(C_NAMES_C5),
            "tests/test_path.c": C_TEST_C5,
        }),
    ],
    "bad_edit": ("src/path.c",
                 "  if (left[left_len - 1] != '/' && append(out, size, &used, \"/\", 1) != 0) return -1;\n",
                 "  if (append(out, size, &used, \"/\", 1) != 0) return -1;\n"),
    "problem_statement": _text('''
path_normalize returns an empty string when everything cancels out

When the components of a relative path cancel each other, `path_normalize` writes an empty
string:

```c
char out[64];
path_normalize("a/..", out, sizeof out);       /* out is "", expected "." */
path_normalize("a/b/../..", out, sizeof out);  /* "", expected "." */
path_normalize("", out, sizeof out);           /* "", expected "." */
```

An empty path is not a valid path (`open("")` fails with ENOENT, `chdir("")` too), while the
result should name the current directory. Absolute paths are fine (`"/a/.."` gives `"/"`).
'''),
    "install": "",
    "test_command": ('b="${TMPDIR:-/tmp}/cmake-build" && cmake -S . -B "$b" -DCMAKE_BUILD_TYPE=Debug >/dev/null && '
                     'cmake --build "$b" && ctest --test-dir "$b" --output-on-failure '
                     '--output-junit "$ENVFORGE_JUNIT_DIR/ctest.xml"'),
    # TestIds are ctest's test names: -R selects them.
    "test_subset_command": ('b="${TMPDIR:-/tmp}/cmake-build" && cmake -S . -B "$b" -DCMAKE_BUILD_TYPE=Debug >/dev/null && '
                            'cmake --build "$b" && ctest --test-dir "$b" --output-on-failure '
                            '--output-junit "$ENVFORGE_JUNIT_DIR/ctest.xml" -R ' + ids_regex()),
    "FAIL_TO_PASS": ["path.normalize_empty", "path.normalize_to_dot"],
    "PASS_TO_PASS": sorted("path." + n for n in C_NAMES_C3),
    "bad_breaks": "path.join_trailing_slash",
}

# ------------------------------------------------------------------------------------------
# cpp: semantic versions, GoogleTest through make
# ------------------------------------------------------------------------------------------

CPP_VERSION_H_C1 = _text('''
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace semver {

struct Version {
  int major = 0;
  int minor = 0;
  int patch = 0;
  std::vector<std::string> prerelease;  // the dot-separated identifiers after '-'
};

// Parses "MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]" (SemVer 2.0.0); build metadata is dropped.
std::optional<Version> Parse(std::string_view text);

// Negative, zero or positive like strcmp, by SemVer 2.0.0 precedence.
int Compare(const Version& a, const Version& b);

inline bool operator<(const Version& a, const Version& b) { return Compare(a, b) < 0; }
inline bool operator==(const Version& a, const Version& b) { return Compare(a, b) == 0; }

}  // namespace semver
''')
CPP_VERSION_H_C3 = CPP_VERSION_H_C1.replace(
    "\ninline bool operator<",
    "\n// \"1.2.3-rc.1\": the canonical text of v (no build metadata).\n"
    "std::string ToString(const Version& v);\n\ninline bool operator<")

CPP_VERSION_CC_C1 = _text('''
#include "semver/version.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace semver {
namespace {

bool ParseNumber(std::string_view text, int& out) {
  if (text.empty() || (text.size() > 1 && text[0] == '0')) return false;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
  return error == std::errc() && end == text.data() + text.size();
}

bool ValidIdentifier(std::string_view id) {
  if (id.empty()) return false;
  bool numeric = true;
  for (char c : id) {
    unsigned char u = static_cast<unsigned char>(c);
    if (!std::isalnum(u) && c != '-') return false;
    if (!std::isdigit(u)) numeric = false;
  }
  return !(numeric && id.size() > 1 && id[0] == '0');  // no leading zeros in numbers
}

std::vector<std::string_view> Split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t at = text.find(separator, start);
    if (at == std::string_view::npos) {
      parts.push_back(text.substr(start));
      return parts;
    }
    parts.push_back(text.substr(start, at - start));
    start = at + 1;
  }
}

int CompareIdentifiers(const std::string& a, const std::string& b) { return a.compare(b); }

}  // namespace

std::optional<Version> Parse(std::string_view text) {
  if (size_t plus = text.find('+'); plus != std::string_view::npos) text = text.substr(0, plus);
  std::string_view core = text;
  std::string_view pre;
  bool has_pre = false;
  if (size_t dash = text.find('-'); dash != std::string_view::npos) {
    core = text.substr(0, dash);
    pre = text.substr(dash + 1);
    has_pre = true;
  }
  std::vector<std::string_view> numbers = Split(core, '.');
  if (numbers.size() != 3) return std::nullopt;
  Version v;
  if (!ParseNumber(numbers[0], v.major) || !ParseNumber(numbers[1], v.minor) ||
      !ParseNumber(numbers[2], v.patch)) {
    return std::nullopt;
  }
  if (has_pre) {
    for (std::string_view id : Split(pre, '.')) {
      if (!ValidIdentifier(id)) return std::nullopt;
      v.prerelease.emplace_back(id);
    }
  }
  return v;
}

int Compare(const Version& a, const Version& b) {
  if (a.major != b.major) return a.major < b.major ? -1 : 1;
  if (a.minor != b.minor) return a.minor < b.minor ? -1 : 1;
  if (a.patch != b.patch) return a.patch < b.patch ? -1 : 1;
  // A version without pre-release identifiers ranks above one with them.
  if (a.prerelease.empty() || b.prerelease.empty()) {
    return static_cast<int>(a.prerelease.empty()) - static_cast<int>(b.prerelease.empty());
  }
  size_t n = std::min(a.prerelease.size(), b.prerelease.size());
  for (size_t i = 0; i < n; ++i) {
    int c = CompareIdentifiers(a.prerelease[i], b.prerelease[i]);
    if (c != 0) return c < 0 ? -1 : 1;
  }
  if (a.prerelease.size() == b.prerelease.size()) return 0;
  return a.prerelease.size() < b.prerelease.size() ? -1 : 1;
}

}  // namespace semver
''')

CPP_TO_STRING = _text('''

std::string ToString(const Version& v) {
  std::string out = std::to_string(v.major) + "." + std::to_string(v.minor) + "." + std::to_string(v.patch);
  for (size_t i = 0; i < v.prerelease.size(); ++i) {
    out += i == 0 ? "-" : ".";
    out += v.prerelease[i];
  }
  return out;
}
''')

CPP_VERSION_CC_C3 = CPP_VERSION_CC_C1.replace("\n}  // namespace semver\n",
                                              CPP_TO_STRING + "\n}  // namespace semver\n")
CPP_VERSION_CC_C4 = CPP_VERSION_CC_C3.replace(
    "int CompareIdentifiers(const std::string& a, const std::string& b) { return a.compare(b); }\n",
    _text('''
bool IsNumeric(const std::string& id) {
  return !id.empty() && std::all_of(id.begin(), id.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

// SemVer 2.0.0, 11.4: numeric identifiers compare as numbers and rank below alphanumeric ones.
int CompareIdentifiers(const std::string& a, const std::string& b) {
  bool a_numeric = IsNumeric(a);
  bool b_numeric = IsNumeric(b);
  if (a_numeric && b_numeric) {
    // No leading zeros (Parse refuses them): the longer number is the larger.
    if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
    return a.compare(b);
  }
  if (a_numeric != b_numeric) return a_numeric ? -1 : 1;
  return a.compare(b);
}
'''))

CPP_RANGE_H = _text('''
#pragma once

#include <string_view>

#include "semver/version.h"

namespace semver {

// Whether v satisfies every space-separated comparator of constraint: ">=1.2.3", ">1.2.3",
// "<=1.2.3", "<1.2.3", "=1.2.3" or "1.2.3", and "^1.2.3" (at least 1.2.3 with the same major
// version). A malformed or empty constraint is satisfied by nothing.
bool Satisfies(const Version& v, std::string_view constraint);

}  // namespace semver
''')

CPP_RANGE_CC = _text('''
#include "semver/range.h"

#include <optional>

namespace semver {
namespace {

bool SatisfiesOne(const Version& v, std::string_view comparator) {
  std::string_view op;
  for (std::string_view candidate : {">=", "<=", ">", "<", "=", "^"}) {
    if (comparator.substr(0, candidate.size()) == candidate) {
      op = candidate;
      break;
    }
  }
  std::optional<Version> bound = Parse(comparator.substr(op.size()));
  if (!bound) return false;
  int c = Compare(v, *bound);
  if (op == ">=") return c >= 0;
  if (op == "<=") return c <= 0;
  if (op == ">") return c > 0;
  if (op == "<") return c < 0;
  if (op == "^") return c >= 0 && v.major == bound->major;
  return c == 0;
}

}  // namespace

bool Satisfies(const Version& v, std::string_view constraint) {
  bool any = false;
  size_t start = 0;
  while (start < constraint.size()) {
    size_t end = constraint.find(' ', start);
    if (end == std::string_view::npos) end = constraint.size();
    if (end > start) {
      if (!SatisfiesOne(v, constraint.substr(start, end - start))) return false;
      any = true;
    }
    start = end + 1;
  }
  return any;
}

}  // namespace semver
''')

CPP_TEST_PRELUDE = _text('''
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "semver/%s.h"

using semver::Compare;
using semver::Parse;
using semver::Version;

namespace {

Version V(const char* text) {
  std::optional<Version> v = Parse(text);
  EXPECT_TRUE(v.has_value()) << text;
  return v.value_or(Version{});
}

}  // namespace
''')

CPP_VERSION_TEST_C1 = (CPP_TEST_PRELUDE % "version") + _text('''

TEST(Parse, Basic) {
  std::optional<Version> v = Parse("1.22.333");
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->major, 1);
  EXPECT_EQ(v->minor, 22);
  EXPECT_EQ(v->patch, 333);
  EXPECT_TRUE(v->prerelease.empty());
}

TEST(Parse, PrereleaseAndBuild) {
  std::optional<Version> v = Parse("2.0.0-rc.1+build.5");
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->prerelease, (std::vector<std::string>{"rc", "1"}));
}

TEST(Parse, RejectsGarbage) {
  for (const char* bad : {"", "1.2", "1.2.3.4", "1.02.3", "a.b.c", "1.2.3-", "1.2.3-01", "1.2.3-a..b"}) {
    EXPECT_FALSE(Parse(bad).has_value()) << bad;
  }
}

TEST(Compare, MajorMinorPatch) {
  EXPECT_LT(Compare(V("1.2.3"), V("1.2.4")), 0);
  EXPECT_LT(Compare(V("1.2.9"), V("1.10.0")), 0);
  EXPECT_GT(Compare(V("2.0.0"), V("1.99.99")), 0);
  EXPECT_EQ(Compare(V("1.2.3+a"), V("1.2.3+b")), 0);
}

TEST(Compare, ReleaseAfterPrerelease) {
  EXPECT_LT(Compare(V("1.0.0-rc.1"), V("1.0.0")), 0);
  EXPECT_LT(Compare(V("1.0.0-alpha"), V("1.0.0-alpha.1")), 0);
  EXPECT_LT(Compare(V("1.0.0-alpha"), V("1.0.0-beta")), 0);
}
''')
CPP_VERSION_TEST_C3 = CPP_VERSION_TEST_C1 + _text('''

TEST(Format, RoundTrip) {
  for (const char* text : {"0.0.1", "1.2.3", "10.20.30-alpha.1", "1.0.0-x-y.7"}) {
    EXPECT_EQ(semver::ToString(V(text)), text);
  }
}
''')
CPP_VERSION_TEST_C4 = CPP_VERSION_TEST_C3.replace("\nTEST(Format, RoundTrip)", _text('''
TEST(Compare, NumericPrereleaseIdentifiers) {
  EXPECT_LT(Compare(V("1.0.0-alpha.9"), V("1.0.0-alpha.10")), 0);
  EXPECT_LT(Compare(V("1.0.0-2"), V("1.0.0-11")), 0);
  EXPECT_GT(Compare(V("1.0.0-rc.100"), V("1.0.0-rc.99")), 0);
}
''') + "\nTEST(Format, RoundTrip)")

CPP_RANGE_TEST_C2 = (CPP_TEST_PRELUDE % "range") + _text('''

using semver::Satisfies;

TEST(Range, Comparators) {
  EXPECT_TRUE(Satisfies(V("1.2.3"), ">=1.2.3"));
  EXPECT_FALSE(Satisfies(V("1.2.3"), ">1.2.3"));
  EXPECT_TRUE(Satisfies(V("1.2.3"), "<2.0.0"));
  EXPECT_TRUE(Satisfies(V("1.2.3"), "=1.2.3"));
  EXPECT_TRUE(Satisfies(V("1.2.3"), "1.2.3"));
}

TEST(Range, Conjunction) {
  EXPECT_TRUE(Satisfies(V("1.5.0"), ">=1.0.0 <2.0.0"));
  EXPECT_FALSE(Satisfies(V("2.0.0"), ">=1.0.0 <2.0.0"));
}

TEST(Range, Caret) {
  EXPECT_TRUE(Satisfies(V("1.9.0"), "^1.2.3"));
  EXPECT_FALSE(Satisfies(V("2.0.0"), "^1.2.3"));
  EXPECT_FALSE(Satisfies(V("1.2.2"), "^1.2.3"));
}

TEST(Range, MalformedMatchesNothing) {
  EXPECT_FALSE(Satisfies(V("1.0.0"), ">=1.0"));
  EXPECT_FALSE(Satisfies(V("1.0.0"), ""));
}
''')
CPP_RANGE_TEST_C4 = CPP_RANGE_TEST_C2 + _text('''

TEST(Range, PrereleaseOrdering) {
  EXPECT_TRUE(Satisfies(V("1.0.0-rc.10"), ">=1.0.0-rc.9"));
  EXPECT_FALSE(Satisfies(V("1.0.0-rc.10"), "<1.0.0-rc.9"));
}
''')

CPP_MAKEFILE_C1 = (
    "# Builds the library with its GoogleTest suite (Debian: g++, make, libgtest-dev).\n"
    "#   make -j4 test                  build and run the tests\n"
    "#   make BUILD=/tmp/b test GTEST_FLAGS=--gtest_output=xml:/tmp/r.xml\n"
    "CXXFLAGS ?= -std=c++17 -O0 -Wall -Wextra\n"
    "BUILD ?= build\n"
    "\n"
    "SRCS := $(sort $(wildcard src/*.cc))\n"
    "TESTS := $(sort $(wildcard tests/*_test.cc))\n"
    "HEADERS := $(sort $(wildcard include/semver/*.h))\n"
    "OBJS := $(patsubst %.cc,$(BUILD)/%.o,$(SRCS) $(TESTS))\n"
    "\n"
    ".PHONY: all test\n"
    "\n"
    "all: $(BUILD)/unit_tests\n"
    "\n"
    "$(BUILD)/%.o: %.cc $(HEADERS)\n"
    "\t@mkdir -p $(dir $@)\n"
    "\t$(CXX) $(CXXFLAGS) -Iinclude -c $< -o $@\n"
    "\n"
    "$(BUILD)/unit_tests: $(OBJS)\n"
    "\t$(CXX) $(CXXFLAGS) $(OBJS) -o $@ -lgtest_main -lgtest -pthread\n"
    "\n"
    "test: $(BUILD)/unit_tests\n"
    "\t$(BUILD)/unit_tests $(GTEST_FLAGS)\n"
)
CPP_MAKEFILE_C5 = CPP_MAKEFILE_C1.replace(".PHONY: all test\n", ".PHONY: all test clean\n") + \
    "\nclean:\n\trm -rf $(BUILD)\n"

CPP_README_C1 = _text('''
# semver-cpp

Semantic Versioning 2.0.0 for C++17: `semver::Parse("1.2.3-rc.1")`, `semver::Compare(a, b)`.
Tests use GoogleTest: `make -j4 test`.
''')
CPP_README_C2 = CPP_README_C1.replace(
    "Tests use", "Ranges: `semver::Satisfies(v, \">=1.0.0 <2.0.0\")`, `\"^1.2.3\"`.\n\nTests use")
CPP_README_C5 = CPP_README_C2 + _text('''

## Changes

* Numeric pre-release identifiers compare as numbers (`1.0.0-alpha.9` < `1.0.0-alpha.10`).
* `make clean`.
''')

CPP = {
    "name": "semver-cpp",
    "runner": "GoogleTest 1.12 (libgtest-dev) built by make with g++ 12, --gtest_output=xml",
    "junit_producer": "gtest",
    "is_test": lambda p: p.startswith("tests/"),
    "commits": [
        ("Initial import: parse and compare semantic versions", {
            ".gitignore": "build/\n",
            "README.md": CPP_README_C1,
            "Makefile": CPP_MAKEFILE_C1,
            "include/semver/version.h": CPP_VERSION_H_C1,
            "src/version.cc": CPP_VERSION_CC_C1,
            "tests/version_test.cc": CPP_VERSION_TEST_C1,
        }),
        ("Add version ranges: Satisfies()", {
            "README.md": CPP_README_C2,
            "include/semver/range.h": CPP_RANGE_H,
            "src/range.cc": CPP_RANGE_CC,
            "tests/range_test.cc": CPP_RANGE_TEST_C2,
        }),
        ("Add ToString()", {
            "include/semver/version.h": CPP_VERSION_H_C3,
            "src/version.cc": CPP_VERSION_CC_C3,
            "tests/version_test.cc": CPP_VERSION_TEST_C3,
        }),
        ("Compare numeric pre-release identifiers as numbers (fixes #21)", {
            "src/version.cc": CPP_VERSION_CC_C4,
            "tests/version_test.cc": CPP_VERSION_TEST_C4,
            "tests/range_test.cc": CPP_RANGE_TEST_C4,
        }),
        ("Makefile: clean target; changelog", {
            "README.md": CPP_README_C5,
            "Makefile": CPP_MAKEFILE_C5,
        }),
    ],
    "bad_edit": ("src/version.cc",
                 "    return static_cast<int>(a.prerelease.empty()) - static_cast<int>(b.prerelease.empty());\n",
                 "    return static_cast<int>(b.prerelease.empty()) - static_cast<int>(a.prerelease.empty());\n"),
    "problem_statement": _text('''
1.0.0-alpha.10 sorts before 1.0.0-alpha.9

Pre-release identifiers made of digits are compared as text, so release candidates past 9 sort
wrongly:

```cpp
semver::Compare(*semver::Parse("1.0.0-alpha.9"), *semver::Parse("1.0.0-alpha.10"));  // > 0
semver::Satisfies(*semver::Parse("1.0.0-rc.10"), ">=1.0.0-rc.9");                   // false
```

SemVer 2.0.0 (rule 11.4.1) says identifiers consisting of only digits are compared
numerically, so alpha.9 < alpha.10 and rc.10 satisfies >=rc.9. We noticed because our
nightly build picked rc.9 over rc.10 as the newest candidate.
'''),
    "install": "",
    "test_command": ('make -s -j4 BUILD="${TMPDIR:-/tmp}/gtest-build" test '
                     'GTEST_FLAGS="--gtest_output=xml:$ENVFORGE_JUNIT_DIR/gtest.xml"'),
    # TestIds are Suite.Name, gtest's own filter syntax (joined with ':').
    "test_subset_command": ('make -s -j4 BUILD="${TMPDIR:-/tmp}/gtest-build" test '
                            'GTEST_FLAGS="--gtest_output=xml:$ENVFORGE_JUNIT_DIR/gtest.xml '
                            '--gtest_filter=$(paste -sd: "$ENVFORGE_TESTS_FILE")"'),
    "FAIL_TO_PASS": ["Compare.NumericPrereleaseIdentifiers", "Range.PrereleaseOrdering"],
    "PASS_TO_PASS": [
        "Compare.MajorMinorPatch",
        "Compare.ReleaseAfterPrerelease",
        "Format.RoundTrip",
        "Parse.Basic",
        "Parse.PrereleaseAndBuild",
        "Parse.RejectsGarbage",
        "Range.Caret",
        "Range.Comparators",
        "Range.Conjunction",
        "Range.MalformedMatchesNothing",
    ],
    "bad_breaks": "Compare.ReleaseAfterPrerelease",
}

# ------------------------------------------------------------------------------------------
# go: LRU cache, gotestsum
# ------------------------------------------------------------------------------------------

GO_LRU_C1 = _text('''
// Package lru is a fixed-capacity cache that evicts the least recently used entry.
package lru

import (
	"container/list"
	"fmt"
)

// Cache holds at most its capacity of entries; adding one more evicts the least recently used.
// Create caches with New.
type Cache[K comparable, V any] struct {
	capacity int
	order    *list.List // front: most recently used; elements hold *entry[K, V]
	items    map[K]*list.Element
}

type entry[K comparable, V any] struct {
	key   K
	value V
}

// New returns an empty cache of the given capacity; it panics when capacity < 1.
func New[K comparable, V any](capacity int) *Cache[K, V] {
	if capacity < 1 {
		panic(fmt.Sprintf("lru: capacity %d < 1", capacity))
	}
	return &Cache[K, V]{capacity: capacity, order: list.New(), items: make(map[K]*list.Element)}
}

// Get returns the value stored under key and marks it as the most recently used.
func (c *Cache[K, V]) Get(key K) (V, bool) {
	if el, ok := c.items[key]; ok {
		c.order.MoveToFront(el)
		return el.Value.(*entry[K, V]).value, true
	}
	var zero V
	return zero, false
}

// Put stores value under key as the most recently used entry; when the cache is full it first
// evicts the least recently used entry.
func (c *Cache[K, V]) Put(key K, value V) {
	if el, ok := c.items[key]; ok {
		el.Value.(*entry[K, V]).value = value
		return
	}
	if c.order.Len() >= c.capacity {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.items, oldest.Value.(*entry[K, V]).key)
	}
	c.items[key] = c.order.PushFront(&entry[K, V]{key: key, value: value})
}

// Len is the number of entries held.
func (c *Cache[K, V]) Len() int { return c.order.Len() }
''')

GO_KEYS_REMOVE = _text('''

// Keys lists the keys from the most to the least recently used.
func (c *Cache[K, V]) Keys() []K {
	keys := make([]K, 0, c.order.Len())
	for el := c.order.Front(); el != nil; el = el.Next() {
		keys = append(keys, el.Value.(*entry[K, V]).key)
	}
	return keys
}

// Remove deletes key and reports whether it was present.
func (c *Cache[K, V]) Remove(key K) bool {
	el, ok := c.items[key]
	if !ok {
		return false
	}
	c.order.Remove(el)
	delete(c.items, key)
	return true
}
''')
GO_PEEK = _text('''

// Peek returns the value stored under key without changing how recently it was used.
func (c *Cache[K, V]) Peek(key K) (V, bool) {
	if el, ok := c.items[key]; ok {
		return el.Value.(*entry[K, V]).value, true
	}
	var zero V
	return zero, false
}
''')
GO_CLEAR = _text('''

// Clear removes every entry.
func (c *Cache[K, V]) Clear() {
	c.order.Init()
	c.items = make(map[K]*list.Element)
}
''')
GO_LRU_C2 = GO_LRU_C1 + GO_KEYS_REMOVE
GO_LRU_C3 = GO_LRU_C2 + GO_PEEK
GO_LRU_C4 = GO_LRU_C3.replace(
    "\t\tel.Value.(*entry[K, V]).value = value\n\t\treturn\n",
    "\t\tel.Value.(*entry[K, V]).value = value\n\t\tc.order.MoveToFront(el)\n\t\treturn\n")
GO_LRU_C5 = GO_LRU_C4 + GO_CLEAR

GO_TEST_C1 = _text('''
package lru

import "testing"

func TestGetMissing(t *testing.T) {
	c := New[string, int](2)
	if _, ok := c.Get("x"); ok {
		t.Fatal("Get on an empty cache found a value")
	}
}

func TestPutGet(t *testing.T) {
	c := New[string, int](2)
	c.Put("a", 1)
	c.Put("b", 2)
	if v, ok := c.Get("a"); !ok || v != 1 {
		t.Fatalf("Get(a) = %d, %v; want 1, true", v, ok)
	}
}

func TestEvictsLeastRecentlyUsed(t *testing.T) {
	c := New[string, int](2)
	c.Put("a", 1)
	c.Put("b", 2)
	c.Get("a") // b is now the least recently used
	c.Put("c", 3)
	if _, ok := c.Get("b"); ok {
		t.Error("b survived; it was the least recently used")
	}
	for _, k := range []string{"a", "c"} {
		if _, ok := c.Get(k); !ok {
			t.Errorf("%s was evicted", k)
		}
	}
}

func TestLen(t *testing.T) {
	c := New[int, string](3)
	for i := 0; i < 5; i++ {
		c.Put(i, "v")
	}
	if c.Len() != 3 {
		t.Fatalf("Len() = %d, want 3", c.Len())
	}
}

func TestNewPanics(t *testing.T) {
	for _, tc := range []struct {
		name     string
		capacity int
	}{{"zero", 0}, {"negative", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("New(%d) did not panic", tc.capacity)
				}
			}()
			New[string, int](tc.capacity)
		})
	}
}
''')

GO_TEST_KEYS_REMOVE = _text('''

func TestKeysOrder(t *testing.T) {
	c := New[string, int](3)
	c.Put("a", 1)
	c.Put("b", 2)
	c.Put("c", 3)
	c.Get("a")
	if got, want := fmt.Sprint(c.Keys()), "[a c b]"; got != want {
		t.Fatalf("Keys() = %s, want %s", got, want)
	}
}

func TestRemove(t *testing.T) {
	c := New[string, int](2)
	c.Put("a", 1)
	if !c.Remove("a") || c.Remove("a") {
		t.Fatal("Remove should report true once, then false")
	}
	if c.Len() != 0 {
		t.Fatalf("Len() = %d after Remove, want 0", c.Len())
	}
	if _, ok := c.Get("a"); ok {
		t.Fatal("a is still present after Remove")
	}
}
''')
GO_TEST_PEEK = _text('''

func TestPeekDoesNotRefresh(t *testing.T) {
	c := New[string, int](2)
	c.Put("a", 1)
	c.Put("b", 2)
	if v, ok := c.Peek("a"); !ok || v != 1 {
		t.Fatalf("Peek(a) = %d, %v; want 1, true", v, ok)
	}
	c.Put("c", 3) // a is still the least recently used
	if _, ok := c.Peek("a"); ok {
		t.Error("a survived; Peek must not refresh it")
	}
}
''')
GO_TEST_FIX = _text('''

func TestPutExistingRefreshesRecency(t *testing.T) {
	c := New[string, int](2)
	c.Put("a", 1)
	c.Put("b", 2)
	c.Put("a", 10) // a is now the most recently used
	c.Put("c", 3)  // evicts b
	if v, ok := c.Get("a"); !ok || v != 10 {
		t.Fatalf("Get(a) = %d, %v; want 10, true", v, ok)
	}
	if _, ok := c.Get("b"); ok {
		t.Error("b survived; it was the least recently used")
	}
}
''')
GO_TEST_CLEAR = _text('''

func TestClear(t *testing.T) {
	c := New[string, int](2)
	c.Put("a", 1)
	c.Clear()
	if c.Len() != 0 || len(c.Keys()) != 0 {
		t.Fatalf("after Clear: Len() = %d, Keys() = %v", c.Len(), c.Keys())
	}
	c.Put("b", 2)
	if v, ok := c.Get("b"); !ok || v != 2 {
		t.Fatalf("Get(b) = %d, %v after Clear and Put; want 2, true", v, ok)
	}
}
''')
GO_TEST_C2 = GO_TEST_C1.replace('import "testing"', 'import (\n\t"fmt"\n\t"testing"\n)') + GO_TEST_KEYS_REMOVE
GO_TEST_C3 = GO_TEST_C2 + GO_TEST_PEEK
GO_TEST_C4 = GO_TEST_C3.replace(
    '\tc.Get("a")\n\tif got, want := fmt.Sprint(c.Keys()), "[a c b]"; got != want {\n',
    '\tc.Get("a")\n\tc.Put("b", 20)\n\tif got, want := fmt.Sprint(c.Keys()), "[b a c]"; got != want {\n') + GO_TEST_FIX
GO_TEST_C5 = GO_TEST_C4 + GO_TEST_CLEAR

GO_README_C1 = _text('''
# lru

A generic least-recently-used cache for Go 1.19+:

```go
c := lru.New[string, int](128)
c.Put("a", 1)
v, ok := c.Get("a")
```

Tests: `go test ./...`.
''')
GO_README_C5 = GO_README_C1 + _text('''

## Changes

* `Put` on an existing key makes it the most recently used entry.
* `Clear`.
''')

GO = {
    "name": "lru",
    "runner": "gotestsum 1.8 (gotestsum) over go test, Go 1.19 (golang-go), --junitfile",
    "junit_producer": "go",
    "is_test": lambda p: p.endswith("_test.go") or "/testdata/" in p or p.startswith("testdata/"),
    "commits": [
        ("Initial import: LRU cache", {
            "README.md": GO_README_C1,
            "go.mod": "module envforge.dev/fixtures/lru\n\ngo 1.19\n",
            "lru.go": GO_LRU_C1,
            "lru_test.go": GO_TEST_C1,
        }),
        ("Add Keys and Remove", {
            "lru.go": GO_LRU_C2,
            "lru_test.go": GO_TEST_C2,
        }),
        ("Add Peek", {
            "lru.go": GO_LRU_C3,
            "lru_test.go": GO_TEST_C3,
        }),
        ("Put: an updated entry becomes the most recently used (fixes #4)", {
            "lru.go": GO_LRU_C4,
            "lru_test.go": GO_TEST_C4,
        }),
        ("Add Clear", {
            "README.md": GO_README_C5,
            "lru.go": GO_LRU_C5,
            "lru_test.go": GO_TEST_C5,
        }),
    ],
    "bad_edit": ("lru.go", "\tc.order.Remove(el)\n\tdelete(c.items, key)\n\treturn true\n",
                 "\tc.order.Remove(el)\n\treturn true\n"),
    "problem_statement": _text('''
Put on an existing key does not refresh it, so hot keys get evicted

Updating a key with `Put` changes its value but leaves it where it was in the recency order, so
a key that is written often is evicted as if it had not been used:

```go
c := lru.New[string, int](2)
c.Put("a", 1)
c.Put("b", 2)
c.Put("a", 10) // a was just used
c.Put("c", 3)
_, ok := c.Get("a") // ok == false: a was evicted, b survived
```

Expected `a` (value 10) to survive and `b` to be evicted; `Keys()` after `Put("a", 10)` should
list `a` first. `Get` already refreshes an entry; `Put` should too.
'''),
    "install": "",
    # -vet=off: go test's vet pass analyses every imported standard package again in each fresh
    # $HOME's build cache (2.2 s of a 3 s run here); the tests themselves are what grading needs.
    "test_command": ('GOPROXY=off GOTOOLCHAIN=local GOFLAGS=-mod=readonly '
                     'gotestsum --junitfile "$ENVFORGE_JUNIT_DIR/go.xml" --format standard-verbose -- -vet=off ./...'),
    # TestIds are package::TestName[/subtest]: -run selects the top-level tests (a subtest runs
    # with its parent's others; the answer is restricted to the ids asked for).
    "test_subset_command": ('GOPROXY=off GOTOOLCHAIN=local GOFLAGS=-mod=readonly '
                            'gotestsum --junitfile "$ENVFORGE_JUNIT_DIR/go.xml" --format standard-verbose -- -vet=off '
                            '-run "^($(sed \'s/.*:://; s/\\/.*//\' "$ENVFORGE_TESTS_FILE" | sort -u | paste -sd\'|\'))\\$" ./...'),
    "FAIL_TO_PASS": [
        "envforge.dev/fixtures/lru::TestKeysOrder",
        "envforge.dev/fixtures/lru::TestPutExistingRefreshesRecency",
    ],
    "PASS_TO_PASS": [
        "envforge.dev/fixtures/lru::TestEvictsLeastRecentlyUsed",
        "envforge.dev/fixtures/lru::TestGetMissing",
        "envforge.dev/fixtures/lru::TestLen",
        "envforge.dev/fixtures/lru::TestNewPanics",
        "envforge.dev/fixtures/lru::TestNewPanics/negative",
        "envforge.dev/fixtures/lru::TestNewPanics/zero",
        "envforge.dev/fixtures/lru::TestPeekDoesNotRefresh",
        "envforge.dev/fixtures/lru::TestPutGet",
        "envforge.dev/fixtures/lru::TestRemove",
    ],
    "bad_breaks": "envforge.dev/fixtures/lru::TestRemove",
}

# ------------------------------------------------------------------------------------------
# php: slugs and plurals, PHPUnit 9
# ------------------------------------------------------------------------------------------

PHP_SLUGGER_C1 = _text('''
<?php

declare(strict_types=1);

namespace Envforge\\Text;

/**
 * Turns titles into URL slugs: "Hello World" -> "hello-world".
 */
final class Slugger
{
    private const TRANSLITERATIONS = [
        'à' => 'a', 'á' => 'a', 'â' => 'a', 'ä' => 'a', 'å' => 'a', 'ç' => 'c',
        'è' => 'e', 'é' => 'e', 'ê' => 'e', 'ë' => 'e', 'ì' => 'i', 'í' => 'i',
        'î' => 'i', 'ï' => 'i', 'ñ' => 'n', 'ò' => 'o', 'ó' => 'o', 'ô' => 'o',
        'ö' => 'o', 'ø' => 'o', 'ù' => 'u', 'ú' => 'u', 'û' => 'u', 'ü' => 'u',
        'ý' => 'y', 'ß' => 'ss', 'æ' => 'ae', 'œ' => 'oe',
    ];

    private string $separator;

    public function __construct(string $separator = '-')
    {
        $this->separator = $separator;
    }

    public function slugify(string $text): string
    {
        $text = strtr(mb_strtolower($text, 'UTF-8'), self::TRANSLITERATIONS);

        return preg_replace('/[^a-z0-9]/', $this->separator, $text);
    }
}
''')
PHP_WITH_SEPARATOR = _text('''

    /** A slugger like this one that joins words with $separator. */
    public function withSeparator(string $separator): self
    {
        return new self($separator);
    }
''')
PHP_SLUGGER_C3 = PHP_SLUGGER_C1.replace(
    "        $this->separator = $separator;\n    }\n",
    "        $this->separator = $separator;\n    }\n" + PHP_WITH_SEPARATOR)
PHP_SLUGGER_C4 = PHP_SLUGGER_C3.replace(
    "        return preg_replace('/[^a-z0-9]/', $this->separator, $text);\n",
    "        // A run of anything else becomes one separator; none at either end.\n"
    "        $slug = preg_replace('/[^a-z0-9]+/', $this->separator, $text);\n"
    "\n"
    "        return trim($slug, $this->separator);\n")

PHP_INFLECTOR = _text('''
<?php

declare(strict_types=1);

namespace Envforge\\Text;

/**
 * English plurals for the nouns of a user interface ("1 file", "2 files").
 */
final class Inflector
{
    private const IRREGULAR = ['person' => 'people', 'child' => 'children', 'mouse' => 'mice'];

    public static function pluralize(string $word): string
    {
        $lower = strtolower($word);
        if (isset(self::IRREGULAR[$lower])) {
            return self::IRREGULAR[$lower];
        }
        if (preg_match('/(s|x|z|ch|sh)$/', $lower) === 1) {
            return $word . 'es';
        }
        if (preg_match('/[^aeiou]y$/', $lower) === 1) {
            return substr($word, 0, -1) . 'ies';
        }

        return $word . 's';
    }
}
''')

PHP_TEST_SLUGGER_C1 = _text('''
<?php

declare(strict_types=1);

namespace Envforge\\Text\\Tests;

use Envforge\\Text\\Slugger;
use PHPUnit\\Framework\\TestCase;

final class SluggerTest extends TestCase
{
    public function testLowercases(): void
    {
        $this->assertSame('hello', (new Slugger())->slugify('HeLLo'));
    }

    public function testReplacesSpaces(): void
    {
        $this->assertSame('hello-big-world', (new Slugger())->slugify('Hello big World'));
    }

    public function testKeepsDigits(): void
    {
        $this->assertSame('php-8-2', (new Slugger())->slugify('PHP 8.2'));
    }

    public function testCustomSeparator(): void
    {
        $this->assertSame('hello_world', (new Slugger('_'))->slugify('Hello World'));
    }

    /**
     * @dataProvider accentedWords
     */
    public function testTransliterates(string $input, string $expected): void
    {
        $this->assertSame($expected, (new Slugger())->slugify($input));
    }

    public function accentedWords(): array
    {
        return [
            'e acute' => ['Café', 'cafe'],
            'umlaut' => ['Über', 'uber'],
            'sharp s' => ['Straße', 'strasse'],
        ];
    }
}
''')
PHP_TEST_SLUGGER_C3 = PHP_TEST_SLUGGER_C1.replace("\n    /**\n     * @dataProvider", _text('''

    public function testWithSeparatorReturnsANewSlugger(): void
    {
        $dash = new Slugger();
        $dot = $dash->withSeparator('.');
        $this->assertNotSame($dash, $dot);
        $this->assertSame('a.b', $dot->slugify('A B'));
        $this->assertSame('a-b', $dash->slugify('A B'));
    }
''').rstrip("\n") + "\n\n    /**\n     * @dataProvider")
PHP_TEST_SLUGGER_C4 = PHP_TEST_SLUGGER_C3.replace("\n    /**\n     * @dataProvider", _text('''

    public function testCollapsesRepeatedSeparators(): void
    {
        $this->assertSame('rock-roll', (new Slugger())->slugify('Rock & Roll'));
    }

    public function testTrimsSeparators(): void
    {
        $this->assertSame('hello-world', (new Slugger())->slugify('  Hello, World!  '));
    }
''').rstrip("\n") + "\n\n    /**\n     * @dataProvider").replace(
    "            'sharp s' => ['Straße', 'strasse'],\n",
    "            'sharp s' => ['Straße', 'strasse'],\n"
    "            'spaced accents' => ['  Crème  brûlée ', 'creme-brulee'],\n")

PHP_TEST_INFLECTOR = _text('''
<?php

declare(strict_types=1);

namespace Envforge\\Text\\Tests;

use Envforge\\Text\\Inflector;
use PHPUnit\\Framework\\TestCase;

final class InflectorTest extends TestCase
{
    /**
     * @dataProvider words
     */
    public function testPluralize(string $singular, string $plural): void
    {
        $this->assertSame($plural, Inflector::pluralize($singular));
    }

    public function words(): array
    {
        return [
            'regular' => ['cat', 'cats'],
            'sibilant' => ['box', 'boxes'],
            'consonant y' => ['city', 'cities'],
            'vowel y' => ['day', 'days'],
            'irregular' => ['child', 'children'],
        ];
    }
}
''')

PHP_BOOTSTRAP = _text('''
<?php

declare(strict_types=1);

// Loads Envforge\\Text\\* from src/ (PSR-4, as composer.json declares) without Composer.
spl_autoload_register(static function (string $class): void {
    $prefix = 'Envforge\\\\Text\\\\';
    if (strncmp($class, $prefix, strlen($prefix)) !== 0) {
        return;
    }
    $file = __DIR__ . '/../src/' . str_replace('\\\\', '/', substr($class, strlen($prefix))) . '.php';
    if (is_file($file)) {
        require $file;
    }
});
''')

PHP_PHPUNIT_XML = _text('''
<?xml version="1.0" encoding="UTF-8"?>
<phpunit bootstrap="tests/bootstrap.php"
         colors="false"
         cacheResult="false"
         failOnRisky="true"
         failOnWarning="true">
    <testsuites>
        <testsuite name="text">
            <directory suffix="Test.php">tests</directory>
        </testsuite>
    </testsuites>
</phpunit>
''')

PHP_COMPOSER = _text('''
{
    "name": "envforge-fixtures/text",
    "description": "URL slugs and English plurals",
    "type": "library",
    "license": "MIT",
    "require": {
        "php": ">=8.1",
        "ext-mbstring": "*"
    },
    "require-dev": {
        "phpunit/phpunit": "^9.6"
    },
    "autoload": {
        "psr-4": {"Envforge\\\\Text\\\\": "src/"}
    },
    "autoload-dev": {
        "psr-4": {"Envforge\\\\Text\\\\Tests\\\\": "tests/"}
    }
}
''')

PHP_README_C1 = _text('''
# text

`(new Slugger())->slugify('Hello World')` is `hello-world`. Tests: `phpunit`.
''')
PHP_README_C2 = PHP_README_C1.replace("Tests:", "`Inflector::pluralize('city')` is\n`cities`. Tests:")
PHP_README_C5 = PHP_README_C2 + _text('''

## Changes

* Runs of punctuation and spaces become one separator, and slugs never start or end with one.
''')

PHP = {
    "name": "text",
    "runner": "PHPUnit 9.6 (phpunit) on PHP 8.2 (php-cli), --log-junit",
    "junit_producer": "phpunit",
    "is_test": lambda p: p.startswith("tests/"),
    "commits": [
        ("Initial import: Slugger", {
            ".gitignore": "vendor/\n.phpunit.result.cache\n",
            "README.md": PHP_README_C1,
            "composer.json": PHP_COMPOSER,
            "phpunit.xml.dist": PHP_PHPUNIT_XML,
            "src/Slugger.php": PHP_SLUGGER_C1,
            "tests/bootstrap.php": PHP_BOOTSTRAP,
            "tests/SluggerTest.php": PHP_TEST_SLUGGER_C1,
        }),
        ("Add Inflector::pluralize", {
            "README.md": PHP_README_C2,
            "src/Inflector.php": PHP_INFLECTOR,
            "tests/InflectorTest.php": PHP_TEST_INFLECTOR,
        }),
        ("Add Slugger::withSeparator", {
            "src/Slugger.php": PHP_SLUGGER_C3,
            "tests/SluggerTest.php": PHP_TEST_SLUGGER_C3,
        }),
        ("Slugger: one separator per run, none at the ends (fixes #2)", {
            "src/Slugger.php": PHP_SLUGGER_C4,
            "tests/SluggerTest.php": PHP_TEST_SLUGGER_C4,
        }),
        ("Changelog", {
            "README.md": PHP_README_C5,
        }),
    ],
    "bad_edit": ("src/Inflector.php", "            return substr($word, 0, -1) . 'ies';\n",
                 "            return $word . 's';\n"),
    "problem_statement": _text('''
Slugs contain repeated and trailing dashes

Every character that is not a letter or digit turns into its own dash, so punctuation and
double spaces leave runs of dashes, and leading or trailing spaces leave dashes at the ends:

```php
$s = new Envforge\\Text\\Slugger();
$s->slugify('Rock & Roll');          // "rock---roll", expected "rock-roll"
$s->slugify('  Hello, World!  ');    // "--hello--world---", expected "hello-world"
$s->slugify('  Crème  brûlée ');     // "--creme--brulee-", expected "creme-brulee"
```

A slug should have exactly one separator between words and none at either end (with a custom
separator too).
'''),
    "install": "",
    "test_command": 'phpunit --do-not-cache-result --log-junit "$ENVFORGE_JUNIT_DIR/phpunit.xml"',
    "FAIL_TO_PASS": [],   # filled in below
    "PASS_TO_PASS": [],
    "bad_breaks": None,
}

SPECS = {
    "python": PYTHON,
    "java": JAVA,
    "javascript": JAVASCRIPT,
    "typescript": TYPESCRIPT,
    "c": C_LANG,
    "cpp": CPP,
    "go": GO,
    "php": PHP,
}

# Ids that depend on a runner's naming, kept here next to each other.
JAVA_IDS = {
    "FAIL_TO_PASS": [
        "org.envforge.roman.RomanTest#toRomanFortiesAndNineties()",
        "org.envforge.roman.RomanTest#toRomanLargeNumbers()",
    ],
    "PASS_TO_PASS": [
        "org.envforge.roman.RomanParseTest#fromRomanBasic()",
        "org.envforge.roman.RomanParseTest#fromRomanLowerCase()",
        "org.envforge.roman.RomanParseTest#fromRomanRejectsBadDigits()",
        "org.envforge.roman.RomanParseTest#fromRomanSubtractive()",
        "org.envforge.roman.RomanTest#toRomanRejectsTooLarge()",
        "org.envforge.roman.RomanTest#toRomanRejectsZero()",
        "org.envforge.roman.RomanTest#toRomanSmallNumbers()",
    ],
    "bad_breaks": "org.envforge.roman.RomanTest#toRomanRejectsZero()",
}
JAVA.update(JAVA_IDS)

_PHP_S = "Envforge.Text.Tests.SluggerTest::"  # PHPUnit's classname: the class with dots
_PHP_I = "Envforge.Text.Tests.InflectorTest::"
PHP_IDS = {
    "FAIL_TO_PASS": [
        _PHP_S + "testCollapsesRepeatedSeparators",
        _PHP_S + 'testTransliterates with data set "spaced accents"',
        _PHP_S + "testTrimsSeparators",
    ],
    "PASS_TO_PASS": [
        _PHP_I + 'testPluralize with data set "consonant y"',
        _PHP_I + 'testPluralize with data set "irregular"',
        _PHP_I + 'testPluralize with data set "regular"',
        _PHP_I + 'testPluralize with data set "sibilant"',
        _PHP_I + 'testPluralize with data set "vowel y"',
        _PHP_S + "testCustomSeparator",
        _PHP_S + "testKeepsDigits",
        _PHP_S + "testLowercases",
        _PHP_S + "testReplacesSpaces",
        _PHP_S + 'testTransliterates with data set "e acute"',
        _PHP_S + 'testTransliterates with data set "sharp s"',
        _PHP_S + 'testTransliterates with data set "umlaut"',
        _PHP_S + "testWithSeparatorReturnsANewSlugger",
    ],
    "bad_breaks": _PHP_I + 'testPluralize with data set "consonant y"',
}
PHP.update(PHP_IDS)

# ------------------------------------------------------------------------------------------
# Toolchains
# ------------------------------------------------------------------------------------------

GTEST_LIBS = ["/usr/lib/x86_64-linux-gnu/libgtest.a", "/usr/lib/aarch64-linux-gnu/libgtest.a",
              "/usr/lib/libgtest.a", "/usr/lib64/libgtest.a"]

# language -> (required commands, required files (any of each inner list), probe command)
TOOLCHAINS = {
    "python": (["git"], [["/usr/bin/python3"]],
               ["/usr/bin/python3", "-c", "import pytest; print('pytest', pytest.__version__)"]),
    "java": (["git", "javac", "java", "find"],
             [["/usr/share/java/junit-platform-console-standalone.jar"],
              ["/usr/share/java/junit-jupiter-api.jar"], ["/usr/share/java/junit-jupiter-engine.jar"],
              ["/usr/share/java/opentest4j.jar"], ["/usr/share/java/apiguardian-api.jar"],
              ["/usr/share/java/junit-platform-commons.jar"]],
             ["javac", "-version"]),
    "javascript": (["git", "node", "mocha"], [["/usr/share/nodejs/mocha/package.json"]],
                   ["sh", "-c", NODE_PATH_PREFIX + " mocha --version"]),
    "typescript": (["git", "node", "mocha", "tsc"], [["/usr/share/nodejs/mocha/package.json"]],
                   ["sh", "-c", "tsc --version && " + NODE_PATH_PREFIX + " mocha --version"]),
    "c": (["git", "cc", "cmake", "ctest", "make"], [], ["cmake", "--version"]),
    "cpp": (["git", "g++", "make"], [["/usr/include/gtest/gtest.h"], GTEST_LIBS], ["g++", "--version"]),
    "go": (["git", "go", "gotestsum"], [], ["go", "version"]),
    "php": (["git", "php", "phpunit"], [], ["phpunit", "--version"]),
}


def toolchain_missing(lang):
    """What of the language's toolchain is absent here (empty when it is all present)."""
    commands, files, _ = TOOLCHAINS[lang]
    missing = [c for c in commands if shutil.which(c) is None]
    for alternatives in files:
        if not any(os.path.exists(f) for f in alternatives):
            missing.append(alternatives[0])
    if lang == "php" and shutil.which("php"):
        probe = subprocess.run(["php", "-r", "exit(function_exists('mb_strtolower') ? 0 : 1);"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if probe.returncode != 0:
            missing.append("php mbstring extension")
    return missing


def toolchain_probe(lang):
    """(ok, first line of output) of the language's probe command."""
    cmd = TOOLCHAINS[lang][2]
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              universal_newlines=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, str(e)
    lines = [ln.strip() for ln in proc.stdout.splitlines() if ln.strip()]
    return proc.returncode == 0, " / ".join(lines[:2])


# ------------------------------------------------------------------------------------------
# Git
# ------------------------------------------------------------------------------------------

def _date(lang_index, commit_index):
    # One day between commits, one month between languages; noon UTC.
    return "2024-%02d-%02dT12:00:00+00:00" % (lang_index + 1, 1 + 2 * commit_index)


def _git_env(date):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({
        "GIT_AUTHOR_NAME": AUTHOR_NAME, "GIT_AUTHOR_EMAIL": AUTHOR_EMAIL, "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_NAME": COMMITTER_NAME, "GIT_COMMITTER_EMAIL": COMMITTER_EMAIL,
        "GIT_COMMITTER_DATE": date,
        "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
        "LC_ALL": "C", "TZ": "UTC",
    })
    return env


GIT_OPTS = ["-c", "core.autocrlf=false", "-c", "core.fileMode=true", "-c", "commit.gpgSign=false",
            "-c", "core.quotePath=false", "-c", "color.ui=false", "-c", "diff.noprefix=false",
            "-c", "diff.mnemonicPrefix=false", "-c", "diff.renames=false"]


def git(repo, *args, date="2024-01-01T00:00:00+00:00"):
    proc = subprocess.run(["git"] + GIT_OPTS + list(args), cwd=repo, env=_git_env(date),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    if proc.returncode != 0:
        raise RuntimeError("git %s in %s: %s" % (" ".join(args), repo, proc.stderr.strip()))
    return proc.stdout


def _write(root, rel, content):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(content)
    os.chmod(path, 0o644)


def _diff(repo, old, new, paths):
    """Unified git diff old..new (new None: the working tree) limited to paths."""
    if not paths:
        return ""
    args = ["diff", "--no-color", "--no-ext-diff", "--no-renames", "--full-index", old]
    if new:
        args.append(new)
    return git(repo, *args, "--", *paths)


def _split_changed(repo, old, new, is_test):
    args = ["diff", "--name-only", "--no-renames", old] + ([new] if new else [])
    names = sorted(n for n in git(repo, *args).splitlines() if n)
    return [n for n in names if not is_test(n)], [n for n in names if is_test(n)]


def build_repo(lang, spec, repo):
    """Creates the repository; returns the list of commit hashes."""
    lang_index = LANGUAGES.index(lang)
    os.makedirs(repo)
    git(repo, "init", "-q", "-b", "main")
    shas = []
    for i, (message, files) in enumerate(spec["commits"]):
        for rel, content in sorted(files.items()):
            if content is None:
                os.remove(os.path.join(repo, rel))
            else:
                _write(repo, rel, content)
        date = _date(lang_index, i)
        git(repo, "add", "-A", date=date)
        git(repo, "commit", "-q", "--no-verify", "-m", message, date=date)
        shas.append(git(repo, "rev-parse", "HEAD").strip())
    return shas


def bad_patch(spec, repo, base, fix):
    """The gold patch plus spec["bad_edit"], as a diff from base (made in a throw-away clone)."""
    path, old, new = spec["bad_edit"]
    tmp = tempfile.mkdtemp(prefix="code-fixture-bad-")
    try:
        clone = os.path.join(tmp, "clone")
        git(tmp, "clone", "-q", "--no-checkout", repo, clone)
        git(clone, "checkout", "-q", "--detach", fix)
        target = os.path.join(clone, path)
        with open(target, encoding="utf-8") as f:
            text = f.read()
        if text.count(old) != 1:
            raise RuntimeError("bad_edit of %s: the text to replace occurs %d times" % (path, text.count(old)))
        with open(target, "w", encoding="utf-8", newline="\n") as f:
            f.write(text.replace(old, new))
        src, _ = _split_changed(clone, base, None, spec["is_test"])
        return _diff(clone, base, None, src)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def make_instance(lang, spec, repo, shas):
    base, fix = shas[BASE_INDEX], shas[FIX_INDEX]
    src, tests = _split_changed(repo, base, fix, spec["is_test"])
    if not src or not tests:
        raise RuntimeError("%s: the fix must change source and test files (source %s, tests %s)" % (lang, src, tests))
    return {
        "instance_id": "envforge-fixtures__%s-1" % lang,
        "repo": "envforge-fixtures/%s" % lang,
        "base_commit": base,
        "problem_statement": spec["problem_statement"],
        "patch": _diff(repo, base, fix, src),
        "test_patch": _diff(repo, base, fix, tests),
        "FAIL_TO_PASS": list(spec["FAIL_TO_PASS"]),
        "PASS_TO_PASS": list(spec["PASS_TO_PASS"]),
        "language": lang,
        "install": spec["install"],
        "test_command": spec["test_command"],
        "junit_producer": spec["junit_producer"],
        **({"test_subset_command": spec["test_subset_command"]} if "test_subset_command" in spec else {}),
    }


def _dump(obj):
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


def generate(out, languages, log=sys.stderr):
    """Writes the fixtures of `languages` under out; returns (index entries, instances, broken)."""
    os.makedirs(out, exist_ok=True)
    index, instances, broken = [], [], []
    for lang in languages:
        spec = SPECS[lang]
        entry = {"language": lang, "instance_id": "envforge-fixtures__%s-1" % lang,
                 "runner": spec["runner"], "junit_producer": spec["junit_producer"]}
        lang_dir = os.path.join(out, lang)
        if os.path.isdir(lang_dir):
            shutil.rmtree(lang_dir)
        missing = toolchain_missing(lang)
        if missing:
            log.write("%s: toolchain missing: %s\n" % (lang, ", ".join(missing)))
            entry.update({"written": False, "toolchain": "missing", "missing": missing})
            index.append(entry)
            continue
        ok, version = toolchain_probe(lang)
        if not ok:
            log.write("%s: toolchain broken: %s failed: %s\n" % (lang, " ".join(TOOLCHAINS[lang][2]), version))
            entry.update({"written": False, "toolchain": "broken", "missing": [],
                          "probe": " ".join(TOOLCHAINS[lang][2]), "error": version})
            index.append(entry)
            broken.append(lang)
            continue
        repo = os.path.join(lang_dir, "repo")
        shas = build_repo(lang, spec, repo)
        instance = make_instance(lang, spec, repo, shas)
        with open(os.path.join(lang_dir, "instance.json"), "w", encoding="utf-8") as f:
            f.write(_dump(instance))
        with open(os.path.join(lang_dir, "bad_patch.diff"), "w", encoding="utf-8", newline="\n") as f:
            f.write(bad_patch(spec, repo, shas[BASE_INDEX], shas[FIX_INDEX]))
        entry.update({"written": True, "toolchain": "present", "missing": [], "toolchain_version": version,
                      "base_commit": shas[BASE_INDEX], "fix_commit": shas[FIX_INDEX], "head_commit": shas[-1],
                      "bad_patch_breaks": spec["bad_breaks"],
                      "fail_to_pass": len(instance["FAIL_TO_PASS"]),
                      "pass_to_pass": len(instance["PASS_TO_PASS"])})
        index.append(entry)
        instances.append(instance)
    with open(os.path.join(out, "index.json"), "w", encoding="utf-8") as f:
        f.write(_dump(index))
    with open(os.path.join(out, "all.jsonl"), "w", encoding="utf-8") as f:
        for instance in instances:
            f.write(json.dumps(instance, ensure_ascii=False) + "\n")
    return index, instances, broken


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="output directory (required unless --list)")
    parser.add_argument("--language", action="append", choices=LANGUAGES,
                        help="a language to write (repeatable; default: all eight)")
    parser.add_argument("--list", action="store_true",
                        help="print the languages, runners and toolchain status; write nothing")
    args = parser.parse_args(argv)
    languages = [l for l in LANGUAGES if l in args.language] if args.language else list(LANGUAGES)
    if args.list:
        for lang in languages:
            missing = toolchain_missing(lang)
            status = "toolchain missing: " + ", ".join(missing) if missing else "toolchain present"
            print("%-11s %-8s %s; %s" % (lang, SPECS[lang]["junit_producer"], SPECS[lang]["runner"], status))
        return 0
    if not args.out:
        parser.error("--out is required (or --list)")
    index, instances, broken = generate(args.out, languages)
    print("wrote %d of %d fixtures to %s" % (len(instances), len(languages), args.out))
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
