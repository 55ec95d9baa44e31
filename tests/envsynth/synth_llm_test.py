"""`envforge synth --proposer llm` with the scripted backend replaying responses written here
(issue 13): every path of the llm protocol through the real loop -- a valid proposal, broken SQL
repaired, a solution that reads the database repaired, a loose verifier the audit rejects and a
repair that fixes it while adding a tool the task needs, an unreadable response corrected in the
same conversation, and a stopped run resumed without asking the model again.

Run by ctest (tests/envsynth/CMakeLists.txt) with ENVFORGE set to the built CLI.
"""

import glob
import json
import os
import sqlite3
import subprocess

ENVFORGE = os.environ.get("ENVFORGE", "build/bin/envforge")

SCHEMA_OK = """CREATE TABLE publishers (name TEXT PRIMARY KEY, city TEXT NOT NULL);
CREATE TABLE books (title TEXT PRIMARY KEY, author TEXT NOT NULL, genre TEXT NOT NULL,
  price REAL NOT NULL, rating REAL NOT NULL, publisher TEXT NOT NULL REFERENCES publishers(name));
INSERT INTO publishers VALUES ('Orvel Press', 'Dunmarrow'), ('Kestine House', 'Brightwick'), ('Lumo Books', 'Dunmarrow');
INSERT INTO books VALUES ('The Salt Road', 'Ada Vence', 'travel', 18.5, 4.2, 'Orvel Press');
INSERT INTO books VALUES ('Glass Harbour', 'Ada Vence', 'fiction', 24.0, 3.6, 'Kestine House');
INSERT INTO books VALUES ('Nine Winters', 'Ada Vence', 'fiction', 12.0, 4.5, 'Lumo Books');
INSERT INTO books VALUES ('Copper Skies', 'Bram Ollis', 'fiction', 15.0, 4.1, 'Kestine House');
INSERT INTO books VALUES ('A Field Guide to Moss', 'Bram Ollis', 'science', 31.0, 4.7, 'Orvel Press');
INSERT INTO books VALUES ('Quiet Engines', 'Cora Imre', 'science', 22.0, 3.9, 'Lumo Books');
INSERT INTO books VALUES ('The Last Ferry', 'Cora Imre', 'travel', 9.5, 4.4, 'Kestine House');
INSERT INTO books VALUES ('Lanterns', 'Cora Imre', 'fiction', 27.5, 4.8, 'Orvel Press');
"""
SCHEMA_BROKEN = SCHEMA_OK.replace("publisher TEXT NOT NULL REFERENCES publishers(name));",
                                  "publisher TEXT NOT NULL REFERENCES publishers(name);")

TOOLS = '''"""Tools over a small bookshop: books (price in USD, rating 1.0-5.0) and their publishers.

The runtime injects a module global ``db``: db.query(sql, params=()) -> list[dict].
"""


def list_books(author: str = "", genre: str = ""):
    """Titles of the books, sorted, optionally only one author's and/or one genre's. author:
    exact author name or "" for any; genre: exact genre (fiction, science, travel) or "" for any.
    """
    rows = db.query("SELECT title, author, genre FROM books ORDER BY title")
    return [r["title"] for r in rows if (not author or r["author"] == author) and (not genre or r["genre"] == genre)]


def get_book(title: str):
    """One book's author, genre, price (USD), rating and publisher. title: the exact title as
    list_books returns it."""
    rows = db.query("SELECT title, author, genre, price, rating, publisher FROM books WHERE title = ?", (title,))
    if not rows:
        raise ValueError("unknown book %r; list_books() lists every title" % (title,))
    return rows[0]
'''

ENVELOPE = '''
def _answer(answer):
    if isinstance(answer, str):
        try:
            answer = json.loads(answer.strip())
        except (ValueError, RecursionError):
            return None
    return answer
'''

TASK1 = {"id": "cheap_by_author", "prompt": "Find a book by Ada Vence that costs less than 20 USD (strictly). Submit only "
         "a JSON object {\"title\": \"<exact title>\"}.",
         "answer_schema": {"type": "object", "properties": {"title": {"type": "string", "x-domain": "books.title"}},
                           "required": ["title"], "additionalProperties": False},
         "knobs": {"constraints": 2, "hops": 1}}
SOLUTION1 = '''def solve(tools):
    for title in tools.list_books(author="Ada Vence"):
        if tools.get_book(title)["price"] < 20:
            return {"title": title}
'''
VERIFIER1 = '''import json
''' + ENVELOPE + '''

def verify(answer, db):
    try:
        a = _answer(answer)
        if not isinstance(a, dict) or set(a) != {"title"} or not isinstance(a["title"], str):
            return {"passed": False, "score": 0.0, "reasons": ["answer must be {\\"title\\": string}"]}
        rows = db.query("SELECT author, price FROM books WHERE title = ?", (a["title"],))
        if not rows:
            return {"passed": False, "score": 0.0, "reasons": ["unknown book"]}
        reasons = []
        if rows[0]["author"] != "Ada Vence":
            reasons.append("not by Ada Vence")
        if not rows[0]["price"] < 20:
            reasons.append("not under 20 USD")
        return {"passed": not reasons, "score": 0.0 if reasons else 1.0, "reasons": reasons}
    except Exception as exc:
        return {"passed": False, "score": 0.0, "reasons": ["verifier error %s" % type(exc).__name__]}
'''
ORACLE1 = '''import json
''' + ENVELOPE + '''

def verify(answer, db):
    try:
        ok = {r["title"] for r in db.query("SELECT title FROM books WHERE author = 'Ada Vence' AND price < 20")}
        a = _answer(answer)
        good = isinstance(a, dict) and list(a) == ["title"] and a["title"] in ok
        return {"passed": good, "score": 1.0 if good else 0.0, "reasons": [] if good else ["not acceptable"]}
    except Exception:
        return {"passed": False, "score": 0.0, "reasons": ["oracle error"]}
'''

TASK2 = {"id": "rated_fiction", "prompt": "Find a fiction book rated at least 4.0 whose publisher is in Dunmarrow. "
         "Submit only a JSON object {\"title\": \"<exact title>\"}.",
         "answer_schema": TASK1["answer_schema"], "knobs": {"constraints": 3, "hops": 2}}
SOLUTION2_READS_DB = '''def solve(tools):
    rows = db.query("SELECT title FROM books")
    return {"title": rows[0]["title"]}
'''
SOLUTION2 = '''def solve(tools):
    publishers = {"Orvel Press", "Lumo Books"}
    for title in tools.list_books(genre="fiction"):
        book = tools.get_book(title)
        if book["rating"] >= 4.0 and book["publisher"] in publishers:
            return {"title": title}
'''
VERIFIER2 = VERIFIER1.replace('''        rows = db.query("SELECT author, price FROM books WHERE title = ?", (a["title"],))
        if not rows:
            return {"passed": False, "score": 0.0, "reasons": ["unknown book"]}
        reasons = []
        if rows[0]["author"] != "Ada Vence":
            reasons.append("not by Ada Vence")
        if not rows[0]["price"] < 20:
            reasons.append("not under 20 USD")''', '''        rows = db.query("SELECT b.genre, b.rating, p.city FROM books b JOIN publishers p ON p.name = b.publisher "
                        "WHERE b.title = ?", (a["title"],))
        if not rows:
            return {"passed": False, "score": 0.0, "reasons": ["unknown book"]}
        reasons = []
        if rows[0]["genre"] != "fiction":
            reasons.append("not fiction")
        if not rows[0]["rating"] >= 4.0:
            reasons.append("rated below 4.0")
        if rows[0]["city"] != "Dunmarrow":
            reasons.append("publisher not in Dunmarrow")''')
ORACLE2 = ORACLE1.replace('''"SELECT title FROM books WHERE author = 'Ada Vence' AND price < 20"''',
                          '''"SELECT title FROM books WHERE genre = 'fiction' AND rating >= 4.0 AND publisher IN "
                                                "(SELECT name FROM publishers WHERE city = 'Dunmarrow')"''')

TASK3 = {"id": "science_in_city", "prompt": "Find a science book under 30 USD (strictly) whose publisher is based in "
         "Brightwick or Dunmarrow and rated above 3.5 (strictly). Submit only a JSON object {\"title\": \"<exact title>\"}.",
         "answer_schema": TASK1["answer_schema"], "knobs": {"constraints": 4, "hops": 2}}
VERIFIER3_LOOSE = '''def verify(answer, db):
    return {"passed": True, "score": 1.0, "reasons": []}
'''
SOLUTION3 = '''def solve(tools):
    for title in tools.list_books(genre="science"):
        book = tools.get_book(title)
        city = tools.get_publisher_city(book["publisher"])
        if book["price"] < 30 and book["rating"] > 3.5 and city in ("Brightwick", "Dunmarrow"):
            return {"title": title}
'''
VERIFIER3 = VERIFIER2.replace('''        if rows[0]["genre"] != "fiction":
            reasons.append("not fiction")
        if not rows[0]["rating"] >= 4.0:
            reasons.append("rated below 4.0")
        if rows[0]["city"] != "Dunmarrow":
            reasons.append("publisher not in Dunmarrow")''', '''        if rows[0]["genre"] != "science":
            reasons.append("not science")
        if not rows[0]["rating"] > 3.5:
            reasons.append("not rated above 3.5")
        if rows[0]["city"] not in ("Brightwick", "Dunmarrow"):
            reasons.append("publisher not in Brightwick or Dunmarrow")
        price = db.query("SELECT price FROM books WHERE title = ?", (a["title"],))[0]["price"]
        if not price < 30:
            reasons.append("not under 30 USD")''')
ORACLE3 = ORACLE1.replace('''"SELECT title FROM books WHERE author = 'Ada Vence' AND price < 20"''',
                          '''"SELECT title FROM books WHERE genre = 'science' AND price < 30 AND rating > 3.5 AND publisher IN "
                                                "(SELECT name FROM publishers WHERE city IN ('Brightwick', 'Dunmarrow'))"''')
NEW_TOOL = '''def get_publisher_city(name: str):
    """The city a publisher is based in. name: the exact publisher name, as get_book returns it."""
    rows = db.query("SELECT city FROM publishers WHERE name = ?", (name,))
    if not rows:
        raise ValueError("unknown publisher %r" % (name,))
    return rows[0]["city"]
'''


def block(lang, name, text):
    return "```%s %s\n%s%s```\n" % (lang, name, text, "" if text.endswith("\n") else "\n")


def environment(schema):
    return (block("json", "env.json", json.dumps({"name": "Bookshop", "description": "Books and publishers."}))
            + block("sql", "schema.sql", schema) + block("python", "tools.py", TOOLS))


def task(meta, solution, verifier, oracle, tools=()):
    out = (block("json", "task.json", json.dumps(meta)) + block("python", "solution.py", solution)
           + block("python", "verifier.py", verifier) + block("python", "oracle.py", oracle))
    for name, source in tools:
        out += block("python", "tools/%s.py" % name, source)
    return out


# The model's answers in the order the loop asks (one script per request: request i plays script i).
RESPONSES = [
    environment(SCHEMA_BROKEN),                                # environment: its SQL does not run
    task(TASK1, SOLUTION1, VERIFIER1, ORACLE1),                # level 1 (packing then names the SQL)
    environment(SCHEMA_OK),                                    # environment repair
    task(TASK1, SOLUTION1, VERIFIER1, ORACLE1),                # level 1 again, on the repaired environment
    "Here is the task you asked for: no blocks at all.",       # level 2, unreadable ...
    task(TASK2, SOLUTION2_READS_DB, VERIFIER2, ORACLE2),       # ... corrected: its solution reads the database
    task(TASK2, SOLUTION2, VERIFIER2, ORACLE2),                # repair of the solution
    task(TASK3, SOLUTION3, VERIFIER3_LOOSE, ORACLE3, [("get_publisher_city", NEW_TOOL)]),  # level 3: loose verifier
    task(TASK3, SOLUTION3, VERIFIER3, ORACLE3, [("get_publisher_city", NEW_TOOL)]),        # repair after the audit
]


def write_script(path):
    with open(path, "w") as f:
        for i, text in enumerate(RESPONSES):
            f.write(json.dumps({"script": i, "content": text}) + "\n")


def run(*args):
    return subprocess.run([ENVFORGE, *args], capture_output=True, text=True, timeout=600)


def test_the_llm_protocol_through_the_loop(tmp_path):
    script = tmp_path / "model.jsonl"
    write_script(script)
    out = tmp_path / "out"
    done = run("synth", "--proposer", "llm", "--backend", "scripted:%s" % script, "--categories", "bookshop",
               "--envs", "1", "--tasks-per-env", "1", "--max-levels", "3", "--repairs", "1", "--no-filter",
               "--out", str(out), "--json")
    assert done.returncode == 0, done.stderr[-4000:]
    funnel = json.loads(done.stdout)
    assert funnel["environments"]["done"] == 1, funnel
    rows = {(r["category"], r["level"]): r for r in funnel["funnel"]}
    for level in (1, 2, 3):
        assert rows[("bookshop", level)]["kept"] == 1, (level, funnel["dropped"])
    assert rows[("bookshop", 2)]["repairs"] == 1 and rows[("bookshop", 3)]["repairs"] == 1
    assert funnel["cost"]["model_calls"] == len(RESPONSES)
    with sqlite3.connect(str(out / "run.sqlite")) as db:
        repairs = [json.loads(d) for k, d in db.execute("SELECT kind, detail FROM events WHERE kind = 'repair' ORDER BY id")]
        augments = [json.loads(d) for (d,) in db.execute("SELECT detail FROM events WHERE kind = 'augment'")]
    assert [(r["stage"], r["attribution"]) for r in repairs] == [
        ("environment", "database"), ("validation", "solution"), ("audit", "verifier")], repairs
    assert "schema.sql" in repairs[0]["reasons"][0]
    assert any("db" in reason for reason in repairs[1]["reasons"]), repairs[1]
    assert augments and augments[0]["tools"] == ["get_publisher_city"]
    (bundle,) = glob.glob(str(out / "*.envdb"))
    assert os.path.basename(bundle).startswith("bookshop_")
    shown = json.loads(run("env", "show", bundle, "--json").stdout)
    assert "get_publisher_city" in [t["name"] for t in shown["tools"]]
    assert shown["manifest"]["provenance"]["generator"].startswith("envsynth llm:scripted:")
    checked = run("env", "check", bundle)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_a_resumed_llm_run_never_asks_the_model_again(tmp_path):
    # Only the first two responses: the run stops when the model has nothing more to say (an
    # infrastructure error), then resumes with the whole script and must not re-ask for what it has.
    short = tmp_path / "short.jsonl"
    with open(short, "w") as f:
        f.write(json.dumps({"script": 0, "content": environment(SCHEMA_OK)}) + "\n")
        f.write(json.dumps({"script": 1, "content": task(TASK1, SOLUTION1, VERIFIER1, ORACLE1)}) + "\n")
        f.write(json.dumps({"script": 2, "error": "unavailable", "message": "model server went away"}) + "\n")
    out = tmp_path / "out"
    first = run("synth", "--proposer", "llm", "--backend", "scripted:%s" % short, "--categories", "bookshop",
                "--envs", "1", "--tasks-per-env", "1", "--max-levels", "2", "--repairs", "0", "--no-filter",
                "--out", str(out))
    assert first.returncode == 3, first.stdout + first.stderr
    assert "model server went away" in first.stderr
    rest = tmp_path / "rest.jsonl"
    with open(rest, "w") as f:  # only level 2 is left to ask for
        f.write(json.dumps({"script": 0, "content": task(TASK2, SOLUTION2, VERIFIER2, ORACLE2)}) + "\n")
    resumed = run("synth", "resume", str(out / "run.sqlite"), "--backend", "scripted:%s" % rest, "--json")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    funnel = json.loads(resumed.stdout)
    rows = {(r["category"], r["level"]): r for r in funnel["funnel"]}
    assert rows[("bookshop", 1)]["kept"] == 1 and rows[("bookshop", 2)]["kept"] == 1
