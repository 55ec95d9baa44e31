def solve(tools):
    p = tools.get_product("Sole Bulb")
    return {"stock": p["stock"]}
