import csv

with open("sales.csv", newline="") as f:
    rows = list(csv.DictReader(f))
for r in rows:
    r["units"] = int(r["units"])
    r["unit_price"] = float(r["unit_price"])
    r["revenue"] = r["units"] * r["unit_price"]
answer = {"value": sum(1 for r in rows if r["region"] in ("South", "West")
                         and r["units"] >= 20 and r["unit_price"] < 15)}
