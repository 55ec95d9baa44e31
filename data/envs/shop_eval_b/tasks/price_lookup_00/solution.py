def solve(tools):
    p = tools.get_product("Shokin Clamp")
    return {"price": p["price"]}
