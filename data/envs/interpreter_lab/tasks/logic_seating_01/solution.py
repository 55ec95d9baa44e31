import itertools

PEOPLE = ["Hank", "Iris", "Jack", "Kate", "Liam", "Mona", "Ned", "Olga"]
# [kind, a, b, seat]
CONSTRAINTS = [["seat", "Kate", "", 4], ["not_end", "Olga", "", 0], ["left_of", "Iris", "Liam", 0], ["adjacent", "Hank", "Mona", 0], ["not_adjacent", "Iris", "Mona", 0], ["not_adjacent", "Iris", "Olga", 0]]
n = len(PEOPLE)

def ok(c, seat):
    kind, a, b, s = c
    if kind == "adjacent":
        return abs(seat[a] - seat[b]) == 1
    if kind == "not_adjacent":
        return abs(seat[a] - seat[b]) != 1
    if kind == "left_of":
        return seat[a] < seat[b]
    if kind == "seat":
        return seat[a] == s
    return 1 < seat[a] < n  # not_end

count = 0
for order in itertools.permutations(PEOPLE):
    seat = {p: i + 1 for i, p in enumerate(order)}
    count += all(ok(c, seat) for c in CONSTRAINTS)
answer = {"value": count}
