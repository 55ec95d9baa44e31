def solve(tools):
    p = tools.get_product("Liro Pan", "supplier")
    s = tools.get_supplier_by_name(p["supplier"], "city")
    return {"city": s["city"]}
