def solve(tools):
    p = tools.get_product("Mopi Player", "supplier")
    s = tools.get_supplier(p["supplier"], "city")
    return {"city": s["city"]}
