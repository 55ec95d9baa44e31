def solve(tools):
    p = tools.get_product("Bati Rake", "supplier")
    s = tools.get_supplier(p["supplier"], "phone")
    return {"phone": s["phone"]}
