def solve(tools):
    p = tools.get_product("Mesi Drill")
    return {"stock": p["stock"]}
