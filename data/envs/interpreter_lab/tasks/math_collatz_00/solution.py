cache = {1: 0}
def steps(n):
    path = []
    while n not in cache:
        path.append(n)
        n = n // 2 if n % 2 == 0 else 3 * n + 1
    c = cache[n]
    for m in reversed(path):
        c += 1
        cache[m] = c
    return c

best = max(range(1, 45110), key=lambda s: (steps(s), -s))
answer = {"start": best, "steps": steps(best)}
