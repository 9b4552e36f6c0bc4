"""Where keys live: a batch's keys looked up in a version's runs, reading a page or two per key and
run, not the runs.

Per run, the fences in its metadata give each hash a window of one page of hashes; the pages of all
windows are asked for from the kernel at once, searched in place, and the pages of the matching
entries asked for at once before they are taken (three passes over all runs, so that a cold lookup
reads each pass's pages in parallel). Of the entries found, each key's newest valid one answers.
"""

from __future__ import annotations

import mmap

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..store.common.key_order import stable_argsort
from .layout import H, LIVE, SEQ, Layout
from .run_file import RunFiles, fence_positions
from .versions import IndexState, valid


def lookup(files: RunFiles, state: IndexState, keys: pa.Table, hashes: np.ndarray | None = None) -> pa.Table:
    """Where each of `keys` (a table with the key columns) lives: one row per live key, the key
    columns, the partition fields, P (partition bytes) and BUCKET. Keys not live are absent.
    hashes: the keys' hashes (Layout.hashes), when the caller has them."""
    layout = files.layout
    # in the index's key types (a batch may carry finer timestamps than a TIMESTAMP(3) key: the
    # table keeps what its type holds, so that is what to look up, and to hash)
    keys = keys.select(layout.keys)
    types = pa.schema([layout.entry_schema.field(k) for k in layout.keys])
    if keys.schema.types != types.types:
        keys, hashes = keys.cast(types, safe=False), None
    if keys.num_rows == 0 or not any(state.runs):
        return layout.located(layout.entry_schema.empty_table())
    hashes = layout.hashes(keys) if hashes is None else hashes
    order = stable_argsort(hashes)
    sorted_hashes = hashes[order]
    # distinct hashes, hence distinct keys: the common batch (else a key twice, or a collision)
    distinct_hashes = bool((sorted_hashes[1:] != sorted_hashes[:-1]).all())
    wanted_all = sorted_hashes if distinct_hashes else np.unique(sorted_hashes)
    shard = layout.shard_of(wanted_all, state.shards)
    # per shard touched: its runs, and its hashes (sorted, unique)
    touched = np.flatnonzero(np.bincount(shard, minlength=state.shards)).tolist()
    runs = [(seq, name, wanted_all if len(touched) == 1 else wanted_all[shard == s])
            for s in touched for seq, name in state.runs[s]]
    found = [t for t in _candidates(files, runs) if t.num_rows]
    if not found:
        return layout.located(layout.entry_schema.empty_table())
    cand = pa.concat_tables(found)
    if not distinct_hashes:
        distinct = keys.group_by(layout.keys, use_threads=False).aggregate([])
        cand = cand.join(distinct, layout.keys, join_type="inner", use_threads=False)
        return layout.located(_newest_valid(layout, state, cand))
    # A candidate shares its hash with exactly one batch key: compare the keys in place (a hash
    # match is not a key match) instead of joining, and when no key has two candidates (one
    # entry each: every key's newest), skip the newest-per-key sort
    rows = order[np.searchsorted(sorted_hashes, cand.column(H).to_numpy())]
    same = None
    for k in layout.keys:
        eq = pc.equal(cand.column(k), keys.column(k).take(pa.array(rows)))
        same = eq if same is None else pc.and_(same, eq)
    mask = pc.fill_null(same, False)
    cand = cand.filter(mask)
    rows = rows[mask.to_numpy(zero_copy_only=False)]
    if len(rows) and np.bincount(rows).max() > 1:  # a key with two candidates
        return layout.located(_newest_valid(layout, state, cand))
    kept = valid(state, cand)
    return layout.located(kept.filter(kept.column(LIVE)))


def _newest_valid(layout: Layout, state: IndexState, entries: pa.Table) -> pa.Table:
    """Per key, the newest valid entry (a live one before a tombstone of the same run); the
    live ones of those."""
    entries = valid(state, entries)
    if entries.num_rows == 0:
        return entries
    entries = entries.sort_by([(SEQ, "descending"), (LIVE, "descending")])
    entries = entries.append_column("_i", pa.array(np.arange(entries.num_rows, dtype=np.int64)))
    first = entries.group_by(layout.keys, use_threads=False).aggregate([("_i", "min")])
    picked = entries.take(np.sort(first.column("_i_min").to_numpy()))
    return picked.filter(picked.column(LIVE))


def _candidates(files: RunFiles, runs: list[tuple[int, str, np.ndarray]]) -> list[pa.Table]:
    """The entries, with their run's SEQ, of each (seq, run, sorted unique hashes) whose hash is
    among the hashes. Three passes over all runs, so that the kernel reads each pass's pages
    in parallel: (1) windows from the fences and the hash pages they cover asked for; (2) a
    binary search of each hash in its window and the pages of the matching rows asked for; (3)
    those rows taken. A lookup reads a page or two per key and run, not the runs."""
    searches = []
    files.open_runs(name for _, name, _ in runs)
    for seq, name, hashes in runs:
        reader, mapped = files.open_run(name, random_access=True)
        base = pa.py_buffer(mapped).address if mapped is not None else 0
        for batch, lo, hi in _windows(reader, hashes):
            at = batch.column(0).buffers()[1].address
            files.bytes_read += _prefetch(mapped, base, at + 4 * lo, at + 4 * hi)
            searches.append((seq, mapped, base, batch, hashes, lo, hi))
    takes = []
    for seq, mapped, base, batch, hashes, lo, hi in searches:
        h = batch.column(0).to_numpy(zero_copy_only=True)
        if len(hashes) * files.fence_rows >= len(h):
            # a key per fence window or more (a big batch into a small shard): every page of
            # hashes is read anyway, and one search of the whole batch beats windowed steps
            # (the lookup of 200K keys into 1M: 0.21 -> 0.12 s); the same positions either way
            left = np.searchsorted(h, hashes, "left")
            right = _right_bounds(h, hashes, left)
        else:
            left = _search(h, lo, hi, hashes, right=False)
            right = _search(h, lo, hi, hashes, right=True)
        hits = right > left
        if not hits.any():
            continue
        # the positions of every entry of every hit
        positions = _ranges(left[hits], right[hits])
        starts, ends = [], []
        for column in batch.columns[1:]:
            at, width = _values_at(column)
            if width:
                starts.append(at + positions * width // 8)
                ends.append(at + (positions + 1) * width // 8 + 1)
        if starts:
            files.bytes_read += _prefetch(mapped, base, np.concatenate(starts), np.concatenate(ends))
        takes.append((seq, batch, positions))
    found = []
    for seq, batch, positions in takes:
        rows = files.decode(pa.Table.from_batches([batch.take(pa.array(positions, pa.int64()))]), batch.schema)
        found.append(rows.append_column(SEQ, pa.array(np.full(rows.num_rows, seq, np.int64))))
    return found


def _windows(reader: pa.ipc.RecordBatchFileReader,
             hashes: np.ndarray) -> list[tuple[pa.RecordBatch, np.ndarray, np.ndarray]]:
    """Per record batch of a run: the batch, and for each of `hashes` the window [lo, hi) of
    the batch's entries its equal entries lie in, from the fences alone (no hash page read)."""
    meta = reader.schema.metadata or {}
    if b"fences" not in meta or b"fence_rows" not in meta:
        raise ValueError("a key index run without fences")
    step = int(meta[b"fence_rows"])
    fences = np.frombuffer(meta[b"fences"], dtype=np.int32)
    # format 6 says where each batch's fences start; before, every step-th entry from the first
    firsts = np.frombuffer(meta[b"fence_firsts"], np.int32) if b"fence_firsts" in meta else None
    out, at = [], 0
    for i in range(reader.num_record_batches):
        batch = reader.get_batch(i)
        n = batch.num_rows
        if n == 0:
            continue
        positions = fence_positions(n, step, None if firsts is None else int(firsts[i]))
        fence = fences[at:at + len(positions)]
        at += len(positions)
        # fence[lb] < h <= ... : the first entry >= h is at or after lb's position; fence[rb] >
        # h: the last entry <= h is before rb's (a position past the batch's end counts as n)
        lb = np.maximum(np.searchsorted(fence, hashes, side="left") - 1, 0)
        rb = np.searchsorted(fence, hashes, side="right")
        ends = np.append(np.minimum(positions, n), n)
        out.append((batch, positions[lb], ends[rb]))
    return out


def _prefetch(mapped: "mmap.mmap | None", base: int, starts: np.ndarray, ends: np.ndarray) -> int:
    """Ask the kernel for the pages of the byte ranges [starts, ends) of a mapped run, all at
    once: it reads them in parallel, where touching them one by one waits on each in turn (a
    cold 10K-key lookup into 100M keys: 1.6-1.9 s read page by page, ~0.7 s prefetched). The
    bytes asked for."""
    if mapped is None or not hasattr(mapped, "madvise"):
        return 0
    keep = ends > starts
    if not keep.any():
        return 0
    first = (int(starts[keep].min()) - base) // mmap.PAGESIZE
    span = (int(ends[keep].max()) - 1 - base) // mmap.PAGESIZE + 1 - first
    if np.count_nonzero(keep) >= span:  # a range per page or more: the pages they span, at once
        mapped.madvise(mmap.MADV_WILLNEED, first * mmap.PAGESIZE, span * mmap.PAGESIZE)
        return span * mmap.PAGESIZE
    pages = np.unique(_ranges((starts[keep] - base) // mmap.PAGESIZE, (ends[keep] - 1 - base) // mmap.PAGESIZE + 1))
    # one madvise per span of consecutive pages: a system call each, not one per key
    breaks = np.flatnonzero(np.diff(pages) != 1) + 1
    firsts = pages[np.concatenate([[0], breaks])] * mmap.PAGESIZE
    lengths = np.diff(np.concatenate([[0], breaks, [len(pages)]])) * mmap.PAGESIZE
    for first, length in zip(firsts.tolist(), lengths.tolist()):
        mapped.madvise(mmap.MADV_WILLNEED, first, length)
    return len(pages) * mmap.PAGESIZE


def _search(h: np.ndarray, lo: np.ndarray, hi: np.ndarray, x: np.ndarray, right: bool) -> np.ndarray:
    """Per i, the first position in h[lo[i]:hi[i]] (sorted) whose value is > x[i] (right) or >= x[i]
    (left): a binary search of all windows at once, ~log2(FENCE_ROWS) steps, touching only the
    pages inside the windows (numpy's searchsorted takes one range for all values)."""
    lo, hi = lo.copy(), hi.copy()
    while True:
        active = lo < hi
        if not active.any():
            return lo
        mid = (lo + hi) // 2
        v = h[np.where(active, mid, 0)]
        go = (v <= x) if right else (v < x)
        lo = np.where(active & go, mid + 1, lo)
        hi = np.where(active & ~go, mid, hi)


def _right_bounds(h: np.ndarray, hashes: np.ndarray, left: np.ndarray) -> np.ndarray:
    """np.searchsorted(h, hashes, "right") from the left bounds: a run's hashes are nearly all
    distinct, so each hash found has one entry unless the next one is equal too; only those are
    searched again (W1's 200K hashes in a 1M-entry run: 9 ms for a second search, 2 ms this way)."""
    right = left.copy()
    inside = left < len(h)
    found = np.zeros(len(left), np.bool_)
    found[inside] = h[left[inside]] == hashes[inside]
    right[found] += 1
    more = found & (right < len(h))
    more[more] = h[right[more]] == hashes[more]
    if more.any():
        right[more] = np.searchsorted(h, hashes[more], "right")
    return right


def _ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Every integer of every range [starts[i], ends[i]), in order (vectorised)."""
    counts = ends - starts
    shifted = np.repeat(starts - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
    return shifted + np.arange(int(counts.sum()))


def _values_at(column: pa.Array) -> tuple[int, int]:
    """(address, bits per value) of a column's fixed-width values (a dictionary's indices; a
    variable-width column's offsets); (0, 0) when there is none to point at."""
    t = column.type
    if pa.types.is_fixed_size_list(t):  # _loc: its values, list_size per entry
        values = column.values
        if column.offset or values.offset or values.buffers()[1] is None:
            return 0, 0
        return values.buffers()[1].address, t.list_size * t.value_type.bit_width
    if pa.types.is_dictionary(t):
        t = t.index_type
    elif pa.types.is_binary(t) or pa.types.is_string(t):
        t = pa.int32()
    elif pa.types.is_large_binary(t) or pa.types.is_large_string(t):
        t = pa.int64()
    buffers = column.buffers()
    if len(buffers) < 2 or buffers[1] is None or column.offset:
        return 0, 0
    try:
        return buffers[1].address, t.bit_width
    except ValueError:  # not fixed-width (nested)
        return 0, 0
