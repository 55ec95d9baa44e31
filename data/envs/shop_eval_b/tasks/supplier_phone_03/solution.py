def solve(tools):
    p = tools.get_product("Sila Shears")
    s = tools.get_supplier(p["supplier"])
    return {"phone": s["phone"]}
