def solve(tools):
    p = tools.get_product("Bati Rake")
    s = tools.get_supplier(p["supplier"])
    return {"phone": s["phone"]}
