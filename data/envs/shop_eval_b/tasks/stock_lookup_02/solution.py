def solve(tools):
    p = tools.get_product("Mene Robot", "stock")
    return {"stock": p["stock"]}
