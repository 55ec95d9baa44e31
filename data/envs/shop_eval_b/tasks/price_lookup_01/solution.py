def solve(tools):
    p = tools.get_product("Sholu Lamp")
    return {"price": p["price"]}
