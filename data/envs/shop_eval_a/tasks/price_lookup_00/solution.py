def solve(tools):
    p = tools.get_product("Tano Yoyo")
    return {"price": p["price"]}
