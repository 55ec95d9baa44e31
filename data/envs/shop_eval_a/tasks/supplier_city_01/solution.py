def solve(tools):
    p = tools.get_product("Pudos Pen")
    s = tools.get_supplier(p["supplier"])
    return {"city": s["city"]}
