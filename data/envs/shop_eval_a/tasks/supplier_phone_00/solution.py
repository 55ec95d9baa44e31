def solve(tools):
    p = tools.get_product("Tida Amp")
    s = tools.get_supplier(p["supplier"])
    return {"phone": s["phone"]}
