def solve(tools):
    p = tools.get_product("Toni Blocks", "price")
    return {"price": p["price"]}
