def solve(tools):
    p = tools.get_product("Mopi Player")
    s = tools.get_supplier(p["supplier"])
    return {"city": s["city"]}
