"""Reference solution: scan Suzhou's hotels, keep those rated >= 4.0, take the minimum
(price, name)."""

CITY = "Suzhou"
MIN_RATING_TENTHS = 40  # ratings have one decimal; compare in tenths to avoid float noise


def solve(tools):
    best = None
    for name in tools.get_all_hotels_by_city(CITY):
        info = tools.get_infos_by_hotel(["price", "rating"], name)
        if int(round(float(info["rating"]) * 10)) < MIN_RATING_TENTHS:
            continue
        key = (info["price"], name)
        if best is None or key < best:
            best = key
    return {"hotel": best[1]}
