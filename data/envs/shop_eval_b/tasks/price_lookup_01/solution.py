def solve(tools):
    p = tools.get_product("Pomi Radio")
    return {"price": p["price"]}
