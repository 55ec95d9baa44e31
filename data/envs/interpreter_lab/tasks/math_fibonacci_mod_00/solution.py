M = 998244353
def mat_mult(a, b):
    return [[(a[0][0] * b[0][0] + a[0][1] * b[1][0]) % M, (a[0][0] * b[0][1] + a[0][1] * b[1][1]) % M],
            [(a[1][0] * b[0][0] + a[1][1] * b[1][0]) % M, (a[1][0] * b[0][1] + a[1][1] * b[1][1]) % M]]
result, base, e = [[1, 0], [0, 1]], [[1, 1], [1, 0]], 319460167572301866
while e:
    if e & 1:
        result = mat_mult(result, base)
    base = mat_mult(base, base)
    e >>= 1
answer = {"value": result[0][1]}
