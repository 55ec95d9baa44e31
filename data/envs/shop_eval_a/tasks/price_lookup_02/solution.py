def solve(tools):
    p = tools.get_product("Kali Skates", "price")
    return {"price": p["price"]}
