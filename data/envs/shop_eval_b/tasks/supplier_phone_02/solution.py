def solve(tools):
    p = tools.get_product("Tibe Folder")
    s = tools.get_supplier(p["supplier"])
    return {"phone": s["phone"]}
