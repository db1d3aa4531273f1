"""The launch IDs of Nsight Compute's details CSV (ncu --csv --page details) whose grid and block
are the ones asked (the grid by its start, "(4, 16," for any third dimension):
python3 ncu_pick.py DETAILS.csv "(4, 16," "(16, 16, 1)" -> IDs, one per line."""
import csv
import sys

path, grid, block = sys.argv[1], sys.argv[2], sys.argv[3]
ids = []
with open(path, newline="") as f:
    for row in csv.DictReader(l for l in f if l.startswith('"')):
        if row.get("Grid Size", "").startswith(grid) and row.get("Block Size") == block and row["ID"] not in ids:
            ids.append(row["ID"])
print("\n".join(ids))
