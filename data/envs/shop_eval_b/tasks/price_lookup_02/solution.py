def solve(tools):
    p = tools.get_product("Rina Glove", "price")
    return {"price": p["price"]}
