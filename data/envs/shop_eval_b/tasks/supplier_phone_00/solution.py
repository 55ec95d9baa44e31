def solve(tools):
    p = tools.get_product("Mesi Drill")
    s = tools.get_supplier(p["supplier"])
    return {"phone": s["phone"]}
