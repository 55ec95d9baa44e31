def solve(tools):
    p = tools.get_product("Remi Lantern", "price")
    return {"price": p["price"]}
