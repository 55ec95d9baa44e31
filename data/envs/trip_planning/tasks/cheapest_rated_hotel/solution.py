"""Reference solution: scan Suzhou's hotels, keep those rated >= 4.0, take the minimum
(price, name)."""

CITY = "Suzhou"
MIN_RATING = 4.0
EPS = 1e-9  # tolerate float noise only


def solve(tools):
    best = None
    for name in tools.get_all_hotels_by_city(CITY):
        info = tools.get_infos_by_hotel(["price", "rating"], name)
        if float(info["rating"]) < MIN_RATING - EPS:
            continue
        key = (info["price"], name)
        if best is None or key < best:
            best = key
    return {"hotel": best[1]}
