def solve(tools):
    p = tools.get_product("Toni Blocks", "supplier")
    s = tools.get_supplier_by_name(p["supplier"], "phone")
    return {"phone": s["phone"]}
