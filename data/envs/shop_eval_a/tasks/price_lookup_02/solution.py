def solve(tools):
    p = tools.get_product("Kali Skates")
    return {"price": p["price"]}
