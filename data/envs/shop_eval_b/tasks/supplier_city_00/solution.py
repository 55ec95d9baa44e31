def solve(tools):
    p = tools.get_product("Rabi Level", "supplier")
    s = tools.get_supplier(p["supplier"], "city")
    return {"city": s["city"]}
