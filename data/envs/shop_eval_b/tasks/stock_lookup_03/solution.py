def solve(tools):
    p = tools.get_product("Toni Blocks", "stock")
    return {"stock": p["stock"]}
