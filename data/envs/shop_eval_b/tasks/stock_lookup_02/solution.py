def solve(tools):
    p = tools.get_product("Mopi Player", "stock")
    return {"stock": p["stock"]}
