def solve(tools):
    p = tools.get_product("Lobe Wrench")
    s = tools.get_supplier(p["supplier"])
    return {"city": s["city"]}
