import math

R = 508
answer = {"value": sum(2 * math.isqrt(R * R - x * x) + 1 for x in range(-R, R + 1))}
