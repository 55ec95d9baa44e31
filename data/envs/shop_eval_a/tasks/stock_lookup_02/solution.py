def solve(tools):
    p = tools.get_product("Sate Hose", "stock")
    return {"stock": p["stock"]}
