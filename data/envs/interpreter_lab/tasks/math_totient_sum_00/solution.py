import numpy as np

N = 99266
phi = np.arange(N + 1, dtype=np.int64)
for p in range(2, N + 1):
    if phi[p] == p:  # p is prime
        phi[p::p] -= phi[p::p] // p
answer = {"value": int(phi[1:].sum())}
