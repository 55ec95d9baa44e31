import csv

with open("sales.csv", newline="") as f:
    rows = list(csv.DictReader(f))
for r in rows:
    r["units"] = int(r["units"])
    r["unit_price"] = float(r["unit_price"])
    r["revenue"] = r["units"] * r["unit_price"]
from collections import defaultdict

by_month = defaultdict(float)
for r in rows:
    if r["product"] == "Gadget":
        by_month[r["date"][:7]] += r["revenue"]
answer = {"month": max(by_month, key=by_month.get)}
