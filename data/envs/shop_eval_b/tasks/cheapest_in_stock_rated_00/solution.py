def solve(tools):
    rows = tools.list_products("bath")
    ok = [r for r in rows if r["stock"] >= 40 and round(r["rating"] * 10) >= 35]
    best = min(ok, key=lambda r: (r["price"], r["title"]))
    return best["title"]
