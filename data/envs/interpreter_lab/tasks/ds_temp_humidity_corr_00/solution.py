import csv

with open("sensors.csv", newline="") as f:
    rows = list(csv.DictReader(f))
for r in rows:
    for k in ("temperature", "humidity"):
        r[k] = float(r[k]) if r[k] != "" else None
import numpy as np

pairs = [(r["temperature"], r["humidity"]) for r in rows if r["sensor"] == "S4"
         and r["temperature"] is not None and r["humidity"] is not None]
t, h = np.array(pairs).T
answer = {"value": round(float(np.corrcoef(t, h)[0, 1]), 4)}
