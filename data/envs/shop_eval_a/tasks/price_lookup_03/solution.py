def solve(tools):
    p = tools.get_product("Faten Shears")
    return {"price": p["price"]}
