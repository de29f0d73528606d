#!/usr/bin/env python3
"""Edits a compiled bundle and seals it again (docs/BundleFormat.md, checksum):
the lit tests' way to hand the runtime a bundle the compiler would not write.

  edit-bundle.py IN OUT [--drop-last-wait DEVICE] [--send-window N]

--drop-last-wait DEVICE deletes the last wait_send of that device's program
(the one before its optimizer step, so that no buffer's defining instruction
moves); --send-window N sets the bundle's send window.
"""
import argparse
import json
import zlib

parser = argparse.ArgumentParser()
parser.add_argument("input")
parser.add_argument("output")
parser.add_argument("--drop-last-wait", type=int)
parser.add_argument("--send-window", type=int)
args = parser.parse_args()

with open(args.input) as f:
    bundle = json.load(f)
del bundle["checksum"]
if args.drop_last_wait is not None:
    program = bundle["programs"][args.drop_last_wait]
    waits = [i for i, instr in enumerate(program)
             if instr["op"].startswith("wait_send_")]
    del program[waits[-1]]
if args.send_window is not None:
    bundle["send_window"] = args.send_window
text = json.dumps(bundle, indent=1)[:-1].rstrip() + ',\n "'
text += 'checksum": "crc32:%08x"\n}\n' % (zlib.crc32(text[:-1].encode()) & 0xffffffff)
with open(args.output, "w") as f:
    f.write(text)
