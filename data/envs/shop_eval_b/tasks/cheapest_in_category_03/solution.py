def solve(tools):
    rows = tools.list_products("kitchen")
    best = min(rows, key=lambda r: (r["price"], r["name"]))
    return {"product": best["name"]}
