import csv

with open("sales.csv", newline="") as f:
    rows = list(csv.DictReader(f))
for r in rows:
    r["units"] = int(r["units"])
    r["unit_price"] = float(r["unit_price"])
    r["revenue"] = r["units"] * r["unit_price"]
from collections import Counter

units = Counter()
for r in rows:
    if "2024-10-01" <= r["date"] <= "2024-12-31":
        units[r["product"]] += r["units"]
answer = {"products": [p for p, _ in units.most_common(3)]}
