def solve(tools):
    p = tools.get_product("Tibe Folder", "supplier")
    s = tools.get_supplier(p["supplier"], "city")
    return {"city": s["city"]}
