def solve(tools):
    p = tools.get_product("Desi Shears")
    return {"price": p["price"]}
