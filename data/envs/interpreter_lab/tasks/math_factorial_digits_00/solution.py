import math

answer = {"value": sum(int(d) for d in str(math.factorial(1281)))}
