def solve(tools):
    p = tools.get_product("Faten Shears")
    s = tools.get_supplier(p["supplier"])
    return {"phone": s["phone"]}
