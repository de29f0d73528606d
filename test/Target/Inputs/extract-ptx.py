"""Writes a bundle's code.cuda PTX to a file, checking that it has an entry
for every generated kernel of code.kernels.

usage: extract-ptx.py BUNDLE OUTPUT.ptx
"""
import json
import sys

with open(sys.argv[1]) as f:
    bundle = json.load(f)
code = bundle["code"]
cuda = code["cuda"]
ptx = cuda["ptx"]
symbols = [kernel["symbol"] for kernel in code["kernels"]]
missing = [s for s in symbols if (".entry " + s + "(") not in ptx]
if missing:
    sys.exit("no .entry for " + ", ".join(missing))
with open(sys.argv[2], "w") as f:
    f.write(ptx)
print("arch %s: %d entries for %d kernels" % (cuda["arch"], ptx.count(".entry "), len(symbols)))
