def solve(tools):
    p = tools.get_product("Komu Soap")
    s = tools.get_supplier(p["supplier"])
    return {"city": s["city"]}
