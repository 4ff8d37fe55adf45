"""The cost of rewriting one data file of a trace dataset without 1 % of its traces (what a re-sync
after a changed config does to every file holding one), by write options, side by side in one run.

    .venv/bin/python bench/bench_rewrite.py [DATASET_DIR]

DATASET_DIR is a dataset ``traces.sync`` wrote (default: the one ``bench/bench_dataset.py`` leaves
for 1,000,000 turns); its largest data file is read, filtered and written again with each option
set (best of 5 each), and the written file's size and read time are printed.
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from mmsp_notebook.traces._files import ROW_GROUP, dictionary_columns


def best(fn, n=5):
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/mmsp_ds_bench/dataset_1000000")
    files = sorted(root.rglob("*.parquet"), key=os.path.getsize)
    if not files:
        raise SystemExit(f"no data files under {root}: run bench/bench_dataset.py first, or name a dataset")
    path = files[-1]
    source = pq.ParquetFile(path, pre_buffer=False, page_checksum_verification=True)
    table = source.read(use_threads=False)
    tids = pc.unique(table.column("trace_id")).to_pylist()
    drop = random.Random(1).sample(tids, max(1, len(tids) // 100))
    keep = pc.invert(pc.is_in(table.column("trace_id"), value_set=pa.array(drop, pa.large_string())))
    kept = table.filter(keep)
    print(f"{path.relative_to(root)}: {table.num_rows:,} rows, {os.path.getsize(path) / 1e6:.2f} MB; 1 % of its traces dropped")
    print(f"read {best(lambda: source.read(use_threads=False)) * 1000:.0f} ms, filter {best(lambda: table.filter(keep)) * 1000:.0f} ms")
    dicts = dictionary_columns(kept.schema)
    ints = [f.name for f in kept.schema if pa.types.is_integer(f.type) and f.name not in dicts]
    floats = [f.name for f in kept.schema if pa.types.is_floating(f.type) and f.name not in dicts]
    packed = {**{c: "DELTA_BINARY_PACKED" for c in ints}, **{c: "BYTE_STREAM_SPLIT" for c in floats}}
    options = {
        "as written (snappy, checksums)": {},
        "no compression": {"compression": "none"},
        "lz4": {"compression": "lz4"},
        "zstd level 1": {"compression": "zstd", "compression_level": 1},
        "no page checksums": {"write_page_checksum": False},
        "no statistics": {"write_statistics": False},
        "delta ints, split floats": {"column_encoding": packed},
    }
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.parquet")
        for name, extra in options.items():
            kw = {"use_dictionary": dicts, "write_page_checksum": True, **extra}

            def write(kw=kw):
                with pq.ParquetWriter(out, kept.schema, **kw) as writer:
                    writer.write_table(kept, row_group_size=ROW_GROUP)

            t = best(write)
            again = pq.ParquetFile(out, pre_buffer=False)
            r = best(lambda again=again: again.read(use_threads=False))
            print(f"  {name:32s} write {t * 1000:5.0f} ms   size {os.path.getsize(out) / 1e6:6.2f} MB   read {r * 1000:4.0f} ms")


if __name__ == "__main__":
    main()
