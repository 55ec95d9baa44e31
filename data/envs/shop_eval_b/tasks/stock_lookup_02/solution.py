def solve(tools):
    p = tools.get_product("Mopi Player")
    return {"stock": p["stock"]}
