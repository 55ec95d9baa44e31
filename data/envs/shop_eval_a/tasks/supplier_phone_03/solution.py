def solve(tools):
    p = tools.get_product("Ribax Bench")
    s = tools.get_supplier(p["supplier"])
    return {"phone": s["phone"]}
