def solve(tools):
    p = tools.get_product("Rili Kettle", "stock")
    return {"stock": p["stock"]}
