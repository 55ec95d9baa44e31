def solve(tools):
    p = tools.get_product("Tama Hose")
    return {"price": p["price"]}
