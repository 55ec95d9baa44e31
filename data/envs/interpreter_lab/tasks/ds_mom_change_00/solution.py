import csv

with open("sales.csv", newline="") as f:
    rows = list(csv.DictReader(f))
for r in rows:
    r["units"] = int(r["units"])
    r["unit_price"] = float(r["unit_price"])
    r["revenue"] = r["units"] * r["unit_price"]
def revenue(month):
    return sum(r["revenue"] for r in rows
               if r["region"] == "West" and r["date"].startswith(month))

before, after = revenue("2024-10"), revenue("2024-11")
answer = {"value": round(100 * (after - before) / before, 2)}
