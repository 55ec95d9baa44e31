def solve(tools):
    p = tools.get_product("Mimi Racket")
    return {"stock": p["stock"]}
