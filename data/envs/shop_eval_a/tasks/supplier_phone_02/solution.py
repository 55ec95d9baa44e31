def solve(tools):
    p = tools.get_product("Tasa Sconce")
    s = tools.get_supplier(p["supplier"])
    return {"phone": s["phone"]}
