#!/usr/bin/env python3
"""Checks that a screenshot of gpipe's HTML report shows its charts.

Usage: check-screenshot.py SHOT.png WIDTH HEIGHT

The browser drew the page if the PNG has the window's size and each chart's
colours cover a fair number of pixels: the Gantt chart's forward, backward,
receive and optimizer bars, the loss curve and the memory bars. Decodes the
PNG itself (8-bit RGB or RGBA, as Chromium writes), so it needs no package.
"""
import struct
import sys
import zlib

# The report's CSS colours (runtime/src/report/HtmlReport.cpp) and what draws them.
COLOURS = {
    (0x4E, 0x79, 0xA7): "forward bars",
    (0xF2, 0x8E, 0x2B): "backward bars and measured memory",
    (0xA5, 0x9C, 0x94): "receive bars",
    (0x59, 0xA1, 0x4F): "optimizer bars and accuracy",
    (0x9F, 0xB7, 0xD4): "the loss curve",
    (0x8C, 0xD1, 0x7D): "planned resident memory",
}
LEAST_PIXELS = 100


def decode(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit(f"check-screenshot: '{path}' is not a PNG file")
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace:
        sys.exit(f"check-screenshot: expected an 8-bit RGB(A) PNG, got depth "
                 f"{depth}, colour type {colour}, interlace {interlace}")
    channels = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(idat), width * channels
    rows, previous, at = [], bytearray(stride), 0
    for _ in range(height):
        kind, line = raw[at], bytearray(raw[at + 1:at + 1 + stride])
        at += 1 + stride
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                pred = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[i] = (line[i] + pred) & 255
        rows.append(bytes(line))
        previous = line
    return width, height, channels, rows


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    path, want_width, want_height = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    width, height, channels, rows = decode(path)
    if (width, height) != (want_width, want_height):
        sys.exit(f"check-screenshot: expected {want_width}x{want_height} "
                 f"pixels, got {width}x{height}")
    counts = {colour: 0 for colour in COLOURS}
    dark = 0
    for line in rows:
        for x in range(0, width * channels, channels):
            pixel = (line[x], line[x + 1], line[x + 2])
            if pixel in counts:
                counts[pixel] += 1
            elif max(pixel) < 80:
                dark += 1
    failed = False
    for colour, what in COLOURS.items():
        print(f"{what}: {counts[colour]} pixels of #%02x%02x%02x" % colour)
        failed |= counts[colour] < LEAST_PIXELS
    print(f"text: {dark} dark pixels")
    if failed or dark < 1000:
        sys.exit(f"check-screenshot: '{path}' lacks some of the report's "
                 f"charts (fewer than {LEAST_PIXELS} pixels of a colour, or "
                 "no text): the page did not render")
    print(f"check-screenshot: {path} shows every chart")


if __name__ == "__main__":
    main()
