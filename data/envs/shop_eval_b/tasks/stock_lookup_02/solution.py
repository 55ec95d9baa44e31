def solve(tools):
    p = tools.get_product("Subomen Bulb")
    return {"stock": p["stock"]}
