def solve(tools):
    p = tools.get_product("Pola Blocks", "supplier")
    s = tools.get_supplier(p["supplier"], "phone")
    return {"phone": s["phone"]}
