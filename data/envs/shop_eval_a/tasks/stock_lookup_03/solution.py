def solve(tools):
    p = tools.get_product("Bose Headset", "stock")
    return {"stock": p["stock"]}
