def solve(tools):
    p = tools.get_product("Tano Yoyo", "price")
    return {"price": p["price"]}
