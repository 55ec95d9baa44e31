"""Procedural category "course_planning": a university's departments, courses (credits, level,
prerequisites), sections (weekly meeting times, instructor, seats) with instructor ratings, and
the transcripts of a few students.

Tasks go from "name a course worth at least N credits" to building a term schedule of three
sections for a student: credit range, no time clash, free seats, prerequisites satisfied by the
student's transcript, and a conditional rule. Levels 1 and 2 are one search (find_courses,
find_instructors, find_sections take the task's filters as arguments and list the rows that pass
them, the most credits or the highest rating first): the answer is its first row. Levels 3 and 4
scan the catalogue with a student's transcript. Every task is a "find any X" task: the verifier
checks the submitted answer constraint by constraint with targeted queries on the pristine
database; the oracle reads the tables in bulk, computes the set of eligible entities (and, for a
schedule, tests the combination on an hour grid) and decides by membership. The generator runs
the oracle's code on an in-memory copy of the database to draw parameters that leave a non-empty,
level-sized set of acceptable answers.
"""

import itertools

import synth_common
from synth_common import insert_rows, object_schema, quoted, rng_for, spec_source, unique_words

ID = "course_planning"
TITLE = "University course planning"
DESCRIPTION = ("A university's departments, courses (credits, level, prerequisites), weekly "
               "sections (days, hours, instructor, seats) with instructor ratings, and a few "
               "students' transcripts. Tasks range from a course look-up to a term schedule of "
               "several sections with a credit range, no time clash, free seats and "
               "prerequisites satisfied by a transcript.")
MAX_LEVEL = 4

_DEPT_POOL = [("BIO", "Biology"), ("CHM", "Chemistry"), ("CMP", "Computing"),
              ("ECN", "Economics"), ("HIS", "History"), ("MTH", "Mathematics"),
              ("MUS", "Music"), ("PHL", "Philosophy"), ("PHY", "Physics"),
              ("PSY", "Psychology"), ("LIN", "Linguistics"), ("STA", "Statistics")]
_TITLE_NOUNS = ["Foundations", "Methods", "Seminar", "Laboratory", "Theory", "Workshop",
                "Analysis", "Systems", "Topics", "Practicum", "Modelling", "Readings"]
# (days, hours) meeting patterns; days are letters M T W R F (R = Thursday)
_PATTERNS = [("MWF", 1), ("MWF", 1), ("MW", 1), ("MW", 2), ("TR", 1), ("TR", 2), ("TR", 2),
             ("WF", 1), ("F", 2), ("M", 2), ("T", 2), ("R", 2)]
DAY_NAMES = {"M": "Monday", "T": "Tuesday", "W": "Wednesday", "R": "Thursday", "F": "Friday"}
_GRADES = ["A", "A", "A", "B", "B", "B", "C", "C", "D", "F"]

# ------------------------------------------------------------------------------------- tools

PREAMBLE = '''"""Course-planning tools: a university catalogue, sections, student transcripts.

The runtime injects a module global ``db`` before any tool is called:
``db.query(sql, params=()) -> list[dict]``. Public functions are tools; helpers start with ``_``.

Sections meet every week on the days in their "days" string, letters M (Monday), T (Tuesday),
W (Wednesday), R (Thursday) and F (Friday), from start_hour:00 to end_hour:00 (whole hours,
24-hour clock). Instructor ratings are on a 1.0-5.0 scale with one decimal. Codes and names must
be given exactly as the listing tools return them.
"""

''' + synth_common.join_defs(synth_common.TOOL_QUERY, synth_common.TOOL_REQUIRE_STR, '''
def _close(values, name):
    key = str(name).strip().lower()
    return [v for v in values if key and (key in v.lower() or v.lower() in key)][:3]


def _check(table, column, value, what, how):
    _require_str(value, what)
    if not _q("SELECT 1 AS ok FROM %s WHERE %s = ?" % (table, column), (value,)):
        hint = _close([r["v"] for r in _q("SELECT %s AS v FROM %s ORDER BY %s"
                                          % (column, table, column))], value)
        raise ValueError("unknown %s %r; %s" % (what, value, "did you mean: " + ", ".join(
            repr(h) for h in hint) + "?" if hint else how))


def _department_filter(department):
    if not isinstance(department, str):
        raise ValueError("department must be a department code such as 'BIO' (or '' for every "
                         "department), got %r" % (department,))
    if department:
        _check("departments", "code", department, "department",
               "call list_departments() for the codes")


def _number(value, what, low, high, example):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("%s must be a number from %s to %s (e.g. %s), got %r"
                         % (what, low, high, example, value))
    if not low <= value <= high:
        raise ValueError("%s must be from %s to %s, got %r" % (what, low, high, value))


_DAY_NAMES = {"monday": "M", "tuesday": "T", "wednesday": "W", "thursday": "R", "friday": "F"}


def _day_letter(day):
    """The letter of a day given as a letter of MTWRF or its name ("Thursday", "thu"); ""."""
    if not isinstance(day, str):
        raise ValueError("day must be a string: one letter of M T W R F (R is Thursday)")
    key = day.strip().lower()
    if not key:
        return ""
    if len(key) == 1 and key.upper() in "MTWRF":
        return key.upper()
    names = [n for n in _DAY_NAMES if len(key) >= 3 and n.startswith(key)]
    if len(names) == 1:
        return _DAY_NAMES[names[0]]
    raise ValueError("unknown day %r; give one letter: M (Monday), T (Tuesday), W (Wednesday), "
                     "R (Thursday) or F (Friday)" % (day,))


def _whole_hour(value, what):
    """A whole hour 0-24 given as 13, 13.0, "13" or "13:00"."""
    text = value.strip() if isinstance(value, str) else None
    if text is not None and text.endswith(":00"):
        text = text[:-3]
    if text is not None and text.isdigit():
        value = int(text)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 24:
        raise ValueError("%s must be a whole hour from 0 to 24 (e.g. 13 for 13:00), got %r"
                         % (what, value))
    return value
''')

TOOLS = {}

TOOLS["list_departments"] = '''
def list_departments():
    """List the departments as objects {"code" (e.g. "BIO"), "name", "building"}, sorted by
    code. Use the codes with list_courses and list_instructors.
    """
    return [dict(r) for r in _q("SELECT code, name, building FROM departments ORDER BY code")]
'''

TOOLS["list_courses"] = '''
def list_courses(department: str):
    """List a department's courses, sorted by code, as objects {"code" (e.g. "BIO214"),
    "title", "credits" (integer), "level" (100, 200, 300 or 400)}. Prerequisites are given by
    get_course.

    Args:
        department: department code as returned by list_departments(), e.g. "BIO".
    """
    _check("departments", "code", department, "department",
           "call list_departments() for the codes")
    return [dict(r) for r in _q("SELECT code, title, credits, level FROM courses "
                                "WHERE department = ? ORDER BY code", (department,))]
'''

TOOLS["get_course"] = '''
def get_course(course: str):
    """Facts about one course: {"code", "title", "department", "credits", "level",
    "prerequisites" (sorted list of course codes that must be completed first; empty when
    none)}.

    Args:
        course: course code as returned by list_courses(), e.g. "BIO214".
    """
    _check("courses", "code", course, "course", "call list_courses(department) for the codes")
    r = _q("SELECT code, title, department, credits, level FROM courses WHERE code = ?",
           (course,))[0]
    out = dict(r)
    out["prerequisites"] = [p["requires"] for p in _q(
        "SELECT requires FROM prerequisites WHERE course = ? ORDER BY requires", (course,))]
    return out
'''

TOOLS["list_sections"] = '''
def list_sections(course: str):
    """List the sections of one course this term, sorted by id, as objects {"section" (id,
    e.g. "BIO214-A"), "instructor", "days" (letters of M T W R F; R is Thursday), "start_hour",
    "end_hour" (whole hours, 24-hour clock), "seats" (places in total), "enrolled" (places
    taken; the section is full when enrolled equals seats)}.

    Args:
        course: course code as returned by list_courses(), e.g. "BIO214".
    """
    _check("courses", "code", course, "course", "call list_courses(department) for the codes")
    return [{"section": r["id"], "instructor": r["instructor"], "days": r["days"],
             "start_hour": r["start_hour"], "end_hour": r["end_hour"], "seats": r["seats"],
             "enrolled": r["enrolled"]}
            for r in _q("SELECT id, instructor, days, start_hour, end_hour, seats, enrolled "
                        "FROM sections WHERE course = ? ORDER BY id", (course,))]
'''

TOOLS["get_section"] = '''
def get_section(section: str):
    """Facts about one section: {"section", "course", "instructor", "days", "start_hour",
    "end_hour", "seats", "enrolled"} (see list_sections for the meaning of each field).

    Args:
        section: section id, e.g. "BIO214-A".
    """
    _check("sections", "id", section, "section", "section ids look like 'BIO214-A'; call "
           "list_sections(course) for a course's sections")
    r = _q("SELECT id, course, instructor, days, start_hour, end_hour, seats, enrolled "
           "FROM sections WHERE id = ?", (section,))[0]
    return {"section": r["id"], "course": r["course"], "instructor": r["instructor"],
            "days": r["days"], "start_hour": r["start_hour"], "end_hour": r["end_hour"],
            "seats": r["seats"], "enrolled": r["enrolled"]}
'''

TOOLS["list_instructors"] = '''
def list_instructors(department: str):
    """List the names of a department's instructors, sorted alphabetically.

    Args:
        department: department code as returned by list_departments(), e.g. "BIO".
    """
    _check("departments", "code", department, "department",
           "call list_departments() for the codes")
    return [r["name"] for r in _q("SELECT name FROM instructors WHERE department = ? "
                                  "ORDER BY name", (department,))]
'''

TOOLS["get_instructor"] = '''
def get_instructor(instructor: str):
    """Facts about one instructor: {"name", "department" (code), "rating" (student rating,
    1.0-5.0 with one decimal)}.

    Args:
        instructor: exact name as returned by list_instructors() or list_sections().
    """
    _check("instructors", "name", instructor, "instructor",
           "call list_instructors(department) for the names")
    return dict(_q("SELECT name, department, rating FROM instructors WHERE name = ?",
                   (instructor,))[0])
'''

TOOLS["get_transcript"] = '''
def get_transcript(student: str):
    """A student's transcript: the courses they have taken, oldest term first, as objects
    {"course", "term" (the month the term began, "YYYY-MM"), "grade"} with grade one of "A",
    "B", "C", "D", "F" (F = failed).

    Args:
        student: the student's full name, e.g. as given in a task.
    """
    _require_str(student, "student")
    rows = _q("SELECT course, term, grade FROM transcripts WHERE student = ? "
              "ORDER BY term, course", (student,))
    if not rows:
        known = [r["student"] for r in _q("SELECT DISTINCT student FROM transcripts "
                                          "ORDER BY student")]
        raise ValueError("unknown student %r; the students are: %s" % (student, ", ".join(known)))
    return [dict(r) for r in rows]
'''

TOOLS["find_courses"] = '''
def find_courses(department: str = "", min_credits: int = 0):
    """Search the catalogue's courses, optionally by department and minimum credits. Returns a
    list of objects {"code", "title", "department", "credits", "level"} ordered by credits, the
    most first, then code.

    Args:
        department: keep only this department's courses (code as returned by
            list_departments(), e.g. "BIO"); "" keeps every department.
        min_credits: keep only courses worth at least this many credits (credits >=
            min_credits); 0 keeps all.
    """
    _department_filter(department)
    _number(min_credits, "min_credits", 0, 100, 3)
    rows = _q("SELECT code, title, department, credits, level FROM courses "
              "ORDER BY credits DESC, code")
    return [dict(r) for r in rows if (not department or r["department"] == department)
            and r["credits"] >= min_credits]
'''

TOOLS["find_instructors"] = '''
def find_instructors(department: str = "", min_rating: float = 0.0):
    """Search the instructors, optionally by department and minimum rating. Returns a list of
    objects {"name", "department", "rating"} ordered by rating, the highest first, then name.

    Args:
        department: keep only this department's instructors (code as returned by
            list_departments(), e.g. "BIO"); "" keeps every department.
        min_rating: keep only instructors rated at least this (rating >= min_rating, 1.0-5.0);
            0 keeps all.
    """
    _department_filter(department)
    _number(min_rating, "min_rating", 0, 5, 4.2)
    rows = _q("SELECT name, department, rating FROM instructors ORDER BY rating DESC, name")
    return [dict(r) for r in rows if (not department or r["department"] == department)
            and r["rating"] >= min_rating - 1e-9]
'''

TOOLS["find_sections"] = '''
def find_sections(department: str = "", day: str = "", min_start: int = 0, max_end: int = 24,
                  min_rating: float = 0.0):
    """Search this term's sections of every course, optionally by department, meeting day,
    hours and instructor rating. Returns a list of objects {"section", "course", "department",
    "instructor", "instructor_rating", "days", "start_hour", "end_hour", "seats", "enrolled"}
    (see list_sections) ordered by the instructor's rating, the highest first, then section id.

    Args:
        department: keep only sections of this department's courses (code as returned by
            list_departments(), e.g. "BIO"); "" keeps every department.
        day: keep only sections that meet on this day: one letter of M T W R F (R is Thursday),
            or the day's name; "" keeps every day.
        min_start: keep only sections starting at this hour or later (start_hour >= min_start,
            a whole hour, e.g. 13 for 13:00); 0 keeps all.
        max_end: keep only sections ending at this hour or earlier (end_hour <= max_end);
            24 keeps all.
        min_rating: keep only sections whose instructor is rated at least this (1.0-5.0);
            0 keeps all.
    """
    _department_filter(department)
    letter = _day_letter(day)
    min_start = _whole_hour(min_start, "min_start")
    max_end = _whole_hour(max_end, "max_end")
    _number(min_rating, "min_rating", 0, 5, 4.2)
    rows = _q("SELECT s.id, s.course, c.department, s.instructor, i.rating, s.days, "
              "s.start_hour, s.end_hour, s.seats, s.enrolled FROM sections s "
              "JOIN courses c ON c.code = s.course JOIN instructors i ON i.name = s.instructor "
              "ORDER BY i.rating DESC, s.id")
    return [{"section": r["id"], "course": r["course"], "department": r["department"],
             "instructor": r["instructor"], "instructor_rating": r["rating"], "days": r["days"],
             "start_hour": r["start_hour"], "end_hour": r["end_hour"], "seats": r["seats"],
             "enrolled": r["enrolled"]}
            for r in rows if (not department or r["department"] == department)
            and (not letter or letter in r["days"]) and r["start_hour"] >= min_start
            and r["end_hour"] <= max_end and r["rating"] >= min_rating - 1e-9]
'''

BASE_TOOLS = ["list_departments", "list_courses", "get_course", "list_sections", "get_section",
              "list_instructors", "get_instructor", "find_courses", "find_instructors",
              "find_sections"]

# ------------------------------------------------------------------------------------- world

_WORLDS = {}


def _world(seed):
    if seed in _WORLDS:
        return _WORLDS[seed]
    rng = rng_for("course_planning", seed, "world")
    depts = sorted(rng.sample(_DEPT_POOL, rng.randint(4, 5)))
    taken = []
    bwords = unique_words(rng, len(depts), 2)
    taken += bwords
    departments = [{"code": c, "name": n, "building": bwords[i] + " Hall"}
                   for i, (c, n) in enumerate(depts)]
    instructors = []
    courses = []
    for d in departments:
        k = rng.randint(3, 5)
        firsts = unique_words(rng, k, 2, taken=taken)
        taken += firsts
        lasts = unique_words(rng, k, 2, taken=taken)
        taken += lasts
        for i in range(k):
            instructors.append({"name": firsts[i] + " " + lasts[i], "department": d["code"],
                                "rating": round(rng.uniform(2.4, 5.0), 1)})
        n = rng.randint(8, 11)
        numbers = set()
        tw = unique_words(rng, n, 2, taken=taken)
        taken += tw
        mine = []
        for i in range(n):
            level = rng.choice([100, 100, 100, 200, 200, 200, 300, 300, 400])
            num = level + rng.randint(1, 49)
            while num in numbers:
                num = level + rng.randint(1, 49)
            numbers.add(num)
            mine.append({"code": "%s%d" % (d["code"], num), "department": d["code"],
                         "title": tw[i] + " " + rng.choice(_TITLE_NOUNS),
                         "credits": rng.choice([2, 3, 3, 3, 4, 4, 5]), "level": level,
                         "prereqs": []})
        mine.sort(key=lambda c: c["code"])
        courses += mine
    by_code = {c["code"]: c for c in courses}
    for c in courses:
        if c["level"] == 100:
            continue
        lower = [x["code"] for x in courses if x["department"] == c["department"]
                 and x["level"] < c["level"]]
        k = rng.choice([0, 1, 1, 1, 2, 2])
        if lower and k:
            c["prereqs"] = sorted(rng.sample(lower, min(k, len(lower))))
        if rng.random() < 0.12:
            other = [x["code"] for x in courses if x["department"] != c["department"]
                     and x["level"] == 100 and x["code"] not in c["prereqs"]]
            if other:
                c["prereqs"] = sorted(c["prereqs"] + [rng.choice(other)])
    sections = []
    for c in courses:
        staff = [i["name"] for i in instructors if i["department"] == c["department"]]
        for letter in "ABC"[:rng.choice([1, 1, 2, 2, 2, 3])]:
            days, length = rng.choice(_PATTERNS)
            start = rng.randint(8, 18 - length)
            seats = rng.choice([20, 25, 30, 40, 60])
            enrolled = seats if rng.random() < 0.2 else rng.randint(seats // 2, seats - 1)
            sections.append({"id": "%s-%s" % (c["code"], letter), "course": c["code"],
                             "instructor": rng.choice(staff), "days": days, "start": start,
                             "end": start + length, "seats": seats, "enrolled": enrolled})
    sfirst = unique_words(rng, 5, 2, taken=taken)
    taken += sfirst
    slast = unique_words(rng, 5, 2, taken=taken)
    students = sorted(a + " " + b for a, b in zip(sfirst, slast))
    transcripts = []
    order = sorted(courses, key=lambda c: (c["level"], c["code"]))
    for s in students:
        grades = {}
        share = rng.uniform(0.12, 0.3)
        for term in ("2023-09", "2024-01", "2024-09", "2025-01"):
            chosen = []
            for c in order:
                if c["code"] in grades and grades[c["code"]] != "F":
                    continue
                if any(grades.get(p) not in ("A", "B", "C") for p in c["prereqs"]):
                    continue
                if rng.random() < share * (0.5 if c["level"] >= 300 else 1.0):
                    chosen.append(c["code"])
            for code in chosen[:4]:
                g = rng.choice(_GRADES)
                if code not in grades:
                    transcripts.append({"student": s, "course": code, "term": term, "grade": g})
                    grades[code] = g
    world = {"seed": seed, "departments": departments, "instructors": instructors,
             "courses": courses, "by_code": by_code, "sections": sections,
             "students": students, "transcripts": transcripts}
    _WORLDS[seed] = world
    return world


_SCHEMA = """CREATE TABLE departments (
  code TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  building TEXT NOT NULL
);
CREATE TABLE instructors (
  name TEXT PRIMARY KEY,
  department TEXT NOT NULL REFERENCES departments(code),
  rating REAL NOT NULL            -- 1.0-5.0, one decimal
);
CREATE TABLE courses (
  code TEXT PRIMARY KEY,
  title TEXT NOT NULL,
  department TEXT NOT NULL REFERENCES departments(code),
  credits INTEGER NOT NULL,
  level INTEGER NOT NULL          -- 100, 200, 300, 400
);
CREATE TABLE prerequisites (
  course TEXT NOT NULL REFERENCES courses(code),
  requires TEXT NOT NULL REFERENCES courses(code),
  PRIMARY KEY (course, requires)
);
CREATE TABLE sections (
  id TEXT PRIMARY KEY,
  course TEXT NOT NULL REFERENCES courses(code),
  instructor TEXT NOT NULL REFERENCES instructors(name),
  days TEXT NOT NULL,             -- letters of MTWRF (R = Thursday)
  start_hour INTEGER NOT NULL,
  end_hour INTEGER NOT NULL,
  seats INTEGER NOT NULL,
  enrolled INTEGER NOT NULL
);
CREATE TABLE transcripts (
  student TEXT NOT NULL,
  course TEXT NOT NULL REFERENCES courses(code),
  term TEXT NOT NULL,
  grade TEXT NOT NULL,            -- A B C D F
  PRIMARY KEY (student, course)
);
"""


def _schema_sql(world):
    out = [_SCHEMA]
    out.append(insert_rows("departments", ("code", "name", "building"),
                           [(d["code"], d["name"], d["building"]) for d in world["departments"]]))
    out.append(insert_rows("instructors", ("name", "department", "rating"),
                           [(i["name"], i["department"], i["rating"])
                            for i in world["instructors"]]))
    out.append(insert_rows("courses", ("code", "title", "department", "credits", "level"),
                           [(c["code"], c["title"], c["department"], c["credits"], c["level"])
                            for c in world["courses"]]))
    out.append(insert_rows("prerequisites", ("course", "requires"),
                           [(c["code"], p) for c in world["courses"] for p in c["prereqs"]]))
    out.append(insert_rows("sections", ("id", "course", "instructor", "days", "start_hour",
                                        "end_hour", "seats", "enrolled"),
                           [(s["id"], s["course"], s["instructor"], s["days"], s["start"],
                             s["end"], s["seats"], s["enrolled"]) for s in world["sections"]]))
    out.append(insert_rows("transcripts", ("student", "course", "term", "grade"),
                           [(t["student"], t["course"], t["term"], t["grade"])
                            for t in world["transcripts"]]))
    return "".join(out)


def environment(seed):
    world = _world(seed)
    return {"name": "%s_%d" % (ID, seed),
            "description": "%s Seed %d: %d departments, %d courses, %d sections, %d instructors, "
                           "%d students." % (DESCRIPTION, seed, len(world["departments"]),
                                             len(world["courses"]), len(world["sections"]),
                                             len(world["instructors"]), len(world["students"])),
            "schema_sql": _schema_sql(world)}


# ------------------------------------------------------------------------------------- judges
# SPEC (pasted into every generated source) describes a task's constraints:
#   field         answer key: "instructor", "course", "section", or "sections" (a list of count)
#   count         number of sections of a schedule
#   department    the course's department (instructor mode: the instructor's), None: any
#   min_credits / max_credits / min_level   bounds on the course (inclusive)
#   min_rating    the instructor's rating is at least this
#   meets_day     the section meets on this day letter
#   min_start     the section starts at or after this hour;  max_end: ends at or before this hour
#   free_seat     enrolled < seats
#   student       a student whose transcript matters, with not_taken (no grade other than F in
#                 the course) and prereqs_ok (every prerequisite passed with A, B or C)
#   registered    sections the student already has: the answer's sections may not clash with
#                 them nor be of the same course
#   total_credits [lo, hi] for a schedule (inclusive)
#   conditional   None | {"kind": "early_rating", "before", "min_rating"} | {"kind": "day_end",
#                 "day", "max_end"} | {"kind": "level_cap", "min_level", "max_total"}

_CONSTANTS = '''
PREREQ_GRADES = ("A", "B", "C")
'''

_VERIFIER_BODY = "\n" + synth_common.join_defs(synth_common.VERDICT_RESULT, '''
def _rated(value, bound):
    """value >= bound for one-decimal ratings, tolerant of float noise only."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) \\
        and value >= bound - 1e-9


def _one(db, sql, key):
    rows = db.query(sql, (key,))
    return rows[0] if rows else None


def _grades(db, student):
    return dict((r["course"], r["grade"]) for r in db.query(
        "SELECT course, grade FROM transcripts WHERE student = ?", (student,)))


def _course_reasons(db, code, grades):
    """Reasons the course breaks a course-level rule ([] when none)."""
    c = _one(db, "SELECT code, department, credits, level FROM courses WHERE code = ?", code)
    if c is None:
        return ["unknown course %r" % (code,)]
    out = []
    if SPEC["department"] is not None and c["department"] != SPEC["department"]:
        out.append("%s is not a %s course" % (code, SPEC["department"]))
    if SPEC["min_credits"] is not None and not c["credits"] >= SPEC["min_credits"]:
        out.append("%s is worth %s credits, fewer than %d" % (code, c["credits"],
                                                              SPEC["min_credits"]))
    if SPEC["max_credits"] is not None and not c["credits"] <= SPEC["max_credits"]:
        out.append("%s is worth %s credits, more than %d" % (code, c["credits"],
                                                             SPEC["max_credits"]))
    if SPEC["min_level"] is not None and not c["level"] >= SPEC["min_level"]:
        out.append("%s is a %s-level course, below %d" % (code, c["level"], SPEC["min_level"]))
    if SPEC["student"] is not None:
        if SPEC["not_taken"] and code in grades and grades[code] != "F":
            out.append("%s already took %s (grade %s)" % (SPEC["student"], code, grades[code]))
        if SPEC["prereqs_ok"]:
            for r in db.query("SELECT requires FROM prerequisites WHERE course = ?", (code,)):
                if grades.get(r["requires"]) not in PREREQ_GRADES:
                    out.append("prerequisite %s of %s is not passed with C or better"
                               % (r["requires"], code))
    return out


def _overlap(a, b):
    return any(ch in b["days"] for ch in a["days"]) and a["start_hour"] < b["end_hour"] \\
        and b["start_hour"] < a["end_hour"]


def _section_reasons(db, sid, grades):
    s = _one(db, "SELECT id, course, instructor, days, start_hour, end_hour, seats, enrolled "
                 "FROM sections WHERE id = ?", sid)
    if s is None:
        return None, ["unknown section %r" % (sid,)]
    out = _course_reasons(db, s["course"], grades)
    ins = _one(db, "SELECT rating FROM instructors WHERE name = ?", s["instructor"])
    rating = ins["rating"] if ins is not None else None
    if SPEC["min_rating"] is not None and not _rated(rating, SPEC["min_rating"]):
        out.append("%s is taught by %s, rated %s (below %.1f)" % (sid, s["instructor"], rating,
                                                                 SPEC["min_rating"]))
    if SPEC["meets_day"] is not None and SPEC["meets_day"] not in s["days"]:
        out.append("%s does not meet on day %s" % (sid, SPEC["meets_day"]))
    if SPEC["min_start"] is not None and s["start_hour"] < SPEC["min_start"]:
        out.append("%s starts at %s, before %d:00" % (sid, s["start_hour"], SPEC["min_start"]))
    if SPEC["max_end"] is not None and s["end_hour"] > SPEC["max_end"]:
        out.append("%s ends at %s, after %d:00" % (sid, s["end_hour"], SPEC["max_end"]))
    if SPEC["free_seat"] and not s["enrolled"] < s["seats"]:
        out.append("%s is full (%s of %s seats taken)" % (sid, s["enrolled"], s["seats"]))
    for rid in SPEC["registered"]:
        r = _one(db, "SELECT id, course, days, start_hour, end_hour FROM sections WHERE id = ?",
                 rid)
        if r is None:
            out.append("registered section %s is missing" % rid)
        elif r["course"] == s["course"]:
            out.append("%s is a section of %s, the course of registered section %s"
                       % (sid, s["course"], rid))
        elif _overlap(r, s):
            out.append("%s clashes with registered section %s" % (sid, rid))
    cond = SPEC["conditional"]
    if cond is not None and cond["kind"] == "early_rating":
        if s["start_hour"] < cond["before"] and not _rated(rating, cond["min_rating"]):
            out.append("%s starts before %d:00 but its instructor is rated %s"
                       % (sid, cond["before"], rating))
    if cond is not None and cond["kind"] == "day_end":
        if cond["day"] in s["days"] and s["end_hour"] > cond["max_end"]:
            out.append("%s meets on day %s and ends after %d:00" % (sid, cond["day"],
                                                                    cond["max_end"]))
    return s, out


def _verify(answer, db):
    data, err = _answer(answer)
    if err:
        return _result([err])
    field = SPEC["field"]
    if not isinstance(data, dict):
        return _result(["answer must be a JSON object {\\"%s\\": ...}, got %s"
                        % (field, type(data).__name__)])
    extra = sorted(str(k) for k in data if k != field)
    if extra:
        return _result(["unexpected field(s): %s" % ", ".join(extra)])
    if field not in data:
        return _result(["missing field %r" % field])
    value = data[field]
    grades = _grades(db, SPEC["student"]) if SPEC["student"] is not None else {}
    if SPEC["student"] is not None and not grades:
        return _result(["student %s has no transcript (data problem)" % SPEC["student"]])

    if field == "instructor":
        if not isinstance(value, str):
            return _result(["field 'instructor' must be a string"])
        i = _one(db, "SELECT name, department, rating FROM instructors WHERE name = ?", value)
        if i is None:
            return _result(["unknown instructor %r" % (value,)])
        reasons = []
        if SPEC["department"] is not None and i["department"] != SPEC["department"]:
            reasons.append("%s teaches in %s, not %s" % (value, i["department"],
                                                        SPEC["department"]))
        if SPEC["min_rating"] is not None and not _rated(i["rating"], SPEC["min_rating"]):
            reasons.append("%s is rated %s, below %.1f" % (value, i["rating"], SPEC["min_rating"]))
        return _result(reasons)
    if field == "course":
        if not isinstance(value, str):
            return _result(["field 'course' must be a string"])
        return _result(_course_reasons(db, value, grades))
    if field == "section":
        if not isinstance(value, str):
            return _result(["field 'section' must be a string"])
        return _result(_section_reasons(db, value, grades)[1])

    # a schedule: a list of distinct section ids
    if not isinstance(value, list) or len(value) != SPEC["count"]:
        return _result(["field 'sections' must be a list of exactly %d section ids"
                        % SPEC["count"]])
    if not all(isinstance(v, str) for v in value):
        return _result(["every section id must be a string"])
    if len(set(value)) != len(value):
        return _result(["a section is listed twice"])
    reasons = []
    rows = []
    for sid in value:
        s, why = _section_reasons(db, sid, grades)
        reasons += why
        if s is not None:
            rows.append(s)
    if len(rows) != len(value):
        return _result(reasons)
    courses = [s["course"] for s in rows]
    if len(set(courses)) != len(courses):
        reasons.append("two sections of the same course")
    for a in range(len(rows)):
        for b in range(a + 1, len(rows)):
            if _overlap(rows[a], rows[b]):
                reasons.append("%s and %s clash" % (rows[a]["id"], rows[b]["id"]))
    total = 0
    top = 0
    for code in courses:
        c = _one(db, "SELECT credits, level FROM courses WHERE code = ?", code)
        total += c["credits"]
        top = max(top, c["level"])
    lo, hi = SPEC["total_credits"]
    if not lo <= total <= hi:
        reasons.append("the schedule is worth %d credits, outside %d-%d" % (total, lo, hi))
    cond = SPEC["conditional"]
    if cond is not None and cond["kind"] == "level_cap":
        if top >= cond["min_level"] and total > cond["max_total"]:
            reasons.append("with a %d-level course the schedule may carry at most %d credits"
                           % (cond["min_level"], cond["max_total"]))
    return _result(reasons)
''', synth_common.VERIFY_TOTAL)

# The oracle's core (also run by the generator on an in-memory copy of the database).
_ORACLE_CORE = '''

def _load(db):
    data = {"courses": {}, "prereqs": {}, "sections": {}, "instructors": {}, "grades": {}}
    for r in db.query("SELECT code, department, credits, level FROM courses"):
        data["courses"][r["code"]] = r
    for r in db.query("SELECT course, requires FROM prerequisites"):
        data["prereqs"].setdefault(r["course"], []).append(r["requires"])
    for r in db.query("SELECT id, course, instructor, days, start_hour, end_hour, seats, "
                      "enrolled FROM sections"):
        data["sections"][r["id"]] = r
    for r in db.query("SELECT name, department, rating FROM instructors"):
        data["instructors"][r["name"]] = r
    for r in db.query("SELECT student, course, grade FROM transcripts"):
        data["grades"].setdefault(r["student"], {})[r["course"]] = r["grade"]
    return data


def _tenths(x):
    return int(round(float(x) * 10))


def _cells(s):
    """The (day letter, hour) cells a section occupies each week."""
    return set((ch, h) for ch in s["days"] for h in range(s["start_hour"], s["end_hour"]))


def _eligible(data, spec):
    """The set of values a single answer may take (instructor names, course codes or section
    ids); for a schedule, the sections each of its members may be."""
    field = spec["field"]
    if field == "instructor":
        return set(n for n, i in data["instructors"].items()
                   if (spec["department"] is None or i["department"] == spec["department"])
                   and (spec["min_rating"] is None
                        or _tenths(i["rating"]) >= _tenths(spec["min_rating"])))
    grades = data["grades"].get(spec["student"], {}) if spec["student"] is not None else {}
    if spec["student"] is not None and not grades:
        return set()
    good_courses = set()
    for code, c in data["courses"].items():
        if spec["department"] is not None and c["department"] != spec["department"]:
            continue
        if spec["min_credits"] is not None and c["credits"] < spec["min_credits"]:
            continue
        if spec["max_credits"] is not None and c["credits"] > spec["max_credits"]:
            continue
        if spec["min_level"] is not None and c["level"] < spec["min_level"]:
            continue
        if spec["student"] is not None:
            if spec["not_taken"] and grades.get(code, "F") != "F":
                continue
            if spec["prereqs_ok"] and not all(grades.get(p, "F") in PREREQ_GRADES
                                              for p in data["prereqs"].get(code, ())):
                continue
        good_courses.add(code)
    if field == "course":
        return good_courses
    blocked = set()
    blocked_courses = set()
    for rid in spec["registered"]:
        if rid not in data["sections"]:
            return set()
        blocked |= _cells(data["sections"][rid])
        blocked_courses.add(data["sections"][rid]["course"])
    cond = spec["conditional"] or {"kind": ""}
    out = set()
    for sid, s in data["sections"].items():
        if s["course"] not in good_courses or s["course"] in blocked_courses:
            continue
        if _cells(s) & blocked:
            continue
        tenths = _tenths(data["instructors"][s["instructor"]]["rating"])
        if spec["min_rating"] is not None and tenths < _tenths(spec["min_rating"]):
            continue
        if spec["meets_day"] is not None and spec["meets_day"] not in s["days"]:
            continue
        if spec["min_start"] is not None and s["start_hour"] < spec["min_start"]:
            continue
        if spec["max_end"] is not None and s["end_hour"] > spec["max_end"]:
            continue
        if spec["free_seat"] and s["enrolled"] >= s["seats"]:
            continue
        if cond["kind"] == "early_rating" and s["start_hour"] < cond["before"] \\
                and tenths < _tenths(cond["min_rating"]):
            continue
        if cond["kind"] == "day_end" and cond["day"] in s["days"] \\
                and s["end_hour"] > cond["max_end"]:
            continue
        out.add(sid)
    return out


def _schedule_ok(data, spec, ids, eligible):
    """Whether the list of section ids is an acceptable schedule (members from `eligible`)."""
    if len(ids) != spec["count"] or len(frozenset(ids)) != spec["count"]:
        return False
    if not frozenset(ids) <= eligible:
        return False
    grid = set()
    seen = set()
    total = 0
    top = 0
    for sid in ids:
        s = data["sections"][sid]
        if s["course"] in seen:
            return False
        seen.add(s["course"])
        cells = _cells(s)
        if cells & grid:
            return False
        grid |= cells
        total += data["courses"][s["course"]]["credits"]
        top = max(top, data["courses"][s["course"]]["level"])
    if not spec["total_credits"][0] <= total <= spec["total_credits"][1]:
        return False
    cond = spec["conditional"]
    if cond is not None and cond["kind"] == "level_cap" and top >= cond["min_level"] \\
            and total > cond["max_total"]:
        return False
    return True
'''

_ORACLE_BODY = "\n" + synth_common.join_defs(synth_common.VERDICT_NO, '''
def verify(answer, db):
    try:
        answer, err = _answer(answer)
        if err:
            return _no([err])
        field = SPEC["field"]
        if type(answer) is not dict or list(answer) != [field]:
            return _no(["the answer must be an object with the single key " + field])
        value = answer[field]
        data = _load(db)
        eligible = _eligible(data, SPEC)
        if field == "sections":
            if type(value) is not list or any(type(v) is not str for v in value):
                return _no(["sections must be a list of strings"])
            ok = _schedule_ok(data, SPEC, value, eligible)
        else:
            ok = type(value) is str and value in eligible
        if not ok:
            return _no(["not an acceptable answer"])
        return {"passed": True, "score": 1.0, "reasons": []}
    except Exception as exc:
        return _no(["oracle error: %s" % type(exc).__name__])
''')

_SOLUTION_BODY = '''

def _clash(a, b):
    return bool(set(a["days"]) & set(b["days"])) and a["start_hour"] < b["end_hour"] \\
        and b["start_hour"] < a["end_hour"]


def solve(tools):
    field = SPEC["field"]
    depts = ([SPEC["department"]] if SPEC["department"] is not None
             else [d["code"] for d in tools.list_departments()])
    if field == "instructor":
        for dept in depts:
            for name in tools.list_instructors(dept):
                info = tools.get_instructor(name)
                if SPEC["min_rating"] is None or info["rating"] >= SPEC["min_rating"] - 1e-9:
                    return {"instructor": name}
        return {"instructor": ""}
    grades = {}
    if SPEC["student"] is not None:
        for row in tools.get_transcript(SPEC["student"]):
            grades[row["course"]] = row["grade"]
    courses = []
    for dept in depts:
        for c in tools.list_courses(dept):
            if SPEC["min_credits"] is not None and c["credits"] < SPEC["min_credits"]:
                continue
            if SPEC["max_credits"] is not None and c["credits"] > SPEC["max_credits"]:
                continue
            if SPEC["min_level"] is not None and c["level"] < SPEC["min_level"]:
                continue
            if SPEC["not_taken"] and grades.get(c["code"], "F") != "F":
                continue
            if SPEC["prereqs_ok"]:
                pre = tools.get_course(c["code"])["prerequisites"]
                if any(grades.get(p) not in PREREQ_GRADES for p in pre):
                    continue
            courses.append(c)
    if field == "course":
        return {"course": courses[0]["code"] if courses else ""}
    registered = [tools.get_section(r) for r in SPEC["registered"]]
    taken_courses = set(r["course"] for r in registered)
    ratings = {}
    cond = SPEC["conditional"] or {"kind": ""}
    pool = []
    for c in courses:
        if c["code"] in taken_courses:
            continue
        for s in tools.list_sections(c["code"]):
            if SPEC["meets_day"] is not None and SPEC["meets_day"] not in s["days"]:
                continue
            if SPEC["min_start"] is not None and s["start_hour"] < SPEC["min_start"]:
                continue
            if SPEC["max_end"] is not None and s["end_hour"] > SPEC["max_end"]:
                continue
            if SPEC["free_seat"] and s["enrolled"] >= s["seats"]:
                continue
            if any(_clash(s, r) for r in registered):
                continue
            if cond["kind"] == "day_end" and cond["day"] in s["days"] \\
                    and s["end_hour"] > cond["max_end"]:
                continue
            needs_rating = SPEC["min_rating"] is not None or (
                cond["kind"] == "early_rating" and s["start_hour"] < cond["before"])
            if needs_rating:
                if s["instructor"] not in ratings:
                    ratings[s["instructor"]] = tools.get_instructor(s["instructor"])["rating"]
                r = ratings[s["instructor"]]
                if SPEC["min_rating"] is not None and r < SPEC["min_rating"] - 1e-9:
                    continue
                if cond["kind"] == "early_rating" and s["start_hour"] < cond["before"] \\
                        and r < cond["min_rating"] - 1e-9:
                    continue
            s = dict(s)
            s["course"] = c["code"]
            s["credits"] = c["credits"]
            s["level"] = c["level"]
            pool.append(s)
    if field == "section":
        return {"section": pool[0]["section"] if pool else ""}
    lo, hi = SPEC["total_credits"]
    for combo in itertools.combinations(pool, SPEC["count"]):
        if len(set(s["course"] for s in combo)) != len(combo):
            continue
        if any(_clash(a, b) for a, b in itertools.combinations(combo, 2)):
            continue
        total = sum(s["credits"] for s in combo)
        if not lo <= total <= hi:
            continue
        if cond["kind"] == "level_cap" and max(s["level"] for s in combo) >= cond["min_level"] \\
                and total > cond["max_total"]:
            continue
        return {"sections": [s["section"] for s in combo]}
    return {"sections": []}
'''

# Levels 1 and 2: one search whose filter arguments are all of the task's constraints (find_courses
# also lists the most credits first, find_instructors and find_sections the highest rating first),
# so every row it returns, the first one too, is an answer.
_SEARCH_SOLUTION_BODY = '''

def solve(tools):
    field = SPEC["field"]
    department = SPEC["department"] or ""
    if field == "course":
        rows = tools.find_courses(department=department, min_credits=SPEC["min_credits"] or 0)
        return {"course": rows[0]["code"] if rows else ""}
    min_rating = SPEC["min_rating"] if SPEC["min_rating"] is not None else 0.0
    if field == "instructor":
        rows = tools.find_instructors(department=department, min_rating=min_rating)
        return {"instructor": rows[0]["name"] if rows else ""}
    rows = tools.find_sections(department=department, day=SPEC["meets_day"] or "",
                               min_start=SPEC["min_start"] or 0,
                               max_end=SPEC["max_end"] if SPEC["max_end"] is not None else 24,
                               min_rating=min_rating)
    return {"section": rows[0]["section"] if rows else ""}
'''

# The search tool of each answer field and the constraints it takes as filters.
_SEARCHES = {"course": ("find_courses", ("department", "min_credits")),
             "instructor": ("find_instructors", ("department", "min_rating")),
             "section": ("find_sections", ("department", "meets_day", "min_start", "max_end",
                                           "min_rating"))}


def _search_tool(spec):
    """The search that answers the spec in one call (its filters take every constraint), or
    None when the spec has a constraint no search filters on."""
    if spec["field"] not in _SEARCHES or spec["student"] is not None or spec["registered"] \
            or spec["conditional"] is not None or spec["free_seat"] \
            or spec["total_credits"] is not None:
        return None
    tool, filters = _SEARCHES[spec["field"]]
    if any(spec[k] is not None and k not in filters
           for k in ("department", "min_credits", "max_credits", "min_level", "min_rating",
                     "meets_day", "min_start", "max_end")):
        return None
    return tool


_SEARCH_NOTES = {
    "find_courses": "find_courses lists the courses that pass its filters (department, "
                    "min_credits), the most credits first.",
    "find_instructors": "find_instructors lists the instructors that pass its filters "
                        "(department, min_rating), the highest rated first.",
    "find_sections": "find_sections lists this term's sections that pass its filters "
                     "(department, day, min_start, max_end, min_rating), the highest-rated "
                     "instructor first.",
}


_ORACLE_NOTE = ("# Independent of verifier.py: reads the tables in bulk, computes the set of "
                "eligible values,\n# tests a schedule on an hour grid, and decides by "
                "membership.\n\n")


def _sources(task_id, spec, search=None):
    """verifier, oracle and solution; search: the one search tool of a level-1/2 solution."""
    verifier = spec_source("Verifier", ID, task_id, spec,
                           _CONSTANTS + synth_common.ANSWER_ENVELOPE + _VERIFIER_BODY)
    oracle = spec_source("Oracle", ID, task_id, spec,
                         _CONSTANTS + synth_common.ANSWER_ENVELOPE + _ORACLE_CORE + _ORACLE_BODY,
                         note=_ORACLE_NOTE)
    if search is not None:
        solution = spec_source("Reference solution (one %s search)" % search, ID, task_id, spec,
                               _SEARCH_SOLUTION_BODY)
    else:
        solution = spec_source("Reference solution", ID, task_id, spec,
                               _CONSTANTS + _SOLUTION_BODY, imports=("itertools", "json"))
    return verifier, oracle, solution


_CORE = synth_common.OracleCore(_CONSTANTS + _ORACLE_CORE, "<course_planning oracle core>",
                                lambda seed: _schema_sql(_world(seed)))


def _accepted(seed, spec, cap=None):
    """The acceptable answers: a set of values, or for a schedule a list of sorted tuples
    (stops after `cap` of them when cap is given)."""
    ns = _CORE.ns
    data = _CORE.data(seed)
    eligible = ns["_eligible"](data, spec)
    if spec["field"] != "sections":
        return eligible
    out = []
    for combo in itertools.combinations(sorted(eligible), spec["count"]):
        if ns["_schedule_ok"](data, spec, list(combo), eligible):
            out.append(combo)
            if cap is not None and len(out) >= cap:
                break
    return out


# ------------------------------------------------------------------------------------- tasks

_THEMES = ("course_pick", "instructor_pick", "timetable")


def _base_spec():
    return {"field": "course", "count": 1, "department": None, "min_credits": None,
            "max_credits": None, "min_level": None, "min_rating": None, "meets_day": None,
            "min_start": None, "max_end": None, "free_seat": False, "student": None,
            "not_taken": False, "prereqs_ok": False, "registered": [], "total_credits": None,
            "conditional": None}


def _domain_size(world, spec):
    n = {"instructor": len(world["instructors"]), "course": len(world["courses"]),
         "section": len(world["sections"]), "sections": len(world["sections"])}[spec["field"]]
    return n ** spec["count"] if spec["field"] == "sections" else n


# The bands do not overlap, so the acceptance rate falls with the level.
_BANDS = {1: (0.3, 0.75), 2: (0.05, 0.28), 3: (0.0, 0.05)}
_SCHEDULE_BAND = (1, 25)


def _pick(world, seed, level, draw, rng, prev=None, tries=120):
    """(spec, acceptable) of a draw sized for the level's band (see draw_in_band); a schedule has
    its own band of counts. prev = (accepted, space size) of the lineage's level before (see
    band_limits) bounds a single-value answer only."""
    def measure(spec):
        if spec["field"] == "sections":
            return (_accepted(seed, spec, cap=_SCHEDULE_BAND[1] + 40),) + _SCHEDULE_BAND
        acc = _accepted(seed, spec)
        return (acc,) + synth_common.band_limits(_BANDS[level], _domain_size(world, spec), prev)

    picked = synth_common.draw_in_band(rng, draw, measure, level, tries if level < 4 else 60)
    if picked is None:
        raise RuntimeError("course_planning: no solvable draw for seed %d level %d"
                           % (seed, level))
    return picked


def _draw(world, seed, theme, level):
    depts = [d["code"] for d in world["departments"]]
    credits = sorted(set(c["credits"] for c in world["courses"]))
    ratings = sorted(set(i["rating"] for i in world["instructors"]))
    letters = "MTWRF"

    def schedule(s, rng):
        s["field"] = "sections"
        s["count"] = 3
        s["student"] = rng.choice(world["students"])
        s["not_taken"] = s["prereqs_ok"] = s["free_seat"] = True
        lo = rng.randint(8, 11)
        s["total_credits"] = [lo, lo + rng.choice([0, 0, 1, 2])]
        r = rng.random()
        if r < 0.3:
            s["min_start"] = rng.randint(9, 11)
        elif r < 0.6:
            s["max_end"] = rng.randint(14, 17)

    def d(rng):
        s = _base_spec()
        if theme == "course_pick":
            if level == 1:
                s["min_credits"] = rng.choice(credits[1:])
            elif level == 2:
                s["department"] = rng.choice(depts)
                s["min_credits"] = rng.choice(credits[1:])
            elif level == 3:
                s["student"] = rng.choice(world["students"])
                s["not_taken"] = s["prereqs_ok"] = True
                s["department"] = rng.choice(depts)
                s["min_level"] = rng.choice([200, 200, 300])
                if rng.random() < 0.5:
                    s["min_credits"] = rng.choice(credits[1:])
            else:
                schedule(s, rng)
                s["conditional"] = {"kind": "level_cap", "min_level": rng.choice([200, 300]),
                                    "max_total": s["total_credits"][0] + rng.choice([-1, 0])}
        elif theme == "instructor_pick":
            if level == 1:
                s["field"] = "instructor"
                s["min_rating"] = rng.choice(ratings[1:])
            elif level == 2:
                s["field"] = "section"
                s["department"] = rng.choice(depts)
                s["min_rating"] = rng.choice(ratings[1:])
            elif level == 3:
                s["field"] = "section"
                s["student"] = rng.choice(world["students"])
                s["not_taken"] = s["prereqs_ok"] = s["free_seat"] = True
                s["min_rating"] = rng.choice(ratings[len(ratings) // 3:])
                if rng.random() < 0.5:
                    s["department"] = rng.choice(depts)
            else:
                schedule(s, rng)
                s["conditional"] = {"kind": "early_rating",
                                    "before": rng.choice([10, 11, 12, 13]),
                                    "min_rating": rng.choice([3.8, 4.0, 4.2, 4.5])}
        else:  # timetable
            if level == 1:
                s["field"] = "section"
                s["meets_day"] = rng.choice(letters)
            elif level == 2:
                s["field"] = "section"
                s["meets_day"] = rng.choice(letters)
                if rng.random() < 0.5:
                    s["min_start"] = rng.randint(10, 15)
                else:
                    s["max_end"] = rng.randint(11, 14)
            elif level == 3:
                s["field"] = "section"
                s["student"] = rng.choice(world["students"])
                s["not_taken"] = s["prereqs_ok"] = s["free_seat"] = True
                s["registered"] = [rng.choice(world["sections"])["id"]]
                if rng.random() < 0.5:
                    s["min_start"] = rng.randint(9, 13)
                else:
                    s["meets_day"] = rng.choice(letters)
            else:
                schedule(s, rng)
                s["conditional"] = {"kind": "day_end", "day": rng.choice(letters),
                                    "max_end": rng.randint(11, 14)}
                s["registered"] = [rng.choice(world["sections"])["id"]]
        return s
    return d


_DAY_RULE = ("Sections meet every week on the days of their \"days\" string (M Monday, T "
             "Tuesday, W Wednesday, R Thursday, F Friday) from start_hour:00 to end_hour:00.")
_CLASH_RULE = ("Two sections clash when they share a day letter and their hours overlap (one "
               "ending at 11 and another starting at 11 do not clash).")
_TRANSCRIPT_RULE = ("Use the student's transcript (get_transcript): a prerequisite counts as "
                    "satisfied only when the student earned A, B or C in it (D, F or not taken "
                    "does not satisfy it); a course the student has already taken with any "
                    "grade other than F may not be taken again (a course failed with F may).")


def _hour(h):
    return "%02d:00" % h


def _dept_name(world, code):
    return next(d["name"] for d in world["departments"] if d["code"] == code)


def _rules(world, spec):
    rules = []
    field = spec["field"]
    if spec["department"] is not None:
        if field == "instructor":
            rules.append("the instructor teaches in the %s department (%s)"
                         % (quoted(_dept_name(world, spec["department"])),
                            quoted(spec["department"])))
        else:
            rules.append("the course belongs to the %s department (code %s)"
                         % (quoted(_dept_name(world, spec["department"])),
                            quoted(spec["department"])))
    if spec["min_credits"] is not None:
        rules.append("the course is worth at least %d credits" % spec["min_credits"])
    if spec["max_credits"] is not None:
        rules.append("the course is worth at most %d credits" % spec["max_credits"])
    if spec["min_level"] is not None:
        rules.append("the course's level is %d or higher" % spec["min_level"])
    if spec["not_taken"]:
        rules.append("%s has not already taken %s (a grade other than F counts as taken)"
                     % (quoted(spec["student"]), "any of the courses" if field == "sections"
                        else "the course"))
    if spec["prereqs_ok"]:
        rules.append("%s has passed every prerequisite of %s with A, B or C"
                     % (quoted(spec["student"]),
                        "each course" if field == "sections" else "the course"))
    each = "every section" if field == "sections" else "the section"
    if spec["min_rating"] is not None:
        rules.append("%s's instructor is rated at least %.1f" % (each, spec["min_rating"])
                     if field != "instructor" else
                     "the instructor's rating is at least %.1f" % spec["min_rating"])
    if spec["meets_day"] is not None:
        rules.append("%s meets on %s (its days contain %s)"
                     % (each, DAY_NAMES[spec["meets_day"]], spec["meets_day"]))
    if spec["min_start"] is not None:
        rules.append("%s starts at %s or later" % (each, _hour(spec["min_start"])))
    if spec["max_end"] is not None:
        rules.append("%s ends at %s or earlier" % (each, _hour(spec["max_end"])))
    if spec["free_seat"]:
        rules.append("%s has a free seat (enrolled is less than seats)"
                     % ("every section" if field == "sections" else "the section"))
    for rid in spec["registered"]:
        rules.append("%s is already registered in section %s: %s may neither clash with it "
                     "nor be a section of its course" % (quoted(spec["student"]), quoted(rid),
                                                         "each chosen section"
                                                         if field == "sections"
                                                         else "the section"))
    if field == "sections":
        rules.append("the %d sections belong to %d different courses and no two of them clash"
                     % (spec["count"], spec["count"]))
        lo, hi = spec["total_credits"]
        if lo == hi:
            rules.append("the total credits of the %d courses are exactly %d"
                         % (spec["count"], lo))
        else:
            rules.append("the total credits of the %d courses are between %d and %d inclusive"
                         % (spec["count"], lo, hi))
    c = spec["conditional"]
    if c is not None:
        if c["kind"] == "level_cap":
            rules.append("if any chosen course has level %d or higher, the total credits must "
                         "be at most %d (no extra limit otherwise)" % (c["min_level"],
                                                                       c["max_total"]))
        elif c["kind"] == "early_rating":
            rules.append("a section that starts before %s must be taught by an instructor "
                         "rated at least %.1f (no rating rule for later sections)"
                         % (_hour(c["before"]), c["min_rating"]))
        else:
            rules.append("a section that meets on %s (day %s) must end at %s or earlier (no "
                         "extra rule for sections not meeting on %s)"
                         % (DAY_NAMES[c["day"]], c["day"], _hour(c["max_end"]),
                            DAY_NAMES[c["day"]]))
    return rules


def _prompt(world, spec, search=None):
    field = spec["field"]
    if field == "instructor":
        intro = "Using the tools, name any instructor who satisfies all of the following."
        form = '{"instructor": "<instructor name>"}'
    elif field == "course":
        who = (" that %s could take next term" % quoted(spec["student"])
               if spec["student"] else "")
        intro = "Using the tools, name any course%s satisfying all of the following." % who
        form = '{"course": "<course code, e.g. BIO214>"}'
    elif field == "section":
        who = (" for %s" % quoted(spec["student"])) if spec["student"] else ""
        intro = ("Using the tools, name any section (of any course) this term%s satisfying all "
                 "of the following." % who)
        form = '{"section": "<section id, e.g. BIO214-A>"}'
    else:
        intro = ("Using the tools, build a term schedule for %s: choose exactly %d sections "
                 "such that all of the following hold." % (quoted(spec["student"]),
                                                            spec["count"]))
        form = ('{"sections": ["<section id>", "<section id>", "<section id>"]} (any order)')
    rules = _rules(world, spec)
    text = intro + "\nRules:\n" + "".join("- %s;\n" % r for r in rules).rstrip(";\n") + ".\n"
    notes = []
    if field in ("section", "sections"):
        notes.append(_DAY_RULE)
    if spec["registered"] or field == "sections":
        notes.append(_CLASH_RULE)
    if spec["student"] is not None:
        notes.append(_TRANSCRIPT_RULE)
    if spec["min_rating"] is not None or spec["min_credits"] is not None \
            or (spec["conditional"] or {}).get("kind") == "early_rating":
        notes.append("\"At least\" includes equality.")
    if search is not None:
        notes.append("One search answers this: " + _SEARCH_NOTES[search])
    if notes:
        text += " ".join(notes) + "\n"
    return (text + "Any answer that satisfies every rule is accepted. Submit only a JSON object "
            "of the form %s, with codes and names spelled exactly as the tools return them, and "
            "nothing else." % form)


def _schema(spec, theme):
    field = spec["field"]
    if field == "sections":
        prop = {"type": "array", "minItems": spec["count"], "maxItems": spec["count"],
                "uniqueItems": True,
                "items": {"type": "string", "minLength": 1, "x-domain": "sections.id"},
                "description": "The section ids of the schedule, any order."}
    else:
        dom = {"instructor": "instructors.name", "course": "courses.code",
               "section": "sections.id"}[field]
        prop = {"type": "string", "minLength": 1, "x-domain": dom,
                "description": "Exact %s." % {"instructor": "instructor name",
                                              "course": "course code",
                                              "section": "section id"}[field]}
    return object_schema("course_planning %s answer" % theme, {field: prop})


def _tools_of(spec):
    names = set(["list_departments"]) if spec["department"] is None else set()
    if spec["field"] == "instructor":
        names |= {"list_instructors", "get_instructor"}
    else:
        names.add("list_courses")
        if spec["prereqs_ok"]:
            names.add("get_course")
        if spec["student"] is not None:
            names.add("get_transcript")
        if spec["field"] in ("section", "sections"):
            names.add("list_sections")
            if spec["registered"]:
                names.add("get_section")
            if spec["min_rating"] is not None or (
                    (spec["conditional"] or {}).get("kind") == "early_rating"):
                names.add("get_instructor")
    return [n for n in TOOLS if n in names]


def _constraint_count(spec):
    n = sum(spec[k] is not None for k in ("department", "min_credits", "max_credits", "min_level",
                                          "min_rating", "meets_day", "min_start", "max_end",
                                          "total_credits", "conditional"))
    n += spec["free_seat"] + spec["not_taken"] + spec["prereqs_ok"] + len(spec["registered"])
    if spec["field"] == "sections":
        n += 2  # distinct courses, no clash
    return n


_CHOSEN = {}


def _choose(seed, lineage, level, attempt):
    """(spec, acceptable) of a task; level L's draw is sized below level L-1's share."""
    key = (seed, lineage, level, attempt)
    if key not in _CHOSEN:
        world = _world(seed)
        theme = _THEMES[lineage % len(_THEMES)]
        prev = None
        if 1 < level < 4:
            pspec, pacc = _choose(seed, lineage, level - 1, attempt)
            prev = (len(pacc), _domain_size(world, pspec))
        rng = rng_for("course_planning", seed, "task", lineage, level, attempt)
        _CHOSEN[key] = _pick(world, seed, level, _draw(world, seed, theme, level), rng, prev)
    return _CHOSEN[key]


def task(seed, lineage, level, attempt):
    world = _world(seed)
    theme = _THEMES[lineage % len(_THEMES)]
    spec, acc = _choose(seed, lineage, level, attempt)
    task_id = "%s_l%d_%d" % (theme, level, lineage)
    search = _search_tool(spec) if level <= 2 else None
    if level <= 2 and search is None:
        raise RuntimeError("course_planning: level %d task %s is not one search"
                           % (level, task_id))
    verifier, oracle, solution = _sources(task_id, spec, search)
    size = _domain_size(world, spec)
    list_size = {"instructor": len(world["instructors"]), "course": len(world["courses"]),
                 "section": len(world["sections"]),
                 "sections": len(world["sections"])}[spec["field"]]
    hops = 1
    hops += spec["field"] in ("section", "sections")
    hops += spec["min_rating"] is not None and spec["field"] != "instructor"
    hops += spec["student"] is not None
    hops += spec["prereqs_ok"]
    hops += bool(spec["registered"])
    distractors = list_size - (len(acc) if spec["field"] != "sections" else 0)
    if search is not None:
        # one call whose filters are the constraints: every row it lists is an answer
        hops, list_size, distractors = 1, len(acc), 0
    knobs = {"template": theme, "theme": theme, "level": level, "lineage": lineage,
             "attempt": attempt, "constraints": _constraint_count(spec), "hops": hops,
             "list_size": list_size, "distractors": distractors,
             "hidden_steps": int(spec["student"] is not None) + len(spec["registered"]),
             "conditional_rules": int(spec["conditional"] is not None),
             "answer_space": size, "answer_field": spec["field"]}
    if spec["field"] == "sections":
        knobs["acceptable_schedules"] = len(acc)
        knobs["acceptable_schedules_capped_at"] = _SCHEDULE_BAND[1] + 40
        knobs["schedule_size"] = spec["count"]
    else:
        knobs["acceptable_answers"] = len(acc)
    if search is not None:
        knobs["search"] = search
    return {"id": task_id, "prompt": _prompt(world, spec, search),
            "answer_schema": _schema(spec, theme), "knobs": knobs, "solution": solution,
            "verifier": verifier, "oracle": oracle,
            "tools": [search] if search is not None else _tools_of(spec)}
