N = 534551
# each k divides N // k of the numbers 1..N
answer = {"value": sum(k * (N // k) for k in range(1, N + 1))}
