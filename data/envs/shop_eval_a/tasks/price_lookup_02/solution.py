def solve(tools):
    p = tools.get_product("Pone Chair", "price")
    return {"price": p["price"]}
