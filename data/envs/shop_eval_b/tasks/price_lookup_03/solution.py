def solve(tools):
    p = tools.get_product("Sule Hose")
    return {"price": p["price"]}
