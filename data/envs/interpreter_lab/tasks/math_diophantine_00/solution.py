a, b, c, N = 13, 14, 25, 2918
count = 0
for x in range(N // a + 1):
    for y in range((N - a * x) // b + 1):
        if (N - a * x - b * y) % c == 0:
            count += 1
answer = {"value": count}
