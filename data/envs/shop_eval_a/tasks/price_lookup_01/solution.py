def solve(tools):
    p = tools.get_product("Sole Lantern", "price")
    return {"price": p["price"]}
