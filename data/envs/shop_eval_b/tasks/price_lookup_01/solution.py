def solve(tools):
    p = tools.get_product("Pomi Radio", "price")
    return {"price": p["price"]}
