def solve(tools):
    p = tools.get_product("Sole Lantern")
    return {"price": p["price"]}
