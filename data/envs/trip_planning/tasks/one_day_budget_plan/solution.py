"""Reference solution: fetch every Chengdu hotel, attraction and restaurant once, keep the
ones meeting the rating bars, and return the cheapest plan (ties broken by names)."""

import itertools

CITY = "Chengdu"
BUDGET = 700


def _at_least(x, bound):
    return float(x) >= bound - 1e-9


def solve(tools):
    hotels = []
    for name in tools.get_all_hotels_by_city(CITY):
        info = tools.get_infos_by_hotel(["price", "rating"], name)
        if _at_least(info["rating"], 4.0):
            hotels.append((info["price"], name))
    attractions = []
    for name in tools.get_all_attractions_by_city(CITY):
        info = tools.get_infos_by_attraction(["price", "rating"], name)
        if _at_least(info["rating"], 4.0):
            attractions.append((info["price"], name))
    restaurants = []
    for name in tools.get_all_restaurants_by_city(CITY):
        info = tools.get_infos_by_restaurant(["price", "rating"], name)
        if _at_least(info["rating"], 3.5):
            restaurants.append((info["price"], name))

    best = None
    for (hp, h), (ap, a) in itertools.product(sorted(hotels), sorted(attractions)):
        for (lp, lunch), (dp, dinner) in itertools.permutations(sorted(restaurants), 2):
            total = hp + ap + lp + dp
            key = (total, h, a, lunch, dinner)
            if total <= BUDGET and (best is None or key < best):
                best = key
    _, h, a, lunch, dinner = best
    return {"hotel": h, "attraction": a, "lunch_restaurant": lunch, "dinner_restaurant": dinner}
