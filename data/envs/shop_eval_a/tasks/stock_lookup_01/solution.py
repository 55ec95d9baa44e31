def solve(tools):
    p = tools.get_product("Pole Shovel", "stock")
    return {"stock": p["stock"]}
