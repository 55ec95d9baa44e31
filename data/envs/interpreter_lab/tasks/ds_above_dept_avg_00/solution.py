import csv

with open("employees.csv", newline="") as f:
    rows = list(csv.DictReader(f))
for r in rows:
    for k in ("level", "hire_year", "salary"):
        r[k] = int(r[k])
from statistics import mean

avg = {d: mean(r["salary"] for r in rows if r["department"] == d)
       for d in {r["department"] for r in rows}}
answer = {"value": sum(1 for r in rows if r["salary"] > avg[r["department"]])}
