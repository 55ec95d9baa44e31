def solve(tools):
    p = tools.get_product("Tibe Mirror", "stock")
    return {"stock": p["stock"]}
