#!/usr/bin/env python3
"""extract_cubins.py CACHE_DIR OUT_DIR - write the image of every jitk cache
entry as OUT_DIR/<lowered name>.<target>.cubin, for cuobjdump. The entry
format is docs/cache-format.md: a 128-byte header, the lowered names, the
image."""
import os
import struct
import sys


def main(cache, out):
    os.makedirs(out, exist_ok=True)
    n = 0
    for root, _, files in os.walk(os.path.join(cache, "v1")):
        for f in files:
            if not f.endswith(".jitk"):
                continue
            data = open(os.path.join(root, f), "rb").read()
            if data[:8] != b"JITKCBN1":
                continue
            target = data[48:64].rstrip(b"\0").decode()
            names_size, = struct.unpack_from("<Q", data, 64)
            image_size, = struct.unpack_from("<Q", data, 80)
            names = data[128:128 + names_size].split(b"\0")[0].decode()
            image = data[128 + names_size:128 + names_size + image_size]
            with open(os.path.join(out, f"{names}.{target}.cubin"), "wb") as fh:
                fh.write(image)
            n += 1
    print(f"extracted {n} cubins into {out}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
