W, H = 14, 14
BLOCKED = {(1, 0), (5, 8), (5, 12), (6, 0), (10, 2), (13, 7), (13, 14), (14, 4), (14, 6)}
ways = {}
for x in range(W + 1):
    for y in range(H + 1):
        if (x, y) in BLOCKED:
            ways[x, y] = 0
        elif (x, y) == (0, 0):
            ways[x, y] = 1
        else:
            ways[x, y] = ways.get((x - 1, y), 0) + ways.get((x, y - 1), 0)
answer = {"value": ways[W, H]}
