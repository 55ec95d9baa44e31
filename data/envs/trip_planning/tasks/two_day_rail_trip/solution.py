"""Reference solution: for every reachable day-2 city (direct train <= 180 min, dry weather on
2025-10-02), combine the cheapest qualifying hotels/attractions and the cheapest train, and
return the cheapest plan overall (ties broken by names). Cheapest plan <= 1000 CNY is valid."""

ORIGIN = "Shanghai"
DAY2 = "2025-10-02"
MAX_MINUTES = 180
DRY = ("Sunny", "Partly Cloudy", "Cloudy", "Overcast")
BUDGET = 1000


def _cheapest_rated(tools, names, info_fn):
    best = None
    for name in names:
        info = info_fn(["price", "rating"], name)
        if float(info["rating"]) >= 4.0 - 1e-9:
            key = (info["price"], name)
            if best is None or key < best:
                best = key
    return best


def solve(tools):
    h1 = _cheapest_rated(tools, tools.get_all_hotels_by_city(ORIGIN), tools.get_infos_by_hotel)
    a1 = _cheapest_rated(tools, tools.get_all_attractions_by_city(ORIGIN),
                         tools.get_infos_by_attraction)
    best = None
    for city in tools.get_all_cities():
        if city == ORIGIN:
            continue
        trains = [t for t in tools.get_inter_city_transport(ORIGIN, city)
                  if t["mode"] == "train" and t["duration_minutes"] <= MAX_MINUTES]
        if not trains:
            continue
        if tools.get_weather_by_city_date(city, DAY2)["condition"] not in DRY:
            continue
        train = min((t["price"], t["code"]) for t in trains)
        h2 = _cheapest_rated(tools, tools.get_all_hotels_by_city(city), tools.get_infos_by_hotel)
        a2 = _cheapest_rated(tools, tools.get_all_attractions_by_city(city),
                             tools.get_infos_by_attraction)
        if h2 is None or a2 is None:
            continue
        total = h1[0] + a1[0] + train[0] + h2[0] + a2[0]
        key = (total, city, train[1], h2[1], a2[1])
        if best is None or key < best:
            best = key
    total, city, code, h2name, a2name = best
    assert total <= BUDGET
    return {"day1_hotel": h1[1], "day1_attraction": a1[1], "train_code": code,
            "day2_city": city, "day2_hotel": h2name, "day2_attraction": a2name}
