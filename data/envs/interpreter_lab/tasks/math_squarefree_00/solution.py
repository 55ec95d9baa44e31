import math
import numpy as np

N = 602842706
root = math.isqrt(N)
mu = np.ones(root + 1, dtype=np.int64)
is_prime = np.ones(root + 1, dtype=bool)
is_prime[:2] = False
for p in range(2, root + 1):
    if is_prime[p]:
        is_prime[2 * p::p] = False
        mu[p::p] *= -1
        mu[p * p::p * p] = 0
d = np.arange(1, root + 1, dtype=np.int64)
answer = {"value": int((mu[1:] * (N // (d * d))).sum())}
