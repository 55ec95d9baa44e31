import itertools

PEOPLE = ["Amy", "Bob", "Cyd", "Dan", "Eve", "Fox", "Gus"]
# [kind, a, b, seat]
CONSTRAINTS = [["adjacent", "Dan", "Eve", 0], ["left_of", "Dan", "Cyd", 0], ["not_end", "Amy", "", 0], ["not_adjacent", "Dan", "Bob", 0], ["not_adjacent", "Gus", "Cyd", 0]]
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
