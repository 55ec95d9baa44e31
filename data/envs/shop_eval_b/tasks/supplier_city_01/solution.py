def solve(tools):
    p = tools.get_product("Sholu Lamp")
    s = tools.get_supplier(p["supplier"])
    return {"city": s["city"]}
