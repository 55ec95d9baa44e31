"""Trip-planning tools over a database of Chinese cities.

The runtime injects a module global ``db`` before any tool is called:
``db.query(sql, params=()) -> list[dict]`` on the session's own copy of the data.
Do not assign ``db`` here.  Public functions are tools; helpers start with ``_``.

All money amounts are in CNY (Chinese yuan).  Ratings are on a 1.0-5.0 scale with
one decimal.  Names must be given exactly as returned by the listing tools.
"""

import re

# keyword -> column, per entity.  Keywords are matched case-insensitively; the
# database column name is accepted as an alias of its keyword.
_CITY_FIELDS = {
    "province": "province",
    "region": "region",
    "latitude": "latitude",
    "longitude": "longitude",
    "population_millions": "population_millions",
    "local_cuisine": "local_cuisine",
    "has_metro": "has_metro",
    "has_airport": "has_airport",
    "description": "description",
}
_HOTEL_FIELDS = {
    "city": "city",
    "district": "district",
    "stars": "stars",
    "price": "price_per_night",
    "rating": "rating",
}
_RESTAURANT_FIELDS = {
    "city": "city",
    "district": "district",
    "cuisine": "cuisine",
    "price": "price_per_person",
    "rating": "rating",
    "opening_hours": "opening_hours",
}
_ATTRACTION_FIELDS = {
    "city": "city",
    "district": "district",
    "category": "category",
    "price": "ticket_price",
    "rating": "rating",
    "open_hours": "open_hours",
    "recommended_hours": "recommended_hours",
}
_BOOL_COLUMNS = ("has_metro", "has_airport")
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _q(sql, params=()):
    return db.query(sql, params)  # noqa: F821  (db is injected by the runtime)


def _require_str(value, what):
    if not isinstance(value, str) or not value.strip():
        raise ValueError("%s must be a non-empty string, got %r" % (what, value))


def _suggest(table, name):
    """Up to three existing names that look like `name` (case/space-insensitive)."""
    key = " ".join(name.lower().split())
    rows = _q("SELECT name FROM %s ORDER BY name" % table)
    exact = [r["name"] for r in rows if " ".join(r["name"].lower().split()) == key]
    if exact:
        return exact[:3]
    return [r["name"] for r in rows if key and key in r["name"].lower()][:3]


def _unknown(kind, table, name):
    hint = _suggest(table, name)
    msg = "unknown %s %r" % (kind, name)
    if hint:
        msg += "; did you mean: " + ", ".join(repr(h) for h in hint) + "?"
    elif kind == "city":
        msg += "; call get_all_cities() for the list of cities"
    return ValueError(msg)


def _check_city(city):
    _require_str(city, "city")
    if not _q("SELECT 1 AS ok FROM cities WHERE name = ?", (city,)):
        raise _unknown("city", "cities", city)


def _resolve_keywords(info_keywords, fields, kind):
    if isinstance(info_keywords, str):
        info_keywords = [info_keywords]
    if not isinstance(info_keywords, list):
        raise ValueError("info_keywords must be a list of strings")
    valid = ", ".join(sorted(fields))
    if not info_keywords:
        return [(k, fields[k]) for k in fields]
    out = []
    for kw in info_keywords:
        if not isinstance(kw, str):
            raise ValueError("info_keywords must contain strings; valid keywords for a %s: %s"
                             % (kind, valid))
        k = kw.strip().lower()
        col = fields.get(k)
        if col is None:
            for key, column in fields.items():
                if column == k:
                    col = column
                    break
        if col is None:
            raise ValueError("unknown info keyword %r for a %s; valid keywords: %s"
                             % (kw, kind, valid))
        out.append((kw, col))
    return out


def _infos(info_keywords, table, name, fields, kind):
    pairs = _resolve_keywords(info_keywords, fields, kind)
    _require_str(name, kind)
    rows = _q("SELECT * FROM %s WHERE name = ?" % table, (name,))
    if not rows:
        raise _unknown(kind, table, name)
    row = rows[0]
    result = {}
    for kw, col in pairs:
        value = row[col]
        if col in _BOOL_COLUMNS and value is not None:
            value = bool(value)
        result[kw] = value
    return result


def _city_of(table, name, kind):
    _require_str(name, kind)
    rows = _q("SELECT city FROM %s WHERE name = ?" % table, (name,))
    if not rows:
        raise _unknown(kind, table, name)
    return rows[0]["city"]


def _names_in_city(table, city):
    _check_city(city)
    return [r["name"] for r in _q("SELECT name FROM %s WHERE city = ? ORDER BY name" % table,
                                  (city,))]


# ------------------------------------------------------------------------------ tools
# Each docstring is a single paragraph: the runtime shows the first paragraph to the model.

def get_all_cities():
    """List the names of all cities in the database, sorted alphabetically. Returns a list of
    strings, e.g. ["Beijing", "Changsha", ...]; use these exact names in the other tools.
    """
    return [r["name"] for r in _q("SELECT name FROM cities ORDER BY name")]


def get_all_hotels_by_city(city: str):
    """List the names of all hotels located in a city, sorted alphabetically. city: exact city
    name as returned by get_all_cities(), e.g. "Hangzhou". Returns a list of hotel names; use
    get_infos_by_hotel for nightly prices (CNY) and ratings. Raises an error for an unknown city.
    """
    return _names_in_city("hotels", city)


def get_all_restaurants_by_city(city: str):
    """List the names of all restaurants located in a city, sorted alphabetically. city: exact
    city name as returned by get_all_cities(). Returns a list of restaurant names; use
    get_infos_by_restaurant for prices per person (CNY) and ratings. Raises an error for an
    unknown city.
    """
    return _names_in_city("restaurants", city)


def get_all_attractions_by_city(city: str):
    """List the names of all tourist attractions located in a city, sorted alphabetically.
    city: exact city name as returned by get_all_cities(). Returns a list of attraction names;
    use get_infos_by_attraction for ticket prices (CNY) and ratings. Raises an error for an
    unknown city.
    """
    return _names_in_city("attractions", city)


def get_city_by_hotel(hotel: str):
    """Return the name of the city in which a hotel is located, as a string. hotel: exact hotel
    name. Raises an error for an unknown hotel.
    """
    return _city_of("hotels", hotel, "hotel")


def get_city_by_restaurant(restaurant: str):
    """Return the name of the city in which a restaurant is located, as a string. restaurant:
    exact restaurant name. Raises an error for an unknown restaurant.
    """
    return _city_of("restaurants", restaurant, "restaurant")


def get_city_by_attraction(attraction: str):
    """Return the name of the city in which a tourist attraction is located, as a string.
    attraction: exact attraction name. Raises an error for an unknown attraction.
    """
    return _city_of("attractions", attraction, "attraction")


def get_infos_by_city(info_keywords: list[str], city: str):
    """Get selected facts about a city as an object {keyword: value}. info_keywords: the fields
    to return, any of "province", "region", "latitude", "longitude", "population_millions"
    (residents, millions), "local_cuisine", "has_metro" (true/false), "has_airport"
    (true/false), "description"; an empty list returns all fields. city: exact city name.
    Raises an error for an unknown city or keyword.
    """
    _check_city(city)
    return _infos(info_keywords, "cities", city, _CITY_FIELDS, "city")


def get_infos_by_hotel(info_keywords: list[str], hotel: str):
    """Get selected facts about a hotel as an object {keyword: value}. info_keywords: the fields
    to return, any of "price" (price of one night, CNY, integer), "rating" (guest rating
    1.0-5.0, one decimal), "stars" (1-5), "city", "district"; an empty list returns all fields.
    hotel: exact hotel name. Example: get_infos_by_hotel(["price", "rating"], name) ->
    {"price": 588, "rating": 4.3}. Raises an error for an unknown hotel or keyword.
    """
    return _infos(info_keywords, "hotels", hotel, _HOTEL_FIELDS, "hotel")


def get_infos_by_restaurant(info_keywords: list[str], restaurant: str):
    """Get selected facts about a restaurant as an object {keyword: value}. info_keywords: the
    fields to return, any of "price" (average spend per person for one meal, CNY, integer),
    "rating" (guest rating 1.0-5.0, one decimal), "cuisine", "opening_hours", "city",
    "district"; an empty list returns all fields. restaurant: exact restaurant name. Raises an
    error for an unknown restaurant or keyword.
    """
    return _infos(info_keywords, "restaurants", restaurant, _RESTAURANT_FIELDS, "restaurant")


def get_infos_by_attraction(info_keywords: list[str], attraction: str):
    """Get selected facts about a tourist attraction as an object {keyword: value}.
    info_keywords: the fields to return, any of "price" (adult entrance ticket, CNY, integer;
    0 means free entry), "rating" (visitor rating 1.0-5.0, one decimal), "category",
    "open_hours", "recommended_hours" (suggested visit length in hours), "city", "district";
    an empty list returns all fields. attraction: exact attraction name. Raises an error for an
    unknown attraction or keyword.
    """
    return _infos(info_keywords, "attractions", attraction, _ATTRACTION_FIELDS, "attraction")


def get_city_transport(city: str):
    """List the local (intra-city) transport options of a city. city: exact city name. Returns a
    list of objects {"mode" ("metro", "bus", "taxi" or "bike_share"), "base_price" (CNY per
    ride; for taxi the base fare covering the first 3 km), "price_per_km" (CNY per extra km,
    null when the fare is flat), "operating_hours", "description"}. Raises an error for an
    unknown city.
    """
    _check_city(city)
    rows = _q("SELECT mode, base_price, price_per_km, operating_hours, description "
              "FROM city_transport WHERE city = ? ORDER BY mode", (city,))
    return [dict(r) for r in rows]


def get_inter_city_transport(from_city: str, to_city: str):
    """List the direct trains and flights from one city to another; they run every day with the
    same timetable. from_city, to_city: exact city names (must differ). Returns a list ordered
    by departure time of objects {"code" (service number, e.g. "G1234" or "MU5678"), "mode"
    ("train" or "flight"), "from_city", "to_city", "depart_time" and "arrive_time" (HH:MM local
    time), "duration_minutes", "price" (CNY per person; train second class, flight economy)}.
    An empty list means there is no direct connection. Raises an error for unknown cities.
    """
    _check_city(from_city)
    _check_city(to_city)
    if from_city == to_city:
        raise ValueError("from_city and to_city must be different cities")
    rows = _q("SELECT code, mode, from_city, to_city, depart_time, arrive_time, "
              "duration_minutes, price FROM inter_city_transport "
              "WHERE from_city = ? AND to_city = ? ORDER BY depart_time, code",
              (from_city, to_city))
    return [dict(r) for r in rows]


def get_weather_by_city_date(city: str, date: str):
    """Get the weather forecast of a city on one date. city: exact city name. date: "YYYY-MM-DD",
    data covers 2025-09-28 to 2025-10-08. Returns {"city", "date", "condition" (one of "Sunny",
    "Partly Cloudy", "Cloudy", "Overcast", "Light Rain", "Moderate Rain", "Heavy Rain",
    "Thunderstorm"), "temp_high_c", "temp_low_c" (degrees Celsius)}. Raises an error for an
    unknown city or a date without data.
    """
    _check_city(city)
    if not isinstance(date, str) or not _DATE_RE.match(date.strip()):
        raise ValueError("date must be a string formatted YYYY-MM-DD, got %r" % (date,))
    rows = _q("SELECT city, date, condition, temp_high_c, temp_low_c FROM weather "
              "WHERE city = ? AND date = ?", (city, date.strip()))
    if not rows:
        span = _q("SELECT MIN(date) AS lo, MAX(date) AS hi FROM weather WHERE city = ?", (city,))
        raise ValueError("no weather data for %s on %s; available dates are %s to %s"
                         % (city, date, span[0]["lo"], span[0]["hi"]))
    return dict(rows[0])
