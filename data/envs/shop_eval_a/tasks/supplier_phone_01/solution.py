def solve(tools):
    p = tools.get_product("Nidrix Hose")
    s = tools.get_supplier(p["supplier"])
    return {"phone": s["phone"]}
