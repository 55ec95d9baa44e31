def solve(tools):
    p = tools.get_product("Drotas Glove")
    return {"price": p["price"]}
