def solve(tools):
    p = tools.get_product("Pole Shovel")
    return {"stock": p["stock"]}
