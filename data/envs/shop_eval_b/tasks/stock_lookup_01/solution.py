def solve(tools):
    p = tools.get_product("Sole Bulb", "stock")
    return {"stock": p["stock"]}
