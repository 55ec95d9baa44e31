def solve(tools):
    p = tools.get_product("Bastil Glove")
    return {"stock": p["stock"]}
