def solve(tools):
    p = tools.get_product("Zures Wrench")
    s = tools.get_supplier(p["supplier"])
    return {"phone": s["phone"]}
