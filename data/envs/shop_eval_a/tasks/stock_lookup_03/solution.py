def solve(tools):
    p = tools.get_product("Mita Sponge", "stock")
    return {"stock": p["stock"]}
