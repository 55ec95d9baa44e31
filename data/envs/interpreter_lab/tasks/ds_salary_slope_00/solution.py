import csv

with open("employees.csv", newline="") as f:
    rows = list(csv.DictReader(f))
for r in rows:
    for k in ("level", "hire_year", "salary"):
        r[k] = int(r[k])
import numpy as np

sel = [r for r in rows if r["department"] == "Finance"]
x = np.array([2024 - r["hire_year"] for r in sel], dtype=float)
y = np.array([r["salary"] for r in sel], dtype=float)
slope, intercept = np.polyfit(x, y, 1)
answer = {"value": round(float(slope), 2)}
