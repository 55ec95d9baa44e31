def solve(tools):
    p = tools.get_product("Misudri Skates")
    s = tools.get_supplier(p["supplier"])
    return {"city": s["city"]}
