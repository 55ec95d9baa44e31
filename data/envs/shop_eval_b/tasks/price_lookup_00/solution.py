def solve(tools):
    p = tools.get_product("Repo Skates", "price")
    return {"price": p["price"]}
