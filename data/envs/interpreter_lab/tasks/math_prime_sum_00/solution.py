import numpy as np

LO, HI = 166854, 299056
sieve = np.ones(HI + 1, dtype=bool)
sieve[:2] = False
for i in range(2, int(HI ** 0.5) + 1):
    if sieve[i]:
        sieve[i * i::i] = False
primes = np.nonzero(sieve[LO:])[0] + LO
answer = {"value": int(primes.astype(np.int64).sum())}
