"""Reference solution for three_day_trip.

Day 1 and day 3 are unconstrained beyond city membership and distinctness, so they take
the alphabetically first hotel, attraction and two restaurants of their city. Day 2 is
searched city by city (alphabetically, skipping Hangzhou): for each hotel, its price tier
decides which (lunch, dinner, attraction) combinations are allowed; the first allowed
combination in a fixed order is taken. Transport and weather are deliberately ignored:
they are not constraints of the task.
"""

START = "Hangzhou"
DATES = ["2025-10-01", "2025-10-02", "2025-10-03"]


def _at_least(x, bound):
    return float(x) >= bound - 1e-9


def _day2_ok(p, lunch, dinner, ticket):
    """lunch, dinner: (price per person CNY, rating). ticket: CNY. p: hotel price."""
    if p >= 800:
        return (lunch[0] + dinner[0] < 350 and _at_least(lunch[1], 4.0)
                and _at_least(dinner[1], 4.0) and ticket < 120)
    if p >= 500:
        return (_at_least(lunch[1], 4.0) or _at_least(dinner[1], 4.0)) and ticket < 180
    # 200 <= p < 500, and (by the task's rule d) also p < 200
    return _at_least(lunch[1], 3.2) or _at_least(dinner[1], 3.2)


def _plain_day(tools, date, city):
    restaurants = tools.get_all_restaurants_by_city(city)
    return {"time": date, "city": city,
            "hotel": tools.get_all_hotels_by_city(city)[0],
            "afternoon_restaurant": restaurants[0],
            "afternoon_attraction": tools.get_all_attractions_by_city(city)[0],
            "evening_restaurant": restaurants[1]}


def _day2(tools, city):
    hotels = [(n, tools.get_infos_by_hotel(["price"], n)["price"])
              for n in tools.get_all_hotels_by_city(city)]
    rests = []
    for n in tools.get_all_restaurants_by_city(city):
        info = tools.get_infos_by_restaurant(["price", "rating"], n)
        rests.append((n, (info["price"], info["rating"])))
    attrs = [(n, tools.get_infos_by_attraction(["price"], n)["price"])
             for n in tools.get_all_attractions_by_city(city)]
    for hotel, p in hotels:
        for lunch, lunch_info in rests:
            for dinner, dinner_info in rests:
                if dinner == lunch:
                    continue
                for attraction, ticket in attrs:
                    if _day2_ok(p, lunch_info, dinner_info, ticket):
                        return {"time": DATES[1], "city": city, "hotel": hotel,
                                "afternoon_restaurant": lunch,
                                "afternoon_attraction": attraction,
                                "evening_restaurant": dinner}
    return None


def solve(tools):
    others = [c for c in tools.get_all_cities() if c != START]
    day1 = _plain_day(tools, DATES[0], START)
    day2 = None
    for city in others:
        day2 = _day2(tools, city)
        if day2 is not None:
            break
    day3_city = [c for c in others if c != day2["city"]][0]
    day3 = _plain_day(tools, DATES[2], day3_city)
    return [day1, day2, day3]
