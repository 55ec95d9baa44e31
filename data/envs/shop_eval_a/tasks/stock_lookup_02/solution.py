def solve(tools):
    p = tools.get_product("Tasa Sconce")
    return {"stock": p["stock"]}
