def solve(tools):
    p = tools.get_product("Desi Shears", "price")
    return {"price": p["price"]}
