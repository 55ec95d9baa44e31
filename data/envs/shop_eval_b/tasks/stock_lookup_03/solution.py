def solve(tools):
    p = tools.get_product("Rili Mic")
    return {"stock": p["stock"]}
