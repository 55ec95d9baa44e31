from fractions import Fraction

s = sum(Fraction(1, k ** 2) for k in range(1, 24 + 1))
answer = {"value": "%d/%d" % (s.numerator, s.denominator)}
