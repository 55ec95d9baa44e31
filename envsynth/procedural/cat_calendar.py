"""Procedural category "calendar": people, meeting rooms with capacity and equipment, and a work
week of existing meetings (whole hours, office time; people may sit in other time zones).

Tasks go from "name a room free at this hour" to scheduling a meeting for several people in a
room under capacity, equipment, working-hours (time zone) and conditional rules. Every task is a
"find any X" task: the verifier checks the submitted room/day/hour against the pristine database
constraint by constraint; the oracle computes the whole set of acceptable answers from one bulk
read of the tables and tests membership. The generator uses the oracle's own code (run on an
in-memory copy of the database) to draw parameters whose acceptable set is non-empty and small
enough for the level.

Levels 1 and 2 are one search: find_rooms takes the task's filters (min_capacity, equipment, a
day, start_hour and duration to be free) and find_rooms_for_meeting takes the meeting to re-house
(and whether its equipment must come along); both return only rooms passing every filter, the
smallest room first, so the gold answer is the first row. Levels 3 and 4 (free hours, people,
time zones, conditional rules) scan the rooms and schedules with the other tools.
"""

import synth_common
from synth_common import insert_rows, object_schema, quoted, rng_for, spec_source, unique_words

ID = "calendar"
TITLE = "Meeting rooms and team calendars"
DESCRIPTION = ("A company's meeting rooms (building, floor, capacity, equipment), its people "
               "(team, time zone, working hours) and one work week of existing meetings in "
               "office time. Tasks range from finding a room that is free at a given hour to "
               "scheduling a meeting for several people under capacity, equipment, time-zone "
               "and conditional rules.")
MAX_LEVEL = 4

DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
OPEN_HOUR = 8
CLOSE_HOUR = 18
ITEMS = ["projector", "speakerphone", "video_conference", "whiteboard"]
_ITEM_WORDS = {"projector": "a projector", "speakerphone": "a speakerphone",
               "video_conference": "a video_conference unit", "whiteboard": "a whiteboard"}
_TEAM_POOL = ["Platform", "Design", "Finance", "Research", "Sales", "Legal", "Support", "Data",
              "Marketing", "Operations"]
_TITLE_POOL = ["Engineer", "Senior Engineer", "Manager", "Analyst", "Designer", "Director",
               "Coordinator", "Scientist"]
_MEETING_TITLES = ["Sprint review", "Planning", "Design critique", "Budget sync", "Roadmap review",
                   "Hiring panel", "Retrospective", "Status update", "Customer demo", "Training",
                   "Architecture review", "Quarterly review", "Onboarding", "Incident review"]
_CALL_TITLES = ["Focus time", "Remote call", "Vendor call", "Interview", "Customer call",
                "Doctor appointment"]
_BUILDING_SUFFIX = ["House", "Hall", "Court", "Tower"]
_ITEM_P = {"projector": 0.55, "speakerphone": 0.45, "video_conference": 0.4, "whiteboard": 0.6}

# ------------------------------------------------------------------------------------- tools

PREAMBLE = '''"""Calendar tools over a company's meeting rooms, people and a week of meetings.

The runtime injects a module global ``db`` before any tool is called:
``db.query(sql, params=()) -> list[dict]``. Public functions are tools; helpers start with ``_``.

Times: every day/hour is office time. Days are "Monday" .. "Friday"; hours are whole hours
(integers); a meeting with start_hour 10 and end_hour 12 occupies 10:00-12:00. The office day
runs from 08:00 to 18:00. Names must be given exactly as the listing tools return them.
"""

_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]

''' + synth_common.join_defs(synth_common.TOOL_QUERY, synth_common.TOOL_REQUIRE_STR, '''
def _hint(table, name):
    key = " ".join(str(name).lower().split())
    rows = _q("SELECT name FROM %s ORDER BY name" % table)
    close = [r["name"] for r in rows if key and (key in r["name"].lower()
                                                 or r["name"].lower() in key)]
    return close[:3]


def _check_room(room):
    _require_str(room, "room")
    if not _q("SELECT 1 AS ok FROM rooms WHERE name = ?", (room,)):
        hint = _hint("rooms", room)
        raise ValueError("unknown room %r; %s" % (room, "did you mean: " + ", ".join(
            repr(h) for h in hint) + "?" if hint else "call list_rooms() for the room names"))


def _check_person(person):
    _require_str(person, "person")
    if not _q("SELECT 1 AS ok FROM people WHERE name = ?", (person,)):
        hint = _hint("people", person)
        raise ValueError("unknown person %r; %s" % (person, "did you mean: " + ", ".join(
            repr(h) for h in hint) + "?" if hint else "call list_people() for the names"))


def _check_day(day):
    if day not in _DAYS:
        raise ValueError("day must be one of %s (capitalised weekday name), got %r"
                         % (", ".join(_DAYS), day))


def _whole(value, name):
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("%s must be a whole number, got %r" % (name, value))


def _rooms_found(min_capacity, items, day, start, end, other_than):
    """Rows of the rooms seating min_capacity with every item of `items`, free over [start, end)
    on `day` when a day is given, other than the room `other_than`; smallest first."""
    have = {}
    for r in _q("SELECT room, item FROM room_equipment ORDER BY room, item"):
        have.setdefault(r["room"], []).append(r["item"])
    busy = set()
    if day:
        busy = set(r["room"] for r in _q(
            "SELECT room FROM meetings WHERE day = ? AND room IS NOT NULL AND start_hour < ? "
            "AND end_hour > ?", (day, end, start)))
    out = []
    for r in _q("SELECT name, building, floor, capacity FROM rooms WHERE capacity >= ? "
                "ORDER BY capacity, name", (min_capacity,)):
        equipment = have.get(r["name"], [])
        if r["name"] == other_than or r["name"] in busy or any(i not in equipment
                                                               for i in items):
            continue
        out.append({"name": r["name"], "building": r["building"], "floor": r["floor"],
                    "capacity": r["capacity"], "equipment": equipment})
    return out
''')

TOOLS = {}

TOOLS["list_rooms"] = '''
def list_rooms(building: str = ""):
    """List the names of the meeting rooms, sorted alphabetically, optionally only those of one
    building. Use get_room for a room's capacity and equipment.

    Args:
        building: exact building name to filter by; "" (the default) lists every room.
    """
    if not isinstance(building, str):
        raise ValueError("building must be a string")
    if building == "":
        return [r["name"] for r in _q("SELECT name FROM rooms ORDER BY name")]
    rows = _q("SELECT name FROM rooms WHERE building = ? ORDER BY name", (building,))
    if not rows:
        known = [r["building"] for r in _q("SELECT DISTINCT building FROM rooms ORDER BY building")]
        raise ValueError("unknown building %r; the buildings are: %s"
                         % (building, ", ".join(known)))
    return [r["name"] for r in rows]
'''

TOOLS["get_room"] = '''
def get_room(room: str):
    """Facts about one meeting room: {"name", "building", "floor", "capacity" (the most people
    it seats, integer), "equipment" (sorted list of items among "projector", "speakerphone",
    "video_conference", "whiteboard")}.

    Args:
        room: exact room name as returned by list_rooms().
    """
    _check_room(room)
    row = _q("SELECT name, building, floor, capacity FROM rooms WHERE name = ?", (room,))[0]
    items = [r["item"] for r in _q("SELECT item FROM room_equipment WHERE room = ? ORDER BY item",
                                   (room,))]
    return {"name": row["name"], "building": row["building"], "floor": row["floor"],
            "capacity": row["capacity"], "equipment": items}
'''

TOOLS["get_room_bookings"] = '''
def get_room_bookings(room: str, day: str):
    """The bookings of one room on one day, ordered by start hour: a list of {"meeting" (id),
    "title", "start_hour", "end_hour"} in office time. A room is free at every hour no booking
    covers; a booking from 10 to 12 covers the hours 10:00-12:00 (it does not overlap a meeting
    starting at 12). An empty list means the room is free all day.

    Args:
        room: exact room name as returned by list_rooms().
        day: weekday name, one of "Monday", "Tuesday", "Wednesday", "Thursday", "Friday".
    """
    _check_room(room)
    _check_day(day)
    rows = _q("SELECT id, title, start_hour, end_hour FROM meetings WHERE room = ? AND day = ? "
              "ORDER BY start_hour, id", (room, day))
    return [{"meeting": r["id"], "title": r["title"], "start_hour": r["start_hour"],
             "end_hour": r["end_hour"]} for r in rows]
'''

TOOLS["list_people"] = '''
def list_people(team: str = ""):
    """List the names of the people, sorted alphabetically, optionally only one team's.

    Args:
        team: exact team name to filter by; "" (the default) lists everybody.
    """
    if not isinstance(team, str):
        raise ValueError("team must be a string")
    if team == "":
        return [r["name"] for r in _q("SELECT name FROM people ORDER BY name")]
    rows = _q("SELECT name FROM people WHERE team = ? ORDER BY name", (team,))
    if not rows:
        known = [r["team"] for r in _q("SELECT DISTINCT team FROM people ORDER BY team")]
        raise ValueError("unknown team %r; the teams are: %s" % (team, ", ".join(known)))
    return [r["name"] for r in rows]
'''

TOOLS["get_person"] = '''
def get_person(person: str):
    """Facts about one person: {"name", "team", "title", "tz_offset_hours", "work_start",
    "work_end"}. tz_offset_hours is how many hours the person's local clock is ahead of office
    time (negative: behind), so local hour = office hour + tz_offset_hours. work_start and
    work_end are the person's working hours in their LOCAL time (e.g. 9 and 17).

    Args:
        person: exact name as returned by list_people().
    """
    _check_person(person)
    r = _q("SELECT name, team, title, tz_offset_hours, work_start, work_end FROM people "
           "WHERE name = ?", (person,))[0]
    return dict(r)
'''

TOOLS["get_meeting"] = '''
def get_meeting(meeting: str):
    """Details of one meeting: {"meeting" (id), "title", "day", "start_hour", "end_hour",
    "room" (null for a room-less call), "organizer", "attendees" (sorted names, organizer
    included)}.

    Args:
        meeting: meeting id, e.g. "M012", as shown by get_room_bookings.
    """
    _require_str(meeting, "meeting")
    rows = _q("SELECT id, title, day, start_hour, end_hour, room, organizer FROM meetings "
              "WHERE id = ?", (meeting,))
    if not rows:
        raise ValueError("unknown meeting %r; meeting ids look like 'M012' and are listed by "
                         "get_room_bookings" % (meeting,))
    r = rows[0]
    people = [a["person"] for a in _q("SELECT person FROM meeting_attendees WHERE meeting = ? "
                                      "ORDER BY person", (meeting,))]
    return {"meeting": r["id"], "title": r["title"], "day": r["day"],
            "start_hour": r["start_hour"], "end_hour": r["end_hour"], "room": r["room"],
            "organizer": r["organizer"], "attendees": people}
'''

TOOLS["get_person_schedule"] = '''
def get_person_schedule(person: str, day: str):
    """The meetings one person attends on one day (room meetings and room-less calls alike),
    ordered by start hour: a list of {"meeting" (id), "title", "start_hour", "end_hour",
    "room" (null for a call)} in office time. The person is busy during each of them and free
    at every other hour.

    Args:
        person: exact name as returned by list_people().
        day: weekday name, one of "Monday", "Tuesday", "Wednesday", "Thursday", "Friday".
    """
    _check_person(person)
    _check_day(day)
    rows = _q("SELECT m.id, m.title, m.start_hour, m.end_hour, m.room FROM meetings m "
              "JOIN meeting_attendees a ON a.meeting = m.id WHERE a.person = ? AND m.day = ? "
              "ORDER BY m.start_hour, m.id", (person, day))
    return [{"meeting": r["id"], "title": r["title"], "start_hour": r["start_hour"],
             "end_hour": r["end_hour"], "room": r["room"]} for r in rows]
'''

TOOLS["find_rooms"] = '''
def find_rooms(min_capacity: int = 0, equipment: str = "", day: str = "", start_hour: int = 0,
               duration: int = 1):
    """Search the meeting rooms by capacity, equipment and free time. Returns the rooms that
    pass every filter given, as a list of {"name", "building", "floor", "capacity",
    "equipment"} ordered by capacity, then name (the smallest room first); [] when none does.

    Args:
        min_capacity: keep only rooms that seat at least this many people; 0 keeps all.
        equipment: keep only rooms that have this item, one of "projector", "speakerphone",
            "video_conference", "whiteboard"; "" keeps all.
        day: weekday name, "Monday" .. "Friday": keep only rooms free (no booking overlapping)
            from start_hour for duration hours on that day; "" (the default) ignores bookings.
        start_hour: office-time start hour of that time range, 8 to 17; give it with day.
        duration: length of that time range in whole hours (default 1).
    """
    _whole(min_capacity, "min_capacity")
    if min_capacity < 0:
        raise ValueError("min_capacity must be 0 or more people, got %r" % (min_capacity,))
    if not isinstance(equipment, str):
        raise ValueError("equipment must be a string ('' keeps every room)")
    items = ["projector", "speakerphone", "video_conference", "whiteboard"]
    if equipment and equipment not in items:
        raise ValueError("unknown equipment %r; the items are: %s" % (equipment,
                                                                     ", ".join(items)))
    if not isinstance(day, str):
        raise ValueError("day must be a string ('' ignores bookings)")
    _whole(start_hour, "start_hour")
    _whole(duration, "duration")
    if day == "":
        if start_hour:
            raise ValueError("start_hour needs a day: give day (e.g. 'Monday') as well")
    else:
        _check_day(day)
        if not 1 <= duration <= 10:
            raise ValueError("duration must be 1 to 10 hours (the office day), got %r"
                             % (duration,))
        if start_hour == 0:
            raise ValueError("day needs a start_hour: give start_hour from 8 to %d as well"
                             % (18 - duration))
        if start_hour < 8 or start_hour + duration > 18:
            raise ValueError("a %d-hour range starting at %r is outside the office day 08:00-18:00;"
                             " give start_hour from 8 to %d" % (duration, start_hour,
                                                               18 - duration))
    return _rooms_found(min_capacity, [equipment] if equipment else [], day, start_hour,
                        start_hour + duration, None)
'''

TOOLS["find_rooms_for_meeting"] = '''
def find_rooms_for_meeting(meeting: str, same_equipment: bool = False):
    """Search the rooms an existing meeting could move to while keeping its day and hours: the
    rooms other than its current room that are free for its whole time range and seat all its
    attendees (organizer included). Returns a list of {"name", "building", "floor",
    "capacity", "equipment"} ordered by capacity, then name (the smallest room first); []
    when none fits.

    Args:
        meeting: meeting id, e.g. "M012", as shown by get_room_bookings.
        same_equipment: True keeps only rooms with every equipment item of the meeting's
            current room; False (the default) ignores equipment.
    """
    _require_str(meeting, "meeting")
    if not isinstance(same_equipment, bool):
        raise ValueError("same_equipment must be true or false, got %r" % (same_equipment,))
    rows = _q("SELECT id, day, start_hour, end_hour, room FROM meetings WHERE id = ?",
              (meeting,))
    if not rows:
        raise ValueError("unknown meeting %r; meeting ids look like 'M012' and are listed by "
                         "get_room_bookings" % (meeting,))
    m = rows[0]
    if same_equipment and m["room"] is None:
        raise ValueError("meeting %r is a room-less call: it has no room equipment to match; "
                         "call again with same_equipment=False" % (meeting,))
    seats = len(_q("SELECT person FROM meeting_attendees WHERE meeting = ?", (meeting,)))
    items = []
    if same_equipment:
        items = [r["item"] for r in _q("SELECT item FROM room_equipment WHERE room = ?",
                                       (m["room"],))]
    return _rooms_found(seats, items, m["day"], m["start_hour"], m["end_hour"], m["room"])
'''

BASE_TOOLS = ["list_rooms", "get_room", "get_room_bookings", "list_people", "get_person",
              "get_meeting", "find_rooms", "find_rooms_for_meeting"]

# ------------------------------------------------------------------------------------- world

_WORLDS = {}


def _world(seed):
    if seed in _WORLDS:
        return _WORLDS[seed]
    rng = rng_for("calendar", seed, "world")
    nb = rng.randint(2, 3)
    bwords = unique_words(rng, nb, 2)
    buildings = [w + " " + rng.choice(_BUILDING_SUFFIX) for w in bwords]
    n_people = rng.randint(16, 22)
    firsts = unique_words(rng, n_people, 2, taken=bwords)
    lasts = unique_words(rng, n_people, 2, taken=bwords + firsts)
    teams = sorted(rng.sample(_TEAM_POOL, 4))
    people = []
    for i in range(n_people):
        tz = 0 if rng.random() < 0.6 else rng.choice([-6, -5, -3, 1, 2, 3])
        ws = rng.choice([8, 9, 9, 10])
        people.append({"name": firsts[i] + " " + lasts[i], "team": rng.choice(teams),
                       "title": rng.choice(_TITLE_POOL), "tz": tz, "ws": ws, "we": ws + 8})
    people.sort(key=lambda p: p["name"])
    n_rooms = rng.randint(10, 14)
    rwords = unique_words(rng, n_rooms, 2, taken=bwords + firsts + lasts)
    rooms = []
    for w in rwords:
        rooms.append({"name": w, "building": rng.choice(buildings), "floor": rng.randint(1, 4),
                      "capacity": rng.choice([4, 4, 6, 6, 8, 8, 10, 12, 14, 20, 30]),
                      "items": sorted(i for i in ITEMS if rng.random() < _ITEM_P[i])})
    for item in ITEMS:  # every item in at least 2 rooms and missing from at least 2
        have = [r for r in rooms if item in r["items"]]
        while len(have) < 2:
            r = rng.choice([r for r in rooms if item not in r["items"]])
            r["items"] = sorted(r["items"] + [item])
            have.append(r)
        while len(have) > len(rooms) - 2:
            r = rng.choice(have)
            r["items"] = [i for i in r["items"] if i != item]
            have.remove(r)
    rooms.sort(key=lambda r: r["name"])

    meetings = []
    busy = set()

    def free(p, day, h, dur):
        return all((p["name"], day, x) not in busy for x in range(h, h + dur))

    def add(title, day, h, dur, room, att):
        mid = "M%03d" % (len(meetings) + 1)
        meetings.append({"id": mid, "title": title, "day": day, "start": h, "end": h + dur,
                         "room": room, "organizer": att[0]["name"],
                         "attendees": sorted(a["name"] for a in att)})
        for a in att:
            for x in range(h, h + dur):
                busy.add((a["name"], day, x))

    for day in DAYS:
        for room in rooms:
            h = OPEN_HOUR
            while h < CLOSE_HOUR:
                if rng.random() < 0.2:
                    dur = rng.choice([1, 1, 2])
                    if h + dur > CLOSE_HOUR:
                        dur = 1
                    k = rng.randint(2, min(4, room["capacity"]))
                    cand = [p for p in people if free(p, day, h, dur)]
                    if len(cand) >= 2:
                        add(rng.choice(_MEETING_TITLES), day, h, dur, room["name"],
                            rng.sample(cand, min(k, len(cand))))
                    h += dur
                else:
                    h += 1
    for day in DAYS:
        for p in people:
            if rng.random() < 0.45:
                h = rng.randint(OPEN_HOUR, CLOSE_HOUR - 1)
                if free(p, day, h, 1):
                    att = [p]
                    others = [q for q in people if q is not p and free(q, day, h, 1)]
                    if others and rng.random() < 0.3:
                        att.append(rng.choice(others))
                    add(rng.choice(_CALL_TITLES), day, h, 1, None, att)
    world = {"seed": seed, "buildings": sorted(buildings), "teams": teams, "people": people,
             "rooms": rooms, "meetings": meetings}
    _WORLDS[seed] = world
    return world


_SCHEMA = """CREATE TABLE people (
  name TEXT PRIMARY KEY,
  team TEXT NOT NULL,
  title TEXT NOT NULL,
  tz_offset_hours INTEGER NOT NULL,  -- local hour = office hour + tz_offset_hours
  work_start INTEGER NOT NULL,       -- local time
  work_end INTEGER NOT NULL          -- local time
);
CREATE TABLE rooms (
  name TEXT PRIMARY KEY,
  building TEXT NOT NULL,
  floor INTEGER NOT NULL,
  capacity INTEGER NOT NULL
);
CREATE TABLE room_equipment (
  room TEXT NOT NULL REFERENCES rooms(name),
  item TEXT NOT NULL,
  PRIMARY KEY (room, item)
);
CREATE TABLE meetings (
  id TEXT PRIMARY KEY,
  title TEXT NOT NULL,
  day TEXT NOT NULL,           -- Monday .. Friday
  start_hour INTEGER NOT NULL, -- office time, whole hours
  end_hour INTEGER NOT NULL,
  room TEXT REFERENCES rooms(name),  -- NULL for a room-less call
  organizer TEXT NOT NULL REFERENCES people(name)
);
CREATE TABLE meeting_attendees (
  meeting TEXT NOT NULL REFERENCES meetings(id),
  person TEXT NOT NULL REFERENCES people(name),
  PRIMARY KEY (meeting, person)
);
"""


def _schema_sql(world):
    out = [_SCHEMA]
    out.append(insert_rows("people", ("name", "team", "title", "tz_offset_hours", "work_start",
                                      "work_end"),
                           [(p["name"], p["team"], p["title"], p["tz"], p["ws"], p["we"])
                            for p in world["people"]]))
    out.append(insert_rows("rooms", ("name", "building", "floor", "capacity"),
                           [(r["name"], r["building"], r["floor"], r["capacity"])
                            for r in world["rooms"]]))
    out.append(insert_rows("room_equipment", ("room", "item"),
                           [(r["name"], i) for r in world["rooms"] for i in r["items"]]))
    out.append(insert_rows("meetings", ("id", "title", "day", "start_hour", "end_hour", "room",
                                        "organizer"),
                           [(m["id"], m["title"], m["day"], m["start"], m["end"], m["room"],
                             m["organizer"]) for m in world["meetings"]]))
    out.append(insert_rows("meeting_attendees", ("meeting", "person"),
                           [(m["id"], a) for m in world["meetings"] for a in m["attendees"]]))
    return "".join(out)


def environment(seed):
    world = _world(seed)
    return {"name": "%s_%d" % (ID, seed),
            "description": "%s Seed %d: %d rooms in %d buildings, %d people in %d teams, %d "
                           "meetings." % (DESCRIPTION, seed, len(world["rooms"]),
                                          len(world["buildings"]), len(world["people"]),
                                          len(world["teams"]), len(world["meetings"])),
            "schema_sql": _schema_sql(world)}


# ------------------------------------------------------------------------------------- judges
# SPEC (pasted into every generated source) describes a task's constraints:
#   fields        answer keys, a sub-list of ["room", "day", "start_hour"] in that order
#   day           fixed day when "day" is not a field (None: untimed or taken from the meeting)
#   start_hour    fixed start when "start_hour" is not a field
#   duration      meeting length in hours
#   room_free     the room may have no booking overlapping the meeting
#   min_capacity  capacity >= this (None: no rule)
#   equipment     items the room must have
#   building      building the room must be in (None: any)
#   people        people who must be free for the whole meeting
#   local_hours   the meeting must lie within each of those people's local working hours
#   days_allowed  None or the days the meeting may be on
#   meeting       an existing meeting id the task is about (ignored when checking busy-ness), with
#     same_time / same_day / other_day / other_room / other_start / seat_attendees /
#     attendees_free / same_equipment flags (see the prompts)
#   conditional   None or {"kind": "late_item" | "building_items" | "day_capacity", ...}

_CONSTANTS = '''
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
OPEN_HOUR = 8
CLOSE_HOUR = 18
'''

_VERIFIER_BODY = "\n" + synth_common.join_defs(synth_common.VERDICT_RESULT, '''
def _int(value):
    """An integer (JSON 10 or 10.0), else None; booleans are not integers."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _overlapping(db, sql, params, start, end, skip):
    """Ids of the meetings selected by `sql` (which must return id, start_hour, end_hour) that
    overlap [start, end), the meeting `skip` left out."""
    out = []
    for r in db.query(sql, params):
        s, e = r.get("start_hour"), r.get("end_hour")
        if r.get("id") == skip:
            continue
        if not isinstance(s, int) or not isinstance(e, int):
            out.append(str(r.get("id")) + " (no usable hours)")
        elif s < end and e > start:
            out.append(r.get("id"))
    return out


def _verify(answer, db):
    data, err = _answer(answer)
    if err:
        return _result([err])
    fields = SPEC["fields"]
    if not isinstance(data, dict):
        return _result(["answer must be a JSON object with the keys %s, got %s"
                        % (", ".join(fields), type(data).__name__)])
    missing = [f for f in fields if f not in data]
    extra = sorted(str(k) for k in data if k not in fields)
    if missing or extra:
        return _result(["missing field(s): %s" % ", ".join(missing)] * bool(missing)
                       + ["unexpected field(s): %s" % ", ".join(extra)] * bool(extra))
    reasons = []

    room = data["room"]
    if not isinstance(room, str):
        return _result(["field 'room' must be a string"])
    rows = db.query("SELECT name, building, capacity FROM rooms WHERE name = ?", (room,))
    if not rows:
        return _result(["unknown room %r" % (room,)])
    info = rows[0]
    items = set(r["item"] for r in db.query("SELECT item FROM room_equipment WHERE room = ?",
                                             (room,)))

    day = SPEC["day"]
    start = SPEC["start_hour"]
    duration = SPEC["duration"]
    capacity = SPEC["min_capacity"]
    needed = list(SPEC["equipment"])
    people = list(SPEC["people"])
    skip = ""
    meeting = None
    if SPEC["meeting"] is not None:
        found = db.query("SELECT id, day, start_hour, end_hour, room FROM meetings WHERE id = ?",
                         (SPEC["meeting"],))
        if not found:
            return _result(["meeting %s is missing from the database" % SPEC["meeting"]])
        meeting = found[0]
        skip = meeting["id"]
        length = meeting["end_hour"] - meeting["start_hour"]
        attendees = [r["person"] for r in db.query(
            "SELECT person FROM meeting_attendees WHERE meeting = ?", (skip,))]
        if SPEC["same_time"]:
            day, start, duration = meeting["day"], meeting["start_hour"], length
        if SPEC["same_day"]:
            day, duration = meeting["day"], length
        if SPEC["other_day"]:
            duration = length
        if SPEC["seat_attendees"]:
            capacity = max(capacity or 0, len(attendees))
        if SPEC["attendees_free"]:
            people = attendees
        if SPEC["same_equipment"]:
            if meeting["room"] is None:
                return _result(["meeting %s has no room" % skip])
            needed += [r["item"] for r in db.query(
                "SELECT item FROM room_equipment WHERE room = ?", (meeting["room"],))]
        if SPEC["other_room"] and room == meeting["room"]:
            reasons.append("room %r is the meeting's current room" % room)

    if "day" in fields:
        day = data["day"]
        if not isinstance(day, str) or day not in DAYS:
            return _result(reasons + ["field 'day' must be one of %s" % ", ".join(DAYS)])
    if "start_hour" in fields:
        start = _int(data["start_hour"])
        if start is None:
            return _result(reasons + ["field 'start_hour' must be an integer hour"])
    timed = day is not None and start is not None
    if timed:
        if start < OPEN_HOUR or start + duration > CLOSE_HOUR:
            reasons.append("a %d-hour meeting starting at %s is outside the office day "
                           "08:00-18:00" % (duration, start))
        if SPEC["days_allowed"] is not None and day not in SPEC["days_allowed"]:
            reasons.append("the meeting may not be on %s" % day)
        if meeting is not None and SPEC["other_day"] and day == meeting["day"]:
            reasons.append("the meeting must move to another day than %s" % meeting["day"])
        if meeting is not None and SPEC["other_start"] and start == meeting["start_hour"]:
            reasons.append("the meeting must start at another hour than %d" % start)

    cap = info.get("capacity")
    if capacity is not None and (not isinstance(cap, int) or cap < capacity):
        reasons.append("room %r seats %s, fewer than %d" % (room, cap, capacity))
    if SPEC["building"] is not None and info.get("building") != SPEC["building"]:
        reasons.append("room %r is in %r, not in %r" % (room, info.get("building"),
                                                        SPEC["building"]))
    lacking = sorted(set(i for i in needed if i not in items))
    if lacking:
        reasons.append("room %r lacks: %s" % (room, ", ".join(lacking)))

    if timed:
        end = start + duration
        if SPEC["room_free"]:
            clash = _overlapping(db, "SELECT id, start_hour, end_hour FROM meetings "
                                     "WHERE room = ? AND day = ?", (room, day), start, end, skip)
            if clash:
                reasons.append("room %r is booked then (%s)" % (room, ", ".join(clash)))
        for person in people:
            prow = db.query("SELECT tz_offset_hours, work_start, work_end FROM people "
                            "WHERE name = ?", (person,))
            if not prow:
                reasons.append("person %r is missing from the database" % person)
                continue
            clash = _overlapping(db, "SELECT m.id AS id, m.start_hour AS start_hour, "
                                     "m.end_hour AS end_hour FROM meetings m JOIN "
                                     "meeting_attendees a ON a.meeting = m.id "
                                     "WHERE a.person = ? AND m.day = ?", (person, day),
                                 start, end, skip)
            if clash:
                reasons.append("%s is busy then (%s)" % (person, ", ".join(clash)))
            if SPEC["local_hours"]:
                p = prow[0]
                tz, ws, we = p["tz_offset_hours"], p["work_start"], p["work_end"]
                if not all(isinstance(x, int) for x in (tz, ws, we)):
                    reasons.append("%s has no usable working hours" % person)
                elif start + tz < ws or end + tz > we:
                    reasons.append("%s works %d-%d local time; the meeting is %d-%d there"
                                   % (person, ws, we, start + tz, end + tz))
        cond = SPEC["conditional"]
        if cond is not None:
            if cond["kind"] == "late_item":
                if start >= cond["from_hour"] and cond["item"] not in items:
                    reasons.append("a meeting starting at %d or later needs a room with %s"
                                   % (cond["from_hour"], cond["item"]))
            elif cond["kind"] == "building_items":
                if info.get("building") == cond["building"]:
                    if cond["then_item"] not in items:
                        reasons.append("a room in %s needs %s" % (cond["building"],
                                                                 cond["then_item"]))
                elif cond["else_item"] not in items:
                    reasons.append("a room outside %s needs %s" % (cond["building"],
                                                                  cond["else_item"]))
            elif cond["kind"] == "day_capacity":
                if day in cond["days"] and (not isinstance(cap, int)
                                            or cap < cond["min_capacity"]):
                    reasons.append("on %s the room must seat at least %d"
                                   % (day, cond["min_capacity"]))
            else:
                reasons.append("unknown rule")
    return _result(reasons)
''', synth_common.VERIFY_TOTAL)

# The oracle's core: the full set of acceptable answers from one bulk read. Also run by the
# generator (on an in-memory copy of the database) to size each task's acceptable set.
_ORACLE_CORE = '''

def _load(db):
    data = {"rooms": {}, "items": {}, "meetings": {}, "attendees": {}, "people": {}}
    for r in db.query("SELECT name, building, capacity FROM rooms"):
        data["rooms"][r["name"]] = r
    for r in db.query("SELECT room, item FROM room_equipment"):
        data["items"].setdefault(r["room"], set()).add(r["item"])
    for r in db.query("SELECT id, day, start_hour, end_hour, room FROM meetings"):
        data["meetings"][r["id"]] = r
    for r in db.query("SELECT meeting, person FROM meeting_attendees"):
        data["attendees"].setdefault(r["meeting"], set()).add(r["person"])
    for r in db.query("SELECT name, tz_offset_hours, work_start, work_end FROM people"):
        data["people"][r["name"]] = r
    return data


def _acceptable(data, spec):
    """Every acceptable answer, as a tuple of values in spec["fields"] order."""
    fields = spec["fields"]
    excluded = spec["meeting"]
    day, start, length = spec["day"], spec["start_hour"], spec["duration"]
    people = set(spec["people"])
    need = set(spec["equipment"])
    cap = spec["min_capacity"] if spec["min_capacity"] is not None else 0
    not_room = not_day = not_start = None
    if excluded is not None:
        m = data["meetings"].get(excluded)
        if m is None:
            return set()
        mlen = m["end_hour"] - m["start_hour"]
        if spec["same_time"]:
            day, start, length = m["day"], m["start_hour"], mlen
        if spec["same_day"]:
            day, length = m["day"], mlen
        if spec["other_day"]:
            not_day, length = m["day"], mlen
        if spec["other_room"]:
            not_room = m["room"]
        if spec["other_start"]:
            not_start = m["start_hour"]
        who = data["attendees"].get(excluded, set())
        if spec["seat_attendees"]:
            cap = max(cap, len(who))
        if spec["attendees_free"]:
            people = set(who)
        if spec["same_equipment"]:
            if m["room"] is None:
                return set()
            need = need | data["items"].get(m["room"], set())
    room_busy, person_busy = set(), set()
    for mid, m in data["meetings"].items():
        if mid == excluded:
            continue
        for hour in range(m["start_hour"], m["end_hour"]):
            if m["room"] is not None:
                room_busy.add((m["room"], m["day"], hour))
            for p in data["attendees"].get(mid, ()):
                person_busy.add((p, m["day"], hour))
    if any(p not in data["people"] for p in people):
        return set()
    timed = "day" in fields or day is not None
    days = list(DAYS) if "day" in fields else [day]
    hours = list(range(OPEN_HOUR, CLOSE_HOUR - length + 1)) if "start_hour" in fields else [start]
    cond = spec["conditional"]
    out = set()
    for name, room in data["rooms"].items():
        have = data["items"].get(name, set())
        if name == not_room or room["capacity"] < cap or not need <= have:
            continue
        if spec["building"] is not None and room["building"] != spec["building"]:
            continue
        if not timed:
            out.add((name,))
            continue
        for d in days:
            if d == not_day or (spec["days_allowed"] is not None and d not in spec["days_allowed"]):
                continue
            for h in hours:
                if h == not_start or h < OPEN_HOUR or h + length > CLOSE_HOUR:
                    continue
                cells = [(d, x) for x in range(h, h + length)]
                if spec["room_free"] and any((name,) + c in room_busy for c in cells):
                    continue
                if any((p,) + c in person_busy for p in people for c in cells):
                    continue
                if spec["local_hours"] and any(
                        h + data["people"][p]["tz_offset_hours"] < data["people"][p]["work_start"]
                        or h + length + data["people"][p]["tz_offset_hours"]
                        > data["people"][p]["work_end"] for p in people):
                    continue
                if cond is not None:
                    if cond["kind"] == "late_item" and h >= cond["from_hour"] \\
                            and cond["item"] not in have:
                        continue
                    if cond["kind"] == "building_items" and (
                            cond["then_item"] if room["building"] == cond["building"]
                            else cond["else_item"]) not in have:
                        continue
                    if cond["kind"] == "day_capacity" and d in cond["days"] \\
                            and room["capacity"] < cond["min_capacity"]:
                        continue
                value = {"room": name, "day": d, "start_hour": h}
                out.add(tuple(value[f] for f in fields))
    return out
'''

_ORACLE_BODY = "\n" + synth_common.join_defs(synth_common.VERDICT_NO, '''
def verify(answer, db):
    try:
        answer, err = _answer(answer)
        if err:
            return _no([err])
        fields = SPEC["fields"]
        if type(answer) is not dict or set(answer.keys()) != set(fields):
            return _no(["the answer must be an object with exactly the keys " + ", ".join(fields)])
        key = []
        for f in fields:
            v = answer[f]
            if f == "start_hour":
                if type(v) is float and math.isfinite(v) and math.floor(v) == v:
                    v = int(v)
                if type(v) is not int:
                    return _no(["start_hour must be an integer"])
            elif type(v) is not str:
                return _no([f + " must be a string"])
            key.append(v)
        if tuple(key) not in _acceptable(_load(db), SPEC):
            return _no(["not one of the acceptable answers"])
        return {"passed": True, "score": 1.0, "reasons": []}
    except Exception as exc:
        return _no(["oracle error: %s" % type(exc).__name__])
''')

_SOLUTION_BODY = '''

def _overlaps(entries, start, end, skip):
    return any(e["meeting"] != skip and e["start_hour"] < end and e["end_hour"] > start
               for e in entries)


def solve(tools):
    fields = SPEC["fields"]
    day, start, length = SPEC["day"], SPEC["start_hour"], SPEC["duration"]
    people = list(SPEC["people"])
    need = list(SPEC["equipment"])
    cap = SPEC["min_capacity"] or 0
    skip = ""
    not_room = not_day = not_start = None
    if SPEC["meeting"] is not None:
        m = tools.get_meeting(SPEC["meeting"])
        skip = m["meeting"]
        mlen = m["end_hour"] - m["start_hour"]
        if SPEC["same_time"]:
            day, start, length = m["day"], m["start_hour"], mlen
        if SPEC["same_day"]:
            day, length = m["day"], mlen
        if SPEC["other_day"]:
            not_day, length = m["day"], mlen
        if SPEC["other_room"]:
            not_room = m["room"]
        if SPEC["other_start"]:
            not_start = m["start_hour"]
        if SPEC["seat_attendees"]:
            cap = max(cap, len(m["attendees"]))
        if SPEC["attendees_free"]:
            people = list(m["attendees"])
        if SPEC["same_equipment"]:
            need = need + tools.get_room(m["room"])["equipment"]
    rooms = []
    for name in tools.list_rooms():
        info = tools.get_room(name)
        if name == not_room or info["capacity"] < cap:
            continue
        if SPEC["building"] is not None and info["building"] != SPEC["building"]:
            continue
        if any(i not in info["equipment"] for i in need):
            continue
        rooms.append(info)
    if "day" not in fields and day is None:
        return {"room": rooms[0]["name"]}
    persons = {}
    if SPEC["local_hours"]:
        for p in people:
            persons[p] = tools.get_person(p)
    days = DAYS if "day" in fields else [day]
    hours = list(range(OPEN_HOUR, CLOSE_HOUR - length + 1)) if "start_hour" in fields else [start]
    cond = SPEC["conditional"]
    bookings = {}
    for d in days:
        if d == not_day or (SPEC["days_allowed"] is not None and d not in SPEC["days_allowed"]):
            continue
        schedules = {p: tools.get_person_schedule(p, d) for p in people}
        for h in hours:
            if h == not_start:
                continue
            if any(_overlaps(schedules[p], h, h + length, skip) for p in people):
                continue
            if any(h + persons[p]["tz_offset_hours"] < persons[p]["work_start"]
                   or h + length + persons[p]["tz_offset_hours"] > persons[p]["work_end"]
                   for p in persons):
                continue
            for info in rooms:
                if cond is not None:
                    if cond["kind"] == "late_item" and h >= cond["from_hour"] \\
                            and cond["item"] not in info["equipment"]:
                        continue
                    if cond["kind"] == "building_items":
                        want = (cond["then_item"] if info["building"] == cond["building"]
                                else cond["else_item"])
                        if want not in info["equipment"]:
                            continue
                    if cond["kind"] == "day_capacity" and d in cond["days"] \\
                            and info["capacity"] < cond["min_capacity"]:
                        continue
                if SPEC["room_free"]:
                    key = (info["name"], d)
                    if key not in bookings:
                        bookings[key] = tools.get_room_bookings(info["name"], d)
                    if _overlaps(bookings[key], h, h + length, skip):
                        continue
                value = {"room": info["name"], "day": d, "start_hour": h}
                return {f: value[f] for f in fields}
    return {f: None for f in fields}
'''


# Levels 1 and 2: one search whose filters are exactly the task's rules (see _search_of), so
# every row it returns is acceptable and the first one (the smallest room) is the answer.
_SEARCH_SOLUTION = '''

def solve(tools):
    if SPEC["meeting"] is not None:
        rows = tools.find_rooms_for_meeting(SPEC["meeting"],
                                            same_equipment=SPEC["same_equipment"])
    else:
        filters = {}
        if SPEC["min_capacity"] is not None:
            filters["min_capacity"] = SPEC["min_capacity"]
        for item in SPEC["equipment"]:
            filters["equipment"] = item
        if SPEC["day"] is not None:
            filters.update(day=SPEC["day"], start_hour=SPEC["start_hour"],
                           duration=SPEC["duration"])
        rows = tools.find_rooms(**filters)
    return {"room": rows[0]["name"] if rows else None}
'''


def _search_of(spec):
    """The search tool whose filters are exactly the rules of `spec` ("find_rooms" or
    "find_rooms_for_meeting"), or None when no single search answers it."""
    plain = (spec["fields"] == ["room"] and not spec["people"] and not spec["local_hours"]
             and spec["days_allowed"] is None and spec["conditional"] is None
             and spec["building"] is None and not any(spec[k] for k in (
                 "same_day", "other_day", "other_start", "attendees_free")))
    if not plain:
        return None
    if spec["meeting"] is None:
        untimed = spec["day"] is None and spec["start_hour"] is None and not spec["room_free"]
        timed = spec["day"] is not None and spec["start_hour"] is not None and spec["room_free"]
        if len(spec["equipment"]) <= 1 and not spec["same_time"] and (untimed or timed):
            return "find_rooms"
        return None
    if (spec["same_time"] and spec["other_room"] and spec["seat_attendees"] and spec["room_free"]
            and spec["min_capacity"] is None and not spec["equipment"]):
        return "find_rooms_for_meeting"
    return None


def _search_hint(spec, search):
    """The prompt's sentence naming the search that answers the task."""
    if search == "find_rooms_for_meeting":
        return (" The search find_rooms_for_meeting lists the other rooms that are free at the "
                "meeting's day and hours and seat all its attendees, the smallest room first%s."
                % ("; with same_equipment=True it keeps only the rooms that have every "
                   "equipment item of the meeting's current room" if spec["same_equipment"]
                   else ""))
    parts = []
    if spec["min_capacity"] is not None:
        parts.append("seat at least min_capacity people")
    if spec["equipment"]:
        parts.append("have the equipment item")
    if spec["day"] is not None:
        parts.append("are free on day from start_hour for duration hours")
    return (" The search find_rooms lists the rooms that %s, the smallest room first."
            % _names(parts))


_ORACLE_NOTE = ("# Independent of verifier.py: computes the whole set of acceptable answers from "
                "one bulk read\n# of the tables, then tests membership.\n\n")


def _sources(task_id, spec, search=None):
    verifier = spec_source("Verifier", ID, task_id, spec,
                           _CONSTANTS + synth_common.ANSWER_ENVELOPE + _VERIFIER_BODY)
    oracle = spec_source("Oracle", ID, task_id, spec,
                         _CONSTANTS + synth_common.ANSWER_ENVELOPE + _ORACLE_CORE + _ORACLE_BODY,
                         imports=("json", "math"), note=_ORACLE_NOTE)
    solution = spec_source("Reference solution", ID, task_id, spec,
                           _CONSTANTS + (_SEARCH_SOLUTION if search else _SOLUTION_BODY))
    return verifier, oracle, solution


_CORE = synth_common.OracleCore(_CONSTANTS + _ORACLE_CORE, "<calendar oracle core>",
                                lambda seed: _schema_sql(_world(seed)))


def _accepted(seed, spec):
    return _CORE.ns["_acceptable"](_CORE.data(seed), spec)


# ------------------------------------------------------------------------------------- tasks

_THEMES = ("free_room", "equipped_room", "meeting_move")


def _base_spec():
    return {"fields": ["room"], "day": None, "start_hour": None, "duration": 1,
            "room_free": False, "min_capacity": None, "equipment": [], "building": None,
            "people": [], "local_hours": False, "days_allowed": None, "meeting": None,
            "same_time": False, "same_day": False, "other_day": False, "other_room": False,
            "other_start": False, "seat_attendees": False, "attendees_free": False,
            "same_equipment": False, "conditional": None}


def _space_size(world, spec):
    n = len(world["rooms"])
    if "day" in spec["fields"]:
        n *= len(DAYS)
    if "start_hour" in spec["fields"]:
        n *= CLOSE_HOUR - OPEN_HOUR
    return n


# Wanted share of the answer space that is acceptable, per level: (low, high) counts are
# derived from it; a draw outside the band is kept only when no draw lands inside.
# The bands do not overlap, so the acceptance rate falls with the level.
_BANDS = {1: (0.3, 0.75), 2: (0.05, 0.28), 3: (0.02, 0.06), 4: (0.0, 0.012)}


def _pick(world, seed, level, draw, rng, prev=None, tries=150):
    """(spec, accepted set) of a draw sized for the level's band (see draw_in_band); prev =
    (accepted, space size) of the lineage's level before (see band_limits)."""
    def measure(spec):
        size = _space_size(world, spec)
        return (_accepted(seed, spec),) + synth_common.band_limits(_BANDS[level], size, prev)

    picked = synth_common.draw_in_band(rng, draw, measure, level, tries)
    if picked is None:
        raise RuntimeError("calendar: no solvable draw for seed %d level %d" % (seed, level))
    return picked


def _hh(h):
    return "%02d:00" % h


def _names(xs, conj="and"):
    xs = list(xs)
    if len(xs) == 1:
        return xs[0]
    return ", ".join(xs[:-1]) + " " + conj + " " + xs[-1]


def _room_meetings(world):
    return [m for m in world["meetings"] if m["room"] is not None and len(m["attendees"]) >= 2]


def _draw(world, theme, level):
    """The parameter draw of (theme, level): a function rng -> spec (or None to skip)."""
    rooms = world["rooms"]
    people = [p["name"] for p in world["people"]]
    caps = sorted(set(r["capacity"] for r in rooms))
    buildings = world["buildings"]

    def timed(spec, rng, fields):
        spec["fields"] = fields
        spec["room_free"] = True
        if "day" not in fields:
            spec["day"] = rng.choice(DAYS)
        return spec

    def d(rng):
        s = _base_spec()
        if theme == "free_room":
            if level == 1:
                s["day"], s["start_hour"] = rng.choice(DAYS), rng.randint(8, 17)
                s["room_free"] = True
            elif level == 2:
                s["day"], s["start_hour"] = rng.choice(DAYS), rng.randint(8, 17)
                s["room_free"] = True
                s["min_capacity"] = rng.choice(caps[1:])
            elif level == 3:
                timed(s, rng, ["room", "start_hour"])
                s["people"] = sorted(rng.sample(people, 2))
                s["min_capacity"] = rng.choice(caps[1:])
            else:
                timed(s, rng, ["room", "day", "start_hour"])
                s["duration"] = rng.choice([1, 2])
                s["people"] = sorted(rng.sample(people, 3))
                s["local_hours"] = True
                s["min_capacity"] = rng.randint(4, 9)
                item, late = rng.sample(ITEMS, 2)
                s["equipment"] = [item]
                s["conditional"] = {"kind": "late_item", "from_hour": rng.choice([13, 14, 15]),
                                    "item": late}
        elif theme == "equipped_room":
            if level == 1:
                s["equipment"] = [rng.choice(ITEMS)]
            elif level == 2:
                s["equipment"] = [rng.choice(ITEMS)]
                s["day"], s["start_hour"] = rng.choice(DAYS), rng.randint(8, 16)
                s["room_free"] = True
                s["duration"] = 2
            elif level == 3:
                timed(s, rng, ["room", "start_hour"])
                s["duration"] = 2
                s["equipment"] = [rng.choice(ITEMS)]
                s["people"] = [rng.choice(people)]
                if rng.random() < 0.5:
                    s["min_capacity"] = rng.choice(caps[1:])
            else:
                timed(s, rng, ["room", "day", "start_hour"])
                s["duration"] = rng.choice([1, 2])
                s["people"] = sorted(rng.sample(people, rng.choice([3, 4])))
                s["local_hours"] = True
                s["min_capacity"] = rng.randint(len(s["people"]), 10)
                banned = rng.choice(DAYS)
                s["days_allowed"] = [x for x in DAYS if x != banned]
                then_item, else_item = rng.sample(ITEMS, 2)
                s["conditional"] = {"kind": "building_items", "building": rng.choice(buildings),
                                    "then_item": then_item, "else_item": else_item}
        else:  # meeting_move
            if level == 1:
                s["min_capacity"] = rng.choice(caps[1:])
                return s
            m = rng.choice(_room_meetings(world))
            s["meeting"] = m["id"]
            if level == 2:
                s["room_free"] = True
                s["same_time"] = s["other_room"] = s["seat_attendees"] = True
                s["same_equipment"] = rng.random() < 0.5
            elif level == 3:
                s["fields"] = ["room", "start_hour"]
                s["room_free"] = True
                s["same_day"] = s["other_start"] = s["seat_attendees"] = True
                s["attendees_free"] = True
            else:
                s["fields"] = ["room", "day", "start_hour"]
                s["room_free"] = True
                s["other_day"] = s["seat_attendees"] = s["attendees_free"] = True
                s["same_equipment"] = rng.random() < 0.7
                s["local_hours"] = True
                big = [c for c in caps if c > len(m["attendees"])]
                if big:
                    s["conditional"] = {"kind": "day_capacity",
                                        "days": sorted(rng.sample(DAYS, 2), key=DAYS.index),
                                        "min_capacity": rng.choice(big)}
        return s
    return d


_FREE_RULE = ("A room is free for a time range when none of its bookings overlaps that range "
              "(a booking ending at 11:00 does not overlap a range starting at 11:00).")
_PERSON_RULE = ("A person is free when none of the meetings they attend overlaps the meeting; "
                "room-less calls count too (get_person_schedule lists them all).")
_LOCAL_RULE = ("Time zones: a person's local hour is the office hour plus their "
               "tz_offset_hours, and their work_start and work_end are local hours; the meeting "
               "must start no earlier than work_start and end no later than work_end in every "
               "listed person's local time.")
_OFFICE_RULE = ("All times are office time in whole hours; the office day runs from 08:00 to "
                "18:00, so a meeting must start at 08:00 or later and end by 18:00.")


def _format(fields):
    parts = {"room": '"room": "<room name>"', "day": '"day": "<Monday|Tuesday|Wednesday|'
             'Thursday|Friday>"', "start_hour": '"start_hour": <start hour in office time, an '
             'integer from 8 to 17>'}
    return ("Any answer that satisfies every rule is accepted. Submit only a JSON object of the "
            "form {%s}, with names spelled exactly as the tools return them, and nothing else."
            % ", ".join(parts[f] for f in fields))


def _prompt(world, spec, search=None):
    f = spec["fields"]
    length = spec["duration"]
    rules = []
    intro = ""
    if spec["meeting"] is None and "day" not in f and spec["day"] is None:
        intro = "Using the tools, name any meeting room that satisfies all of the following."
    elif spec["meeting"] is None and "start_hour" not in f:
        intro = ("Using the tools, find a meeting room for a %d-hour meeting on %s from %s to %s "
                 "(office time)." % (length, spec["day"], _hh(spec["start_hour"]),
                                      _hh(spec["start_hour"] + length)))
        rules.append("the room is free for that whole time range")
    elif spec["meeting"] is None:
        who = (" for %s" % _names(map(quoted, spec["people"]))) if spec["people"] else ""
        when = (" on %s" % spec["day"]) if "day" not in f else " on any day from Monday to Friday"
        pick = "a room and a start hour" if "day" not in f else "a room, a day and a start hour"
        intro = ("Using the tools, schedule a %d-hour meeting%s%s: choose %s such that all of "
                 "the following hold." % (length, who, when, pick))
        rules.append("the meeting lies within the office day (it starts at 08:00 or later and "
                     "ends by 18:00)")
        rules.append("the room is free for the whole meeting")
    else:
        mid = spec["meeting"]
        if spec["same_time"] and search:
            intro = ("Meeting %s has to leave its current room but keep its day and hours. Using "
                     "the tools, name any other room for it." % quoted(mid))
        elif spec["same_time"]:
            intro = ("Meeting %s has to leave its current room but keep its day and hours. Using "
                     "the tools (get_meeting gives its day, hours, room and attendees), name any "
                     "other room for it." % quoted(mid))
            rules.append("the room is not the meeting's current room")
            rules.append("the room is free for the meeting's whole time range on its day")
        elif spec["same_day"]:
            intro = ("Meeting %s must move to another start hour on the same day, keeping its "
                     "length. Using the tools (get_meeting gives its day, hours, room and "
                     "attendees), choose a room (its current room is allowed) and a new start "
                     "hour such that all of the following hold." % quoted(mid))
            rules.append("the start hour differs from the meeting's current start hour, and the "
                         "meeting still lies within the office day (08:00 to 18:00)")
            rules.append("the room is free for the whole new time range; meeting %s itself does "
                         "not count as a booking" % quoted(mid))
        else:
            intro = ("Meeting %s must move to another day of the week (Monday to Friday), "
                     "keeping its length. Using the tools (get_meeting gives its day, hours, "
                     "room and attendees), choose a room, a day and a start hour such that all of "
                     "the following hold." % quoted(mid))
            rules.append("the day differs from the meeting's current day, and the meeting lies "
                         "within the office day (08:00 to 18:00)")
            rules.append("the room is free for the whole new time range")
        if spec["seat_attendees"]:
            rules.append("the room's capacity is at least the number of the meeting's attendees "
                         "(organizer included)")
        if spec["attendees_free"]:
            rules.append("every attendee of the meeting is free for the whole new time range "
                         "(meeting %s itself does not count)" % quoted(mid))
        if spec["same_equipment"]:
            rules.append("the room has every equipment item of the meeting's current room")
    if spec["people"]:
        rules.append("%s %s free for the whole meeting" % (
            _names(map(quoted, spec["people"])),
            "is" if len(spec["people"]) == 1 else "are each"))
    if spec["local_hours"]:
        rules.append("the meeting lies within the working hours of every %s in their own time "
                     "zone" % ("attendee" if spec["attendees_free"] else "person named above"))
    if spec["min_capacity"] is not None:
        rules.append("the room's capacity is at least %d people" % spec["min_capacity"])
    if spec["building"] is not None:
        rules.append("the room is in %s" % quoted(spec["building"]))
    for item in spec["equipment"]:
        rules.append("the room has %s" % _ITEM_WORDS[item])
    if spec["days_allowed"] is not None:
        banned = [x for x in DAYS if x not in spec["days_allowed"]]
        rules.append("the meeting is not on %s" % _names(banned, "or"))
    c = spec["conditional"]
    if c is not None:
        if c["kind"] == "late_item":
            rules.append("if the meeting starts at %s or later, the room must also have %s "
                         "(no extra rule for an earlier start)"
                         % (_hh(c["from_hour"]), _ITEM_WORDS[c["item"]]))
        elif c["kind"] == "building_items":
            rules.append("if the room is in %s it must have %s; if it is in any other building "
                         "it must have %s" % (quoted(c["building"]),
                                              _ITEM_WORDS[c["then_item"]],
                                              _ITEM_WORDS[c["else_item"]]))
        else:
            rules.append("if the meeting is on %s, the room's capacity must be at least %d "
                         "(no extra rule on other days)" % (_names(c["days"], "or"),
                                                           c["min_capacity"]))
    if search:
        intro += _search_hint(spec, search)
    text = intro + "\nRules:\n" + "".join("- %s;\n" % r for r in rules).rstrip(";\n") + ".\n"
    notes = []
    timed = "day" in f or spec["day"] is not None or spec["meeting"] is not None
    if timed and not spec["same_time"]:
        notes.append(_OFFICE_RULE)
    if spec["room_free"]:
        notes.append(_FREE_RULE)
    if spec["people"] or spec["attendees_free"]:
        notes.append(_PERSON_RULE)
    if spec["local_hours"]:
        notes.append(_LOCAL_RULE)
    if spec["min_capacity"] is not None or spec["seat_attendees"]:
        notes.append("\"At least\" includes equality.")
    if notes:
        text += " ".join(notes) + "\n"
    return text + _format(f)


def _schema(world, spec, theme):
    props = {"room": {"type": "string", "minLength": 1, "x-domain": "rooms.name",
                      "description": "Exact room name."},
             "day": {"type": "string", "enum": list(DAYS), "description": "Weekday."},
             "start_hour": {"type": "integer", "minimum": OPEN_HOUR, "maximum": CLOSE_HOUR - 1,
                            "description": "Start hour in office time."}}
    return object_schema("calendar %s answer" % theme, {k: props[k] for k in spec["fields"]})


def _tools_of(spec):
    names = ["list_rooms", "get_room"]
    if spec["room_free"]:
        names.append("get_room_bookings")
    if spec["local_hours"]:
        names.append("get_person")
    if spec["meeting"] is not None:
        names.append("get_meeting")
    if spec["people"] or spec["attendees_free"]:
        names.append("get_person_schedule")
    return [n for n in TOOLS if n in names]


def _constraint_count(spec):
    n = 0
    n += spec["room_free"]
    n += spec["min_capacity"] is not None
    n += len(spec["equipment"])
    n += spec["building"] is not None
    n += len(spec["people"])
    n += spec["local_hours"]
    n += spec["days_allowed"] is not None
    n += sum(bool(spec[k]) for k in ("other_day", "other_room", "other_start", "seat_attendees",
                                     "attendees_free", "same_equipment"))
    n += spec["conditional"] is not None
    n += "start_hour" in spec["fields"] or "day" in spec["fields"] or spec["day"] is not None
    return n


_CHOSEN = {}


def _choose(seed, lineage, level, attempt):
    """(spec, acceptable set) of a task; level L's draw is sized below level L-1's share."""
    key = (seed, lineage, level, attempt)
    if key not in _CHOSEN:
        world = _world(seed)
        theme = _THEMES[lineage % len(_THEMES)]
        prev = None
        if level > 1:
            pspec, pacc = _choose(seed, lineage, level - 1, attempt)
            prev = (len(pacc), _space_size(world, pspec))
        rng = rng_for("calendar", seed, "task", lineage, level, attempt)
        _CHOSEN[key] = _pick(world, seed, level, _draw(world, theme, level), rng, prev)
    return _CHOSEN[key]


def task(seed, lineage, level, attempt):
    world = _world(seed)
    theme = _THEMES[lineage % len(_THEMES)]
    spec, acc = _choose(seed, lineage, level, attempt)
    task_id = "%s_l%d_%d" % (theme, level, lineage)
    search = _search_of(spec) if level <= 2 else None
    if level <= 2 and search is None:
        raise RuntimeError("calendar: %s has no one-search form" % task_id)
    verifier, oracle, solution = _sources(task_id, spec, search)
    size = _space_size(world, spec)
    hidden = 0
    if spec["meeting"] is not None:
        hidden = 1 + sum(bool(spec[k]) for k in ("seat_attendees", "attendees_free",
                                                 "same_equipment"))
    hops = (1 + (spec["room_free"] or bool(spec["equipment"]))
            + bool(spec["people"] or spec["attendees_free"]) + bool(spec["meeting"])
            + spec["local_hours"])
    if search:
        # One call; the search looks the meeting up itself and returns exactly the acceptable
        # rooms (its filters are the rules), so they are the list the solver reads.
        hops, hidden = 1, 0
    knobs = {"template": theme, "theme": theme, "level": level, "lineage": lineage,
             "attempt": attempt, "constraints": _constraint_count(spec),
             "hops": hops,
             "list_size": len(acc) if search else len(world["rooms"]),
             "distractors": size - len(acc),
             "hidden_steps": hidden,
             "conditional_rules": int(spec["conditional"] is not None),
             "answer_space": size, "acceptable_answers": len(acc),
             "answer_fields": list(spec["fields"])}
    if search:
        knobs["search"] = search
    return {"id": task_id, "prompt": _prompt(world, spec, search),
            "answer_schema": _schema(world, spec, theme), "knobs": knobs,
            "solution": solution, "verifier": verifier, "oracle": oracle,
            "tools": [search] if search else _tools_of(spec)}
