def solve(tools):
    p = tools.get_product("Tama Hose", "price")
    return {"price": p["price"]}
