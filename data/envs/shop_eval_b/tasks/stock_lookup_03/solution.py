def solve(tools):
    p = tools.get_product("Rili Mic", "stock")
    return {"stock": p["stock"]}
