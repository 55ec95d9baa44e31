def solve(tools):
    p = tools.get_product("Mesi Drill", "stock")
    return {"stock": p["stock"]}
