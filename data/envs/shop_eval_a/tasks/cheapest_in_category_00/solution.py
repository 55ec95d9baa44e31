def solve(tools):
    rows = tools.list_products("garden")
    best = min(rows, key=lambda r: (r["price"], r["title"]))
    return best["title"]
