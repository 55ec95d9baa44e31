def solve(tools):
    p = tools.get_product("Sobe Bench")
    s = tools.get_supplier(p["supplier"])
    return {"city": s["city"]}
