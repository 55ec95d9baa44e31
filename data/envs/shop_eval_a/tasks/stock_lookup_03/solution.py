def solve(tools):
    p = tools.get_product("Bose Headset")
    return {"stock": p["stock"]}
