def solve(tools):
    p = tools.get_product("Klisax Rake")
    return {"price": p["price"]}
