def solve(tools):
    rows = tools.list_products("sports")
    best = min(rows, key=lambda r: (r["price"], r["name"]))
    return {"product": best["name"]}
