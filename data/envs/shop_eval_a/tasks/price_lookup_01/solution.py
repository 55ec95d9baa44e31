def solve(tools):
    p = tools.get_product("Klarer Rake")
    return {"price": p["price"]}
