def solve(tools):
    p = tools.get_product("Sila Amp", "stock")
    return {"stock": p["stock"]}
