def solve(tools):
    p = tools.get_product("Mimi Racket", "stock")
    return {"stock": p["stock"]}
