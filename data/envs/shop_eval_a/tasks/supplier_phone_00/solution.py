def solve(tools):
    p = tools.get_product("Matun Bat")
    s = tools.get_supplier(p["supplier"])
    return {"phone": s["phone"]}
