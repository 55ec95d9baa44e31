def solve(tools):
    p = tools.get_product("Tetor Sponge")
    return {"stock": p["stock"]}
