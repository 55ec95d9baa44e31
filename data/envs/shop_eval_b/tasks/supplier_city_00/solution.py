def solve(tools):
    p = tools.get_product("Rabi Level")
    s = tools.get_supplier(p["supplier"])
    return {"city": s["city"]}
