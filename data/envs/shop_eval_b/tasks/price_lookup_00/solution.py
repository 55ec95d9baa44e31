def solve(tools):
    p = tools.get_product("Rabi Level")
    return {"price": p["price"]}
