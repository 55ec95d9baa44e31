import csv

with open("employees.csv", newline="") as f:
    rows = list(csv.DictReader(f))
for r in rows:
    for k in ("level", "hire_year", "salary"):
        r[k] = int(r[k])
import numpy as np

depts = sorted({r["department"] for r in rows})
answer = {"medians": {d: round(float(np.median([r["salary"] for r in rows
                                                 if r["department"] == d])), 2)
                        for d in depts}}
