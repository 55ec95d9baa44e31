def solve(tools):
    p = tools.get_product("Sila Shears", "supplier")
    s = tools.get_supplier(p["supplier"], "phone")
    return {"phone": s["phone"]}
