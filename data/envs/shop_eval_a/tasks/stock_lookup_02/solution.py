def solve(tools):
    p = tools.get_product("Tasa Sconce", "stock")
    return {"stock": p["stock"]}
