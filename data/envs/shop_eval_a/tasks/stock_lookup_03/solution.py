def solve(tools):
    p = tools.get_product("Gegis Chair")
    return {"stock": p["stock"]}
