def solve(tools):
    rows = tools.list_products("bath")
    best = min(rows, key=lambda r: (r["price"], r["name"]))
    return {"product": best["name"]}
