def solve(tools):
    p = tools.get_product("Sate Hose", "price")
    return {"price": p["price"]}
