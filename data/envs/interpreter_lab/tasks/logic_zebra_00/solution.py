import itertools

ATTRS = {"name": ["Alice", "Bruno", "Chen", "Dara"], "color": ["blue", "green", "red", "yellow"], "pet": ["bird", "cat", "dog", "fish"]}
# [kind, attribute 1, value 1, attribute 2, value 2, house]
CLUES = [["same", "pet", "dog", "name", "Dara", 0], ["left", "name", "Dara", "color", "yellow", 0], ["left", "name", "Chen", "pet", "fish", 0], ["before", "name", "Chen", "color", "red", 0], ["before", "pet", "cat", "color", "green", 0], ["same", "pet", "dog", "color", "red", 0], ["diff", "pet", "fish", "name", "Alice", 0]]

def holds(c, where):
    kind, a1, v1, a2, v2, house = c
    p1 = where[a1][v1]
    if kind == "pos":
        return p1 == house
    if kind == "notpos":
        return p1 != house
    p2 = where[a2][v2]
    return {"same": p1 == p2, "diff": p1 != p2, "left": p1 + 1 == p2,
            "next": abs(p1 - p2) == 1, "before": p1 < p2}[kind]

solutions = []
names = list(ATTRS)
for combo in itertools.product(*[itertools.permutations(ATTRS[a]) for a in names]):
    where = {a: {v: i + 1 for i, v in enumerate(perm)} for a, perm in zip(names, combo)}
    if all(holds(c, where) for c in CLUES):
        solutions.append(dict(zip(names, combo)))
assert len(solutions) == 1, len(solutions)
answer = {"order": list(solutions[0]["name"])}
