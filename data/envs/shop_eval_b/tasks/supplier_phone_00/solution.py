def solve(tools):
    p = tools.get_product("Bufol Level")
    s = tools.get_supplier(p["supplier"])
    return {"phone": s["phone"]}
