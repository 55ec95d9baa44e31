def solve(tools):
    p = tools.get_product("Roma Bat")
    s = tools.get_supplier(p["supplier"])
    return {"city": s["city"]}
