import csv

with open("sensors.csv", newline="") as f:
    rows = list(csv.DictReader(f))
for r in rows:
    for k in ("temperature", "humidity"):
        r[k] = float(r[k]) if r[k] != "" else None
answer = {"value": sum(1 for r in rows if r["sensor"] == "S3"
                         and (r["temperature"] is None or r["humidity"] is None))}
