def solve(tools):
    p = tools.get_product("Trizo Desk")
    return {"stock": p["stock"]}
