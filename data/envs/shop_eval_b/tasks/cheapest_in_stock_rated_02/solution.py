def solve(tools):
    rows = tools.list_products("office")
    ok = [r for r in rows if r["stock"] >= 25 and round(r["rating"] * 10) >= 30]
    best = min(ok, key=lambda r: (r["price"], r["title"]))
    return best["title"]
