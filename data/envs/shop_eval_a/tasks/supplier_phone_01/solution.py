def solve(tools):
    p = tools.get_product("Pola Blocks")
    s = tools.get_supplier(p["supplier"])
    return {"phone": s["phone"]}
