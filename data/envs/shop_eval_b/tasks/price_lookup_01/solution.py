def solve(tools):
    p = tools.get_product("Rabi Mat", "price")
    return {"price": p["price"]}
