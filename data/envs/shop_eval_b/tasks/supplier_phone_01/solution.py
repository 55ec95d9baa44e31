def solve(tools):
    p = tools.get_product("Shaso Stapler")
    s = tools.get_supplier(p["supplier"])
    return {"phone": s["phone"]}
