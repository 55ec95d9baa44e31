def solve(tools):
    rows = tools.list_products("sports")
    ok = [r for r in rows if r["stock"] >= 35 and round(r["rating"] * 10) >= 40]
    best = min(ok, key=lambda r: (r["price"], r["title"]))
    return best["title"]
