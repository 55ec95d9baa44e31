def solve(tools):
    p = tools.get_product("Pako Soap")
    s = tools.get_supplier(p["supplier"])
    return {"phone": s["phone"]}
