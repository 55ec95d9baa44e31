N = 9
BLOCKED = {(1, 2), (3, 9), (4, 2), (4, 3), (5, 5), (6, 2), (6, 9), (8, 3), (8, 4), (9, 1), (9, 3), (9, 4)}  # (row, column), 1-based

def place(row, cols, d1, d2):
    if row > N:
        return 1
    total = 0
    for col in range(1, N + 1):
        if (row, col) in BLOCKED or col in cols or row + col in d1 or row - col in d2:
            continue
        total += place(row + 1, cols | {col}, d1 | {row + col}, d2 | {row - col})
    return total

answer = {"value": place(1, frozenset(), frozenset(), frozenset())}
