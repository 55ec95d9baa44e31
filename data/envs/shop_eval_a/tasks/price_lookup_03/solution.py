def solve(tools):
    p = tools.get_product("Mike Toaster", "price")
    return {"price": p["price"]}
