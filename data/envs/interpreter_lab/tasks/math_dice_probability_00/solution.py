from fractions import Fraction

DICE, SIDES, TARGET = 9, 8, 38
ways = [1]  # ways[s]: number of rolls with sum s
for _ in range(DICE):
    nxt = [0] * (len(ways) + SIDES)
    for s, w in enumerate(ways):
        for face in range(1, SIDES + 1):
            nxt[s + face] += w
    ways = nxt
p = Fraction(ways[TARGET], SIDES ** DICE)
answer = {"value": "%d/%d" % (p.numerator, p.denominator)}
