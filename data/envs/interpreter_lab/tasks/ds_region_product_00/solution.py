import csv

with open("sales.csv", newline="") as f:
    rows = list(csv.DictReader(f))
for r in rows:
    r["units"] = int(r["units"])
    r["unit_price"] = float(r["unit_price"])
    r["revenue"] = r["units"] * r["unit_price"]
import numpy as np

regions = sorted({r["region"] for r in rows})
products = sorted({r["product"] for r in rows})
table = np.zeros((len(regions), len(products)))
for r in rows:
    if "2024-01-01" <= r["date"] <= "2024-06-30":
        table[regions.index(r["region"]), products.index(r["product"])] += r["revenue"]
i, j = np.unravel_index(np.argmax(table), table.shape)
answer = {"region": regions[i], "product": products[j]}
