def solve(tools):
    p = tools.get_product("Shokin Clamp")
    s = tools.get_supplier(p["supplier"])
    return {"phone": s["phone"]}
