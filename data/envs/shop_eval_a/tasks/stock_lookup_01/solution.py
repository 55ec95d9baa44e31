def solve(tools):
    p = tools.get_product("Sterun Robot")
    return {"stock": p["stock"]}
