import itertools

PEOPLE = ["Ada", "Ben", "Cal", "Dee", "Eli", "Fay"]
# [speaker, kind, x, y, k]
STATEMENTS = [["Ada", "oneknave", "Ben", "Dee", 0], ["Ben", "diff", "Cal", "Dee", 0], ["Cal", "same", "Dee", "Eli", 0], ["Dee", "diff", "Fay", "Cal", 0], ["Eli", "count", "", "", 3], ["Fay", "oneknave", "Ada", "Dee", 0]]

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
