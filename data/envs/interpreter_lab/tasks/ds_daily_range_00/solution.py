import csv

with open("sensors.csv", newline="") as f:
    rows = list(csv.DictReader(f))
for r in rows:
    for k in ("temperature", "humidity"):
        r[k] = float(r[k]) if r[k] != "" else None
from collections import defaultdict

by_day = defaultdict(list)
for r in rows:
    if r["sensor"] == "S1" and r["temperature"] is not None:
        by_day[r["ts"][:10]].append(r["temperature"])
answer = {"date": max(sorted(by_day), key=lambda d: max(by_day[d]) - min(by_day[d]))}
