def solve(tools):
    p = tools.get_product("Vumos Shelf")
    return {"price": p["price"]}
