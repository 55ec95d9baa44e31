def solve(tools):
    p = tools.get_product("Repo Puzzle")
    s = tools.get_supplier(p["supplier"])
    return {"city": s["city"]}
