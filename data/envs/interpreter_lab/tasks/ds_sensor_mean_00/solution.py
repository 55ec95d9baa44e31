import csv

with open("sensors.csv", newline="") as f:
    rows = list(csv.DictReader(f))
for r in rows:
    for k in ("temperature", "humidity"):
        r[k] = float(r[k]) if r[k] != "" else None
import numpy as np

t = np.array([r["temperature"] if r["temperature"] is not None else np.nan
              for r in rows if r["sensor"] == "S1"])
answer = {"value": round(float(np.nanmean(t)), 2)}
