def solve(tools):
    p = tools.get_product("Ginuklu Folder")
    s = tools.get_supplier(p["supplier"])
    return {"city": s["city"]}
