def solve(tools):
    p = tools.get_product("Rabi Level", "price")
    return {"price": p["price"]}
