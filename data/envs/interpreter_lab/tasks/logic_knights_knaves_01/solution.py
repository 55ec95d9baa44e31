import itertools

PEOPLE = ["Gil", "Hal", "Ivy", "Jon", "Kim", "Lou"]
# [speaker, kind, x, y, k]
STATEMENTS = [["Gil", "count", "", "", 2], ["Hal", "same", "Kim", "Gil", 0], ["Ivy", "same", "Gil", "Jon", 0], ["Jon", "oneknave", "Ivy", "Lou", 0], ["Kim", "count", "", "", 5], ["Lou", "same", "Ivy", "Kim", 0]]

def says(st, knight):
    _, kind, x, y, k = st
    if kind == "knight":
        return knight[x]
    if kind == "knave":
        return not knight[x]
    if kind == "same":
        return knight[x] == knight[y]
    if kind == "diff":
        return knight[x] != knight[y]
    if kind == "count":
        return sum(knight.values()) == k
    return not knight[x] or not knight[y]  # at least one of x, y is a knave

found = []
for kinds in itertools.product([False, True], repeat=len(PEOPLE)):
    knight = dict(zip(PEOPLE, kinds))
    if all(says(st, knight) == knight[st[0]] for st in STATEMENTS):
        found.append([p for p in PEOPLE if knight[p]])
assert len(found) == 1, found
answer = {"knights": found[0]}
