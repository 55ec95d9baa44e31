def solve(tools):
    p = tools.get_product("Sobe Torch", "stock")
    return {"stock": p["stock"]}
