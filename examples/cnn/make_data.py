#!/usr/bin/env python3
"""Writes the CNN example's dataset: RECORDS records (default 2048) in FILES TFRecord files
(default 4) under DIR, the same bytes for the same --seed.

    python3 make_data.py data/            # data/part-0.tfrecord ... data/part-3.tfrecord
"""

import argparse
import os
import sys

import numpy as np

import cnn
import primus.data


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", help="where the files go (made if missing)")
    parser.add_argument("--records", type=int, default=2048)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    if args.records < 1 or args.files < 1 or args.files > args.records:
        parser.error("--records and --files: expected 1 <= files <= records")
    os.makedirs(args.dir, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    per_file = -(-args.records // args.files)
    for part in range(args.files):
        numbers = range(part * per_file, min(args.records, (part + 1) * per_file))
        path = os.path.join(args.dir, f"part-{part}.tfrecord")
        primus.data.write_tfrecord(path, (cnn.make_record(n, rng) for n in numbers))
    print(f"wrote {args.records} records in {args.files} files to {args.dir}", file=sys.stderr)


if __name__ == "__main__":
    main()
