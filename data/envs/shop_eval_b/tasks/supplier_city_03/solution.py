def solve(tools):
    p = tools.get_product("Trizo Desk")
    s = tools.get_supplier(p["supplier"])
    return {"city": s["city"]}
