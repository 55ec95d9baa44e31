def solve(tools):
    p = tools.get_product("Remi Lantern")
    return {"price": p["price"]}
