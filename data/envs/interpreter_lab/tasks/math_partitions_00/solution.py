N, K = 105, 8
ways = [1] + [0] * N
for part in range(1, K + 1):
    for total in range(part, N + 1):
        ways[total] += ways[total - part]
answer = {"value": ways[N]}
