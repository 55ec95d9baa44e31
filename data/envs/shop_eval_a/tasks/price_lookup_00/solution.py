def solve(tools):
    p = tools.get_product("Liro Pan", "price")
    return {"price": p["price"]}
